package card

import (
	"fmt"
	"strconv"

	"github.com/airlockhq/airlock/confirm"
)

// Forms. A button that asks for words (Deny with reason…, Edit…, a
// critical call's Allow…) opens a form; one that shows a call whole (Show
// full arguments, Show full preview) opens a read-only view. Their words
// are chosen here; renderers show what their platform's forms hold (a
// Discord modal shows only its title and its fields; a terminal asks on
// a line) within its limits, and set what only they know (limits of an
// input, ids).

// Form is a form a button opens.
type Form struct {
	Title string // short: a Slack modal's title holds 24 characters
	// About says which call the form is about (the tool a Code part);
	// Quote is the call's read-back (untrusted), "" for none.
	About Line
	Quote string
	// Note says what submitting does; no parts when nothing needs saying.
	Note   Line
	Fields []Field
	Submit string
	Cancel string
}

// Field is an input of a form.
type Field struct {
	Label       string
	Placeholder string // shown in the empty input (may be untrusted: a phrase)
	Hint        string // shown under the input where the platform can
	Value       string // pre-filled (untrusted)
	MinLen      int
	Multiline   bool
}

// Cancel is the word of a form's button that closes it unchanged.
const Cancel = "Cancel"

// Close is the word of a read-only view's button that closes it.
const Close = "Close"

func callAbout(doing string, number int, tool string) Line {
	return Line{Parts: []Part{words(fmt.Sprintf("You are %s call %d, ", doing, number)), {Kind: Code, Text: tool}}}
}

// ReasonForm is what "Deny with reason…" opens for call (its Number and
// Tool; a zero Call when the renderer knows neither): one input, the
// reason the agent is told.
func ReasonForm(call Call) Form {
	f := Form{
		Title: "Deny with a reason",
		Note:  Line{Parts: []Part{words("The call will not run. Your reason is passed to the agent.")}},
		Fields: []Field{{Label: "Reason (the agent is told)", Placeholder: "Why not, or what to do instead",
			MinLen: 1, Multiline: true}},
		Submit: "Deny",
		Cancel: Cancel,
	}
	if call.Number > 0 {
		f.Title = "Deny call " + strconv.Itoa(call.Number)
	}
	if call.Tool != "" {
		f.About, f.Quote = callAbout("denying", call.Number, call.Tool), call.Summary
	}
	return f
}

// EditForm is what Edit… opens for call number (0: not known), whose
// arguments args (pretty JSON, untrusted) fill its one input. holds: the
// call is critical, so saving the edit does not allow it.
func EditForm(number int, tool, summary, args string, holds bool) Form {
	f := Form{
		Title: "Edit the call's arguments",
		Note: Line{Parts: []Part{words("Submitting counts as your "), {Kind: Strong, Text: "Allow"},
			words(" of the edited call. Earlier approvals of this call no longer count: they approved other arguments. The original arguments stay in the audit log.")}},
		Fields: []Field{{Label: "Arguments (JSON): submitting allows the call",
			Hint: "Checked against the tool's schema and the policy before anything changes.", Value: args, MinLen: 2, Multiline: true}},
		Submit: "Allow edited",
		Cancel: Cancel,
	}
	if holds {
		f.Note = Line{Parts: []Part{words("This call is "), {Kind: Strong, Text: "critical"},
			words(": saving the edit does not allow it. Allow… then asks you to type the confirmation phrase of the edited arguments. The original arguments stay in the audit log.")}}
		f.Fields[0].Label = "Arguments (JSON): saving won't allow it"
		f.Submit = "Save edit"
	}
	if number > 0 {
		f.Title = "Edit call " + strconv.Itoa(number)
	}
	if tool != "" {
		f.About, f.Quote = callAbout("editing", number, tool), summary
	}
	return f
}

// EditFormStepUp is EditForm for an editor whose allow of the call would
// need the step-up needs (confirmation.step_up) they are not signed in
// with: saving stores the edit and the call waits for an allow made with
// it, on its page.
func EditFormStepUp(number int, tool, summary, args string, needs confirm.Assurance) Form {
	f := EditForm(number, tool, summary, args, true)
	how := "a fresh sign-in (within 5 minutes)"
	if needs == confirm.AssurancePasskey {
		how = "your passkey"
	}
	f.Note = Line{Parts: []Part{words("Allowing this call needs "), {Kind: Strong, Text: how},
		words(": saving the edit does not allow it. Allow the edited call on its page then. Earlier approvals of this call no longer count; the original arguments stay in the audit log.")}}
	return f
}

// PhraseForm is what a critical call's Allow… opens: the call's
// confirmation phrase (untrusted: it comes from the arguments), typed.
func PhraseForm(number int, tool, phrase string) Form {
	f := Form{
		Title: "Allow this call",
		About: Line{Parts: []Part{words("Type "), {Kind: Code, Text: phrase}, words(" to allow call " + strconv.Itoa(number) + ", "), {Kind: Code, Text: tool}}},
		Fields: []Field{{Label: "Confirmation phrase", Placeholder: phrase,
			Hint: "This call is rated critical. A wrong phrase changes nothing.", MinLen: 1}},
		Submit: "Allow",
		Cancel: Cancel,
	}
	if number > 0 {
		f.Title = "Allow call " + strconv.Itoa(number)
	}
	return f
}

// NoPhrase says that nothing was typed where a phrase was asked (after
// the call it was asked for: "Call 2: no phrase typed; nothing changed.").
const NoPhrase = "no phrase typed; nothing changed."

// View is a read-only view of a call shown whole: its arguments or its
// preview.
type View struct {
	Title string // short: a Slack modal's title holds 24 characters
	Head  Line   // which call, the tool a Code part
	Quote string // the call's read-back (untrusted), "" for none
	// Empty is said in place of a text that is empty or missing.
	Empty string
	what  string
}

// NoArguments stands for arguments that are empty.
const NoArguments = "(no arguments)"

// ArgsView is what "Show full arguments" shows of call.
func ArgsView(call Call) View {
	n := strconv.Itoa(call.Number)
	return View{Title: "Arguments of call " + n, Head: Line{Parts: []Part{words("Arguments of call " + n + ", "), {Kind: Code, Text: call.Tool}}},
		Quote: call.Summary, Empty: NoArguments, what: "arguments"}
}

// PreviewView is what "Show full preview" shows of call (its preview's
// Heading and CutNote follow the head).
func PreviewView(call Call) View {
	n := strconv.Itoa(call.Number)
	return View{Title: "Preview of call " + n, Head: Line{Parts: []Part{words("Preview of call " + n + ", "), {Kind: Code, Text: call.Tool}}},
		Empty: "No preview to show.", what: "preview"}
}

// Cut says that a view's text is longer than the platform's form holds:
// shown of total parts are in it.
func (v View) Cut(shown, total int) string {
	s := fmt.Sprintf("The %s is longer than this form holds; %d of %d parts shown.", v.what, shown, total)
	if v.what == "arguments" {
		s = fmt.Sprintf("The arguments are longer than this form holds; %d of %d parts shown. The audit log has them whole.", shown, total)
	}
	return s
}

// Attached says that a view's text, chars characters, is attached as a
// file named file, being longer than a message holds.
func Attached(file string, chars int) string {
	return "attached as " + file + " (" + Characters(chars) + ")."
}
