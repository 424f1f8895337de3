package ids

import (
	"regexp"
	"testing"
)

// New's ids have the form stored ids have (26 characters of a-z and 2-7)
// and do not repeat.
func TestNew(t *testing.T) {
	form := regexp.MustCompile(`^[a-z2-7]{26}$`)
	seen := map[string]bool{}
	for range 1000 {
		id := New()
		if !form.MatchString(id) {
			t.Fatalf("id %q is not 26 characters of a-z and 2-7", id)
		}
		if seen[id] {
			t.Fatalf("id %q twice", id)
		}
		seen[id] = true
	}
}
