package confirm

import (
	"strings"
	"testing"
)

// FuzzParseRef: button values from the wire decode to a reference Airlock
// could have issued, or to ErrBadRef; never a panic.
func FuzzParseRef(f *testing.F) {
	for _, s := range []string{"abc.0", "abc.12", "", ".", "abc.", ".0", "abc.-1", "abc.01", "ABC.0", "a.b.c", strings.Repeat("a", 150) + ".1", "abc.99999999999999999999"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, ref string) {
		id, pos, err := ParseRef(ref)
		if err != nil {
			if err != ErrBadRef {
				t.Fatalf("ParseRef(%q): unexpected error %v", ref, err)
			}
			return
		}
		if Ref(id, pos) != ref {
			t.Fatalf("ParseRef(%q) = %q, %d: does not round-trip", ref, id, pos)
		}
	})
}
