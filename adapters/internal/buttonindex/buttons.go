// Package buttonindex indexes a platform's button table (each adapter's
// codec.go: one row per button kind, card.Buttons() the list of kinds):
// by the wire id a clicked button carries, by the id a submitted form
// carries, and by kind. A wire id or a kind given twice is a programming
// error caught when the adapter's package starts, never a click taken
// for another button.
package buttonindex

import (
	"fmt"

	"github.com/airlockhq/airlock/card"
)

// Keys are what a row is found by: its kind, its button's wire id, and
// the wire id its form comes back with ("" for a button with no form
// submitted).
type Keys struct {
	Kind   card.ActionKind
	Action string
	Submit string
}

// Index is a button table, indexed.
type Index[R any] struct {
	byAction map[string]R
	bySubmit map[string]R
	byKind   map[card.ActionKind]R
	action   map[card.ActionKind]string
}

// Where the platform carries a button's and a submission's wire ids.
type Namespaces int

const (
	// Separate: a click and a submission carry their ids in different
	// fields (Slack: action_id, callback_id); they may be equal.
	Separate Namespaces = iota
	// Shared: both carry it in one field (Discord's custom_id); a
	// submission's id may not be a button's.
	Shared
)

// New indexes rows by keys; it refuses a kind, a button's wire id or a
// submission's wire id that two rows share, and in a Shared namespace a
// submission's id that is a button's (a forged click must not pass for a
// form).
func New[R any](rows []R, keys func(R) Keys, ns Namespaces) (*Index[R], error) {
	x := &Index[R]{byAction: map[string]R{}, bySubmit: map[string]R{}, byKind: map[card.ActionKind]R{}, action: map[card.ActionKind]string{}}
	for _, r := range rows {
		k := keys(r)
		if _, dup := x.byKind[k.Kind]; dup {
			return nil, fmt.Errorf("buttonindex: kind %s has two rows", k.Kind)
		}
		if _, dup := x.byAction[k.Action]; dup || k.Action == "" {
			return nil, fmt.Errorf("buttonindex: %s: button id %q empty or given twice", k.Kind, k.Action)
		}
		x.byKind[k.Kind], x.byAction[k.Action], x.action[k.Kind] = r, r, k.Action
		if k.Submit != "" {
			if _, dup := x.bySubmit[k.Submit]; dup {
				return nil, fmt.Errorf("buttonindex: %s: submission id %q given twice", k.Kind, k.Submit)
			}
			x.bySubmit[k.Submit] = r
		}
	}
	for s := range x.bySubmit {
		if _, both := x.byAction[s]; both && ns == Shared {
			return nil, fmt.Errorf("buttonindex: %q is both a button's id and a submission's", s)
		}
	}
	return x, nil
}

// Must is New for a package's table, known when it is written: it
// panics on a table New refuses.
func Must[R any](rows []R, keys func(R) Keys, ns Namespaces) *Index[R] {
	x, err := New(rows, keys, ns)
	if err != nil {
		panic(err)
	}
	return x
}

// ByAction is the row of a clicked button's wire id.
func (x *Index[R]) ByAction(id string) (R, bool) { r, ok := x.byAction[id]; return r, ok }

// BySubmit is the row of a submitted form's wire id.
func (x *Index[R]) BySubmit(id string) (R, bool) { r, ok := x.bySubmit[id]; return r, ok }

// ByKind is the row of a kind.
func (x *Index[R]) ByKind(k card.ActionKind) (R, bool) { r, ok := x.byKind[k]; return r, ok }

// Action is the wire id a kind's button is rendered with.
func (x *Index[R]) Action(k card.ActionKind) string { return x.action[k] }
