package card

import (
	"fmt"

	"github.com/airlockhq/airlock/confirm"
)

// ActionKind is what a button does: every button Airlock posts (on a
// card, a run message, a grant notice, an unknown outcome's line) is one
// of the kinds below. The values live only in memory: each platform
// keeps one table row per kind naming its wire id (a Slack action_id, a
// Discord custom id), and the core dispatches a click by its kind
// (bot.Dispatch). A new button is a row in Buttons, a case in the core
// and one row in each platform's table.
type ActionKind uint8

// The buttons, in one list.
const (
	ActAllow       ActionKind = iota + 1 // allow the call
	ActAllowGrant                        // "Allow for <GrantFor>": allow, and grant later calls of the tool
	ActDeny                              // deny the call
	ActDenyReason                        // "Deny with reason…": opens a form for the reason
	ActEdit                              // "Edit…": opens a form for the arguments; submitting allows
	ActShowArgs                          // "Show full arguments": offered only where a renderer cut them
	ActChecked                           // "I checked — go on" on an unknown run (Ref: its checked reference)
	ActExtend                            // the card's Extend (Ref: Card.ExtendRef)
	ActRunStop                           // "Stop run" on a run message (Ref: confirm.RunRef)
	ActRunMarkDone                       // "Mark done" on a halted run's message
	ActRunRetry                          // "Retry" on a halted run's message
	ActAllowAll                          // the card's Allow all (Ref: Card.AllRef)
	ActDenyAll                           // the card's Deny all (Ref: Card.AllRef)
	// ActAllowTyped is a critical call's "Allow…": it opens a prompt for
	// the call's confirmation phrase, and the typed phrase allows it.
	ActAllowTyped
	// ActShowPreview is "Show full preview": offered while a call waits
	// and its preview ended, kept by renderers only where they cut the
	// preview.
	ActShowPreview
	// ActRevoke is a grant notice's Revoke (Ref: confirm.GrantRef).
	ActRevoke
	// ActAnswer is a server's question's Answer… (Ref:
	// confirm.QuestionRef): it opens the question's form; submitting
	// sends the answer. A question without fields takes it as Accept.
	ActAnswer
	// ActDecline is a server's question's Decline.
	ActDecline
)

// RefKind is which reference a button carries: opaque, issued by the
// bot, never the tool or the arguments.
type RefKind uint8

const (
	RefCall     RefKind = iota + 1 // a call's (confirm.Ref; Extend: any call of the card)
	RefGrant                       // a grant's (confirm.GrantRef)
	RefAll                         // a card's, for Allow all and Deny all (confirm.AllRef)
	RefRun                         // a runbook run's (confirm.RunRef)
	RefChecked                     // an unknown run's (confirm.CheckedRef)
	RefQuestion                    // a server's question's (confirm.QuestionRef)
)

// String names the reference in words: "a <name> reference".
func (r RefKind) String() string {
	switch r {
	case RefCall:
		return "call"
	case RefGrant:
		return "grant"
	case RefAll:
		return "card"
	case RefRun:
		return "run"
	case RefChecked:
		return "checked"
	case RefQuestion:
		return "question"
	}
	return "unknown"
}

// Parse reports whether ref is a well-formed reference of this kind; a
// reference of another kind, or none, is confirm.ErrBadRef (as every
// confirm parser returns). Whether it
// names something that exists is the bot's to say.
func (r RefKind) Parse(ref string) error {
	var err error
	switch r {
	case RefCall:
		_, _, err = confirm.ParseRef(ref)
	case RefGrant:
		_, err = confirm.ParseGrantRef(ref)
	case RefAll:
		_, _, err = confirm.ParseAllRef(ref)
	case RefRun:
		_, err = confirm.ParseRunRef(ref)
	case RefChecked:
		_, _, err = confirm.ParseCheckedRef(ref)
	case RefQuestion:
		_, err = confirm.ParseQuestionRef(ref)
	default:
		err = confirm.ErrBadRef
	}
	return err
}

