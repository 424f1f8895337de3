package buttonindex

import (
	"testing"

	"github.com/airlockhq/airlock/card"
)

type row struct {
	kind           card.ActionKind
	action, submit string
}

func keys(r row) Keys { return Keys{Kind: r.kind, Action: r.action, Submit: r.submit} }

// A table whose rows share a kind or a wire id is refused: a click must
// never be taken for another button, nor a button's click for a form's
// submission.
func TestTablesThatWouldMistakeAClickAreRefused(t *testing.T) {
	for name, rows := range map[string][]row{
		"kind twice":                 {{card.ActAllow, "a", ""}, {card.ActAllow, "b", ""}},
		"button id twice":            {{card.ActAllow, "a", ""}, {card.ActDeny, "a", ""}},
		"submission id twice":        {{card.ActDenyReason, "r", "s"}, {card.ActEdit, "e", "s"}},
		"a submission's id a button": {{card.ActAllow, "a", ""}, {card.ActDenyReason, "r", "a"}},
		"no button id":               {{card.ActAllow, "", ""}},
	} {
		if _, err := New(rows, keys, Shared); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if _, err := New([]row{{card.ActDenyReason, "r", "r"}}, keys, Separate); err != nil {
		t.Errorf("separate namespaces: a submission's id equal to its button's refused: %v", err)
	}
	x, err := New([]row{{card.ActAllow, "a", ""}, {card.ActDenyReason, "r", "s"}}, keys, Shared)
	if err != nil {
		t.Fatal(err)
	}
	if r, ok := x.ByAction("r"); !ok || r.kind != card.ActDenyReason {
		t.Errorf("by action: %+v %v", r, ok)
	}
	if _, ok := x.ByAction("s"); ok {
		t.Error("a submission's id found as a button's")
	}
	if r, ok := x.BySubmit("s"); !ok || r.kind != card.ActDenyReason {
		t.Errorf("by submit: %+v %v", r, ok)
	}
	if _, ok := x.BySubmit("r"); ok {
		t.Error("a button's id found as a submission's")
	}
	if x.Action(card.ActAllow) != "a" || x.Action(card.ActDeny) != "" {
		t.Errorf("actions: %q %q", x.Action(card.ActAllow), x.Action(card.ActDeny))
	}
}
