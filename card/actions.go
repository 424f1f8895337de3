package card

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/airlockhq/airlock/confirm"
)

// Emphasis is how strongly a button is drawn. A card has one Primary
// kind (Allow) and one Danger kind (Deny).
type Emphasis uint8

const (
	Plain Emphasis = iota
	Primary
	Danger
)

// Rows of a call's actions: the decisions first, then what helps to
// decide (Edit…, Show full arguments), then the check of an unknown run.
// Renderers may put rows together where their limits allow.
const (
	RowDecide = 0
	RowMore   = 1
	RowCheck  = 2
)

// Action is one button: what it does, the opaque reference it carries
// (never the tool or the arguments), its label (NumberedLabel names the
// call, for cards of several calls), a label for screen readers, its
// emphasis and its row.
type Action struct {
	Kind          ActionKind
	Ref           string
	Label         string
	NumberedLabel string
	A11yLabel     string
	Emphasis      Emphasis
	Row           int
}

// Actions are the buttons a call offers: while it waits for a person,
// Allow (a critical call's "Allow…", ActAllowTyped), "Allow for <GrantFor>" (when the card offers grants and the call
// may be granted), Deny, "Deny with reason…", Edit… (when an approver may
// edit it) and Show full arguments (renderers keep it only when they cut
// the arguments); while its run's unknown outcome is not checked, "I
// checked — go on". tool writes the tool's name into the accessibility
// labels (the renderer's escaping); nil leaves it as it is.
func (c Card) Actions(call Call, tool func(string) string) []Action {
	name := call.Tool
	if tool != nil {
		name = tool(call.Tool)
	}
	n := call.Number
	num := "[" + strconv.Itoa(n) + "]"
	var out []Action
	if call.Flagged && call.Open() {
		if call.Risk == confirm.RiskCritical {
			out = append(out, Action{Kind: ActAllowTyped, Ref: call.Ref, Label: "Allow…", NumberedLabel: "Allow " + num + "…",
				A11yLabel: fmt.Sprintf("Allow call %d, %s: asks you to type its confirmation phrase", n, name), Emphasis: Primary})
		} else {
			out = append(out, Action{Kind: ActAllow, Ref: call.Ref, Label: "Allow", NumberedLabel: "Allow " + num,
				A11yLabel: fmt.Sprintf("Allow call %d, %s", n, name), Emphasis: Primary})
		}
		if c.GrantFor > 0 && call.Grantable {
			out = append(out, Action{Kind: ActAllowGrant, Ref: call.Ref, Label: c.GrantLabel(), NumberedLabel: "Allow " + num + " for " + Duration(c.GrantFor),
				A11yLabel: fmt.Sprintf("Allow call %d and calls of %s in this thread for %s", n, name, Duration(c.GrantFor))})
		}
		out = append(out,
			Action{Kind: ActDeny, Ref: call.Ref, Label: "Deny", NumberedLabel: "Deny " + num,
				A11yLabel: fmt.Sprintf("Deny call %d, %s", n, name), Emphasis: Danger},
			Action{Kind: ActDenyReason, Ref: call.Ref, Label: "Deny with reason…", NumberedLabel: "Deny " + num + " with reason…",
				A11yLabel: fmt.Sprintf("Deny call %d with a reason", n)})
		if call.Editable {
			out = append(out, Action{Kind: ActEdit, Ref: call.Ref, Label: "Edit…", NumberedLabel: "Edit " + num + "…",
				A11yLabel: fmt.Sprintf("Edit the arguments of call %d, then allow it", n), Row: RowMore})
		}
		out = append(out, Action{Kind: ActShowArgs, Ref: call.Ref, Label: "Show full arguments", NumberedLabel: "Show full arguments " + num,
			A11yLabel: fmt.Sprintf("Show the full arguments of call %d", n), Row: RowMore})
		if call.Preview != nil && call.Preview.Shown() {
			out = append(out, PreviewAction(call.Ref, n))
		}
	}
	if k := call.Check; k != nil && !k.Done() && k.Ref != "" {
		out = append(out, CheckAction(k.Ref, n))
	}
	return out
}

// Offers reports whether acts hold an action of kind k.
func Offers(acts []Action, k ActionKind) bool {
	for _, a := range acts {
		if a.Kind == k {
			return true
		}
	}
	return false
}

// Without returns acts without the actions of kind k, in order; acts
// itself is left as it is.
func Without(acts []Action, k ActionKind) []Action {
	out := acts[:0:0]
	for _, a := range acts {
		if a.Kind != k {
			out = append(out, a)
		}
	}
	return out
}

// CheckAction is "I checked — go on" for the unknown run of call n.
func CheckAction(ref string, n int) Action {
	return Action{Kind: ActChecked, Ref: ref, Label: CheckedLabel, NumberedLabel: "[" + strconv.Itoa(n) + "] " + CheckedLabel,
		A11yLabel: fmt.Sprintf("I checked the outcome of call %d: go on", n), Row: RowCheck}
}

// ExtendAction is the card's Extend, offered once while a call waits
// for a person and nobody extended the card yet.
func (c Card) ExtendAction() (Action, bool) {
	if c.ExtendRef == "" || c.Extended != nil || !c.waitsForPerson() {
		return Action{}, false
	}
	label := "Extend"
	if c.ExtendBy > 0 {
		label += " " + Duration(c.ExtendBy)
	}
	return Action{Kind: ActExtend, Ref: c.ExtendRef, Label: label, NumberedLabel: label,
		A11yLabel: "Push this card's deadline back, once: " + strings.ToLower(label)}, true
}

// CardActions are the card's own buttons, after its calls': Allow all
// and Deny all while two or more calls wait for a person (each decides,
// in one click, every waiting call the clicker may decide alone), then
// Extend (ExtendAction).
func (c Card) CardActions() []Action {
	var out []Action
	waiting := 0
	for _, cc := range c.Calls {
		if cc.Flagged && cc.Open() {
			waiting++
		}
	}
	if c.AllRef != "" && waiting >= 2 {
		out = append(out,
			Action{Kind: ActAllowAll, Ref: c.AllRef, Label: "Allow all", NumberedLabel: "Allow all",
				A11yLabel: fmt.Sprintf("Allow every waiting call you may decide, of %d", waiting)},
			Action{Kind: ActDenyAll, Ref: c.AllRef, Label: "Deny all", NumberedLabel: "Deny all",
				A11yLabel: fmt.Sprintf("Deny every waiting call you may decide, of %d", waiting)})
	}
	if a, ok := c.ExtendAction(); ok {
		out = append(out, a)
	}
	return out
}

// waitsForPerson reports whether a call of the card waits for a person.
func (c Card) waitsForPerson() bool {
	for _, cc := range c.Calls {
		if cc.Flagged && cc.Open() {
			return true
		}
	}
	return false
}