// Button is what every surface knows of a kind of button.
type Button struct {
	Kind ActionKind
	// Name names the kind in logs and tests; it is no wire id.
	Name string
	// Ref is the reference the button carries.
	Ref RefKind
	// Opens: a click is answered with a form or a view (Deny with
	// reason…, Edit…, Allow…, Show full arguments, Show full preview), so
	// a platform answers it at once rather than acknowledging it first
	// (Slack's trigger_id lasts 3 seconds; Discord's modal must be the
	// first response).
	Opens bool
	// Submits: the form it opens comes back submitted, with a value (a
	// reason, edited arguments, a typed phrase), to be worked as the
	// button's second half.
	Submits bool
}

// buttons are the kinds, indexed by kind.
var buttons = [...]Button{
	ActAllow:       {Kind: ActAllow, Name: "allow", Ref: RefCall},
	ActAllowGrant:  {Kind: ActAllowGrant, Name: "allow_grant", Ref: RefCall},
	ActDeny:        {Kind: ActDeny, Name: "deny", Ref: RefCall},
	ActDenyReason:  {Kind: ActDenyReason, Name: "deny_reason", Ref: RefCall, Opens: true, Submits: true},
	ActEdit:        {Kind: ActEdit, Name: "edit", Ref: RefCall, Opens: true, Submits: true},
	ActShowArgs:    {Kind: ActShowArgs, Name: "show_args", Ref: RefCall, Opens: true},
	ActChecked:     {Kind: ActChecked, Name: "checked", Ref: RefChecked},
	ActExtend:      {Kind: ActExtend, Name: "extend", Ref: RefCall},
	ActRunStop:     {Kind: ActRunStop, Name: "run_stop", Ref: RefRun},
	ActRunMarkDone: {Kind: ActRunMarkDone, Name: "run_mark_done", Ref: RefRun},
	ActRunRetry:    {Kind: ActRunRetry, Name: "run_retry", Ref: RefRun},
	ActAllowAll:    {Kind: ActAllowAll, Name: "allow_all", Ref: RefAll},
	ActDenyAll:     {Kind: ActDenyAll, Name: "deny_all", Ref: RefAll},
	ActAllowTyped:  {Kind: ActAllowTyped, Name: "allow_typed", Ref: RefCall, Opens: true, Submits: true},
	ActShowPreview: {Kind: ActShowPreview, Name: "show_preview", Ref: RefCall, Opens: true},
	ActRevoke:      {Kind: ActRevoke, Name: "revoke", Ref: RefGrant},
	ActAnswer:      {Kind: ActAnswer, Name: "answer", Ref: RefQuestion, Opens: true, Submits: true},
	ActDecline:     {Kind: ActDecline, Name: "decline", Ref: RefQuestion},
}

// Buttons are every kind of button, in the order of their values.
func Buttons() []Button {
	out := make([]Button, 0, len(buttons))
	for _, b := range buttons {
		if b.Kind != 0 {
			out = append(out, b)
		}
	}
	return out
}

// Button is the kind's row; false for a value that is no kind.
func (k ActionKind) Button() (Button, bool) {
	if int(k) >= len(buttons) || buttons[k].Kind == 0 {
		return Button{}, false
	}
	return buttons[k], true
}

// String is the kind's Name, or its number for a value that is no kind.
func (k ActionKind) String() string {
	if b, ok := k.Button(); ok {
		return b.Name
	}
	return fmt.Sprintf("ActionKind(%d)", uint8(k))
}

// ParseRef checks a button's reference (its value, the tail of its id)
// against its kind: the one place a button's reference is parsed before
// the bot looks it up. A value that is no kind, or a reference of the
// wrong shape, is confirm.ErrBadRef.
func (k ActionKind) ParseRef(ref string) error {
	b, ok := k.Button()
	if !ok {
		return fmt.Errorf("button kind %d: %w", uint8(k), confirm.ErrBadRef)
	}
	return b.Ref.Parse(ref)
}
