package confirm

import (
	"errors"
	"strings"
	"testing"
)

// Only references RunRef makes parse; anything else is ErrBadRef.
func TestParseRunRef(t *testing.T) {
	if id, err := ParseRunRef(RunRef("abc123")); err != nil || id != "abc123" {
		t.Fatalf("%q %v", id, err)
	}
	for _, bad := range []string{"", "run-", "abc123", "run-ABC", "run-../x", "run-a.0", "grant-abc", "run-" + strings.Repeat("a", 100)} {
		if _, err := ParseRunRef(bad); !errors.Is(err, ErrBadRef) {
			t.Errorf("%q: %v", bad, err)
		}
	}
}
