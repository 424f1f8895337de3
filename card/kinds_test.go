package card

import (
	"errors"
	"testing"

	"github.com/airlockhq/airlock/confirm"
)

// Every kind between the first and the last has its row, with a name of
// its own and the reference it carries; a value past them is no kind.
func TestEveryKindHasItsRow(t *testing.T) {
	names := map[string]ActionKind{}
	all := Buttons()
	for k := ActAllow; k <= ActDecline; k++ {
		b, ok := k.Button()
		if !ok || b.Kind != k || b.Name == "" || b.Ref == 0 {
			t.Errorf("kind %d: row %+v, %v", uint8(k), b, ok)
			continue
		}
		if other, dup := names[b.Name]; dup {
			t.Errorf("%s names kinds %d and %d", b.Name, uint8(other), uint8(k))
		}
		names[b.Name] = k
		if b.Submits && !b.Opens {
			t.Errorf("%s submits a form it does not open", b.Name)
		}
		if k.String() != b.Name {
			t.Errorf("kind %d says %q", uint8(k), k.String())
		}
	}
	if len(all) != len(names) || len(all) != int(ActDecline) {
		t.Errorf("Buttons lists %d kinds, %d named", len(all), len(names))
	}
	for _, k := range []ActionKind{0, ActDecline + 1, 255} {
		if b, ok := k.Button(); ok {
			t.Errorf("value %d is a kind: %+v", uint8(k), b)
		}
		if err := k.ParseRef(confirm.Ref("abc", 0)); !errors.Is(err, confirm.ErrBadRef) {
			t.Errorf("value %d parses a reference: %v", uint8(k), err)
		}
	}
}

// A button's reference is parsed by its kind: each kind takes the
// references of its own shape and refuses every other.
func TestParseRefByKind(t *testing.T) {
	refs := map[RefKind]string{
		RefCall:    confirm.Ref("abc123", 1),
		RefGrant:   confirm.GrantRef("g1"),
		RefAll:     confirm.AllRef("abc123", 2),
		RefRun:     confirm.RunRef("r1"),
		RefChecked: confirm.CheckedRef("abc123", 0),
	}
	for _, b := range Buttons() {
		for kind, ref := range refs {
			err := b.Kind.ParseRef(ref)
			if kind == b.Ref && err != nil {
				t.Errorf("%s refused its own %s reference %q: %v", b.Name, kind, ref, err)
			}
			if kind != b.Ref && !errors.Is(err, confirm.ErrBadRef) {
				t.Errorf("%s took a %s reference %q: %v", b.Name, kind, ref, err)
			}
		}
		for _, bad := range []string{"", "x", "abc123:1:2:3", "<@U1>"} {
			if err := b.Kind.ParseRef(bad); !errors.Is(err, confirm.ErrBadRef) {
				t.Errorf("%s took %q: %v", b.Name, bad, err)
			}
		}
	}
}
