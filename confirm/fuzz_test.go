package confirm

import (
	"strings"
	"testing"
)

// FuzzParseRef: button values from the wire decode to a reference Airlock
// could have issued, or to ErrBadRef; never a panic.
func FuzzParseRef(f *testing.F) {
	for _, s := range []string{"abc.0", "abc.12", "", ".", "abc.", ".0", "abc.-1", "abc.01", "ABC.0", "a.b.c", "abc.1.2", "abc.1.0", "abc.1.01", "abc.1.", strings.Repeat("a", 150) + ".1", "abc.99999999999999999999"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, ref string) {
		r, err := ParseCallRef(ref)
		if err != nil {
			if err != ErrBadRef {
				t.Fatalf("ParseCallRef(%q): unexpected error %v", ref, err)
			}
			return
		}
		if RefAt(r.Batch, r.Position, r.Revision) != ref {
			t.Fatalf("ParseCallRef(%q) = %+v: does not round-trip", ref, r)
		}
	})
}
