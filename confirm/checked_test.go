package confirm

import (
	"errors"
	"strings"
	"testing"
)

// A checked reference names a batch and a call; anything else, a call's
// own reference or a grant's among them, is refused.
func TestParseCheckedRef(t *testing.T) {
	ref := CheckedRef("abc123", 2)
	if id, pos, err := ParseCheckedRef(ref); err != nil || id != "abc123" || pos != 2 {
		t.Fatalf("ParseCheckedRef(%q) = %q, %d, %v", ref, id, pos, err)
	}
	for _, bad := range []string{
		"", "checked-", "checked-abc123", "checked-abc123.", "checked-.2", "abc123.2", GrantRef("abc123"),
		"checked-ABC123.2", "checked-abc123.02", "checked-abc123.-1", "checked-abc123.2 ", " checked-abc123.2",
		"checked-abc\u202e123.2", "checked-checked-abc123.2", "Checked-abc123.2", "checked-" + strings.Repeat("a", 100) + ".1",
	} {
		if _, _, err := ParseCheckedRef(bad); !errors.Is(err, ErrBadRef) {
			t.Errorf("ParseCheckedRef(%q) = %v, want ErrBadRef", bad, err)
		}
	}
	if _, _, err := ParseRef(ref); err == nil {
		t.Errorf("ParseRef accepts the checked reference %q as a call's", ref)
	}
}
