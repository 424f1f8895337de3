package card

import (
	"fmt"
	"strings"

	"github.com/airlockhq/airlock/confirm"
)

// What a card shows of each call besides its status and its cover, in
// one set of words: why a person is asked, who may decide, an approver's
// edit, and the notes on arguments and a preview cut to fit.

// Names of the parts of a call where a platform lays them out apart (a
// Discord embed's fields).
const (
	WhyLabel       = "Why a person is asked"
	EditedLabel    = "Edited by an approver"
	ArgumentsLabel = "Arguments"
	PreviewLabel   = "Preview"
	StatusLabel    = "Status"
	CoversLabel    = "What a yes covers"
)

// Gate says in a few words whether and why a person is asked: "refused
// by a rule", the call's Why ("needs 2 approvals: rule prod", without
// the tool's own flag when that is the only reason), or "no approval
// needed".
func (c Call) Gate() string {
	switch {
	case c.State.Kind == DeniedByRule:
		return "refused by a rule"
	case c.Flagged:
		// The tool's own flag alone goes without saying.
		if c.onlyToolFlag() {
			c.Reasons = nil
		}
		return c.Why()
	}
	return "no approval needed"
}

// PlainGate reports whether Gate says no more than that one person's
// yes is needed, as the tool asks (a terse layout may leave it out).
func (c Call) PlainGate() bool {
	return c.Flagged && c.Approvals <= 1 && c.RiskLabel() == "" && c.onlyToolFlag()
}

func (c Call) onlyToolFlag() bool {
	for _, r := range c.Reasons {
		if r.Kind != confirm.ReasonToolFlag {
			return false
		}
	}
	return true
}

// Deciders says who may decide a call rules narrowed (Restrict): people
// in every set. No parts for a call not narrowed.
func (c Call) Deciders() Line {
	switch len(c.Restrict) {
	case 0:
		return Line{}
	case 1:
		return Line{Parts: []Part{{Kind: Label, Text: "Who may decide: "}, {Kind: People, Who: c.Restrict[0]}}}
	}
	ps := []Part{{Kind: Label, Text: "Who may decide (people in each of these): "}}
	for i, set := range c.Restrict {
		if i > 0 {
			ps = append(ps, words("; "))
		}
		ps = append(ps, Part{Kind: People, Who: set})
	}
	return Line{Parts: ps}
}

// Line says who edited the call's arguments and when, that the read-back
// and arguments shown are the edited ones, and, when the renderer lists
// listed of its changes (Change.Parts) under it, "Changed:".
func (e Edit) Line(listed int) Line {
	ps := []Part{{Kind: Strong, Text: "Edited by "}, {Kind: Person, Text: e.By}}
	if !e.At.IsZero() {
		ps = append(ps, words(" "), Part{Kind: Time, At: e.At})
	}
	ps = append(ps, words(". The read-back and arguments shown are the edited ones; it runs with them."))
	switch {
	case len(e.Changes) == 0:
		ps = append(ps, words(" No argument changed."))
	case listed > 0:
		ps = append(ps, words(" Changed:"))
	}
	return Line{IconEdited, ps}
}

// Words for what a change lacks.
const (
	EmptyKey = "(empty key)" // a key that is ""
	NotSet   = "(not set)"   // a side of a change without the key
)

// Parts are a change as "key: before → after": the key and the values
// Code (JSON, untrusted), a side without the key NotSet.
func (ch Change) Parts() []Part {
	side := func(v string) Part {
		if v == "" {
			return words(NotSet)
		}
		return Part{Kind: Code, Text: v}
	}
	key := Part{Kind: Code, Text: ch.Key}
	if ch.Key == "" {
		key = words(EmptyKey)
	}
	return []Part{key, words(": "), side(ch.Before), words(" → "), side(ch.After)}
}

// Format lays the change out on one line as Parts orders it: its words
// as they are, its key through key and its values through value (each a
// renderer's cutting and escaping of Code).
func (ch Change) Format(key, value func(string) string) string {
	var b strings.Builder
	for i, p := range ch.Parts() {
		switch {
		case p.Kind != Code:
			b.WriteString(p.Text)
		case i == 0:
			b.WriteString(key(p.Text))
		default:
			b.WriteString(value(p.Text))
		}
	}
	return b.String()
}

// MoreChanges ends a list of changes cut short.
func MoreChanges(n int) string {
	return fmt.Sprintf("… and %d more changed %s", n, Plural(n, "key", "keys"))
}

// ArgsCut says how many characters of call n's arguments a card left out
// (hidden) and, when it offers Show full arguments, that it shows them.
func ArgsCut(hidden int, offer bool, n int) Line {
	ps := []Part{words("… " + Hidden(hidden))}
	if offer {
		ps = append(ps, words("; "), Part{Kind: Control, Act: ActShowArgs, N: n, Text: "Show full arguments"}, words(" shows them all"))
	}
	return Line{Parts: append(ps, words("."))}
}

// PreviewCut says how many characters of call n's preview a card left
// out and, when it offers Show full preview, that it shows it.
func PreviewCut(hidden int, offer bool, n int) Line {
	ps := []Part{words("… " + Hidden(hidden) + " of the preview")}
	if offer {
		ps = append(ps, words("; "), Part{Kind: Control, Act: ActShowPreview, N: n, Text: ShowPreviewLabel}, words(" shows it all"))
	}
	return Line{Parts: append(ps, words("."))}
}
