package card

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/airlockhq/airlock/confirm"
)

// Questions: an upstream MCP server's question during a call (MCP
// elicitation, form mode), posted in the call's conversation. The
// server's words (its message, its fields' titles and descriptions) are
// untrusted: quoted, inert. Renderers lay out the notice (lines, the
// message quoted, the buttons, the foot) and the form Answer… opens.

// The words of a question's cancels (confirm.Question.Why).
const (
	WhyExpired   = "expired"    // nobody answered in time
	WhyCallEnded = "call ended" // the call ended (or the server stopped waiting) first
)

// QuestionNotice is a server's question as its message shows it.
type QuestionNotice struct {
	Ref     string // the buttons' reference (confirm.QuestionRef)
	Server  string // the MCP server's name (config)
	Tool    string // the call's tool, Airlock's name
	Message string // the server's words (untrusted)
	Fields  []confirm.QuestionField
	Status  confirm.QuestionStatus
	By      string     // who answered or declined (a platform user id; "airlock" for Airlock)
	At      *time.Time // when it ended
	Expires time.Time
	Why     string         // a cancel's reason (WhyExpired, WhyCallEnded) or why Airlock declined
	Answer  map[string]any // the accepted values
}

// The labels of a question's buttons.
const (
	AnswerLabel  = "Answer…"
	AcceptLabel  = "Accept" // a question without fields: accepting asks nothing
	DeclineLabel = "Decline"
)

// Open reports whether the question waits for an answer.
func (n QuestionNotice) Open() bool { return n.Status == confirm.QuestionPending }

// Actions are the question's buttons while it waits: Answer… (Accept
// when it asks for nothing) and Decline.
func (n QuestionNotice) Actions() []Action {
	if !n.Open() || n.Ref == "" {
		return nil
	}
	answer := Action{Kind: ActAnswer, Ref: n.Ref, Label: AnswerLabel, NumberedLabel: AnswerLabel,
		A11yLabel: "Answer the question of the MCP server " + n.Server, Emphasis: Primary}
	if len(n.Fields) == 0 {
		answer.Label, answer.NumberedLabel, answer.A11yLabel = AcceptLabel, AcceptLabel, "Accept the request of the MCP server "+n.Server
	}
	return []Action{answer, {Kind: ActDecline, Ref: n.Ref, Label: DeclineLabel, NumberedLabel: DeclineLabel,
		A11yLabel: "Decline the question of the MCP server " + n.Server, Emphasis: Danger}}
}

// Notice is the question as typed parts: who asks during which call,
// the message quoted, what it asks for, and where it stands.
func (n QuestionNotice) Notice() Notice {
	out := Notice{Lines: []Line{n.head()}, Quote: strings.TrimSpace(n.Message)}
	if len(n.Fields) > 0 {
		out.Lines = append(out.Lines, n.asks())
	}
	out.Lines = append(out.Lines, n.state())
	if n.Open() {
		out.Foot = Line{Parts: []Part{words("Any approver of this channel may answer or decline. The answer goes to the server and into the audit log.")}}
	}
	return out
}

func (n QuestionNotice) head() Line {
	return Line{IconWaiting, []Part{words("The MCP server "), {Kind: Code, Text: n.Server}, words(" asks a question during a call of "),
		{Kind: Code, Text: n.Tool}, words(":")}}
}

// asks lists the fields: each one's label, what it takes, and whether it
// may be left empty.
func (n QuestionNotice) asks() Line {
	ps := []Part{{Kind: Label, Text: "It asks for: "}}
	for i, f := range n.Fields {
		if i > 0 {
			ps = append(ps, words("; "))
		}
		ps = append(ps, Part{Kind: Code, Text: f.Label()}, words(" ("+FieldKind(f)+")"))
	}
	return Line{Parts: ps}
}

func (n QuestionNotice) state() Line {
	at := func(ps []Part) []Part {
		if n.At != nil && !n.At.IsZero() {
			ps = append(ps, words(" "), Part{Kind: Time, At: *n.At})
		}
		return ps
	}
	switch n.Status {
	case confirm.QuestionPending:
		return Line{IconWaiting, []Part{{Kind: Strong, Text: "Waiting for an answer"}, words(" until "), {Kind: Deadline, At: n.Expires},
			words(". The call waits meanwhile.")}}
	case confirm.QuestionAccepted:
		ps := at([]Part{{Kind: Strong, Text: "Answered by "}, {Kind: Person, Text: n.By}})
		if len(n.Answer) == 0 {
			return Line{IconAllowed, append(ps, words("."))}
		}
		ps = append(ps, words(": "))
		for i, f := range n.answered() {
			if i > 0 {
				ps = append(ps, words(", "))
			}
			ps = append(ps, Part{Kind: Code, Text: f.Label()}, words(" = "), Part{Kind: Quote, Text: AnswerValue(n.Answer[f.Name])})
		}
		return Line{IconAllowed, ps}
	case confirm.QuestionDeclined:
		if n.By == "airlock" || n.By == "" {
			return Line{IconDenied, []Part{{Kind: Strong, Text: "Declined by Airlock: "}, {Kind: Quote, Text: n.Why},
				words(". The server was told no.")}}
		}
		return Line{IconDenied, append(at([]Part{{Kind: Strong, Text: "Declined by "}, {Kind: Person, Text: n.By}}), words(". The server was told no."))}
	case confirm.QuestionCancelled:
		if n.Why == WhyCallEnded {
			return Line{IconExpired, at([]Part{{Kind: Strong, Text: "No longer asked:"}, words(" the call ended, or the server stopped waiting, before an answer")})}
		}
		return Line{IconExpired, append(at([]Part{{Kind: Strong, Text: "Expired"}, words(" without an answer")}), words("; the server was told it was cancelled."))}
	}
	return Line{IconQuestion, []Part{words("In a state this version does not know.")}}
}

// answered are the fields the answer holds, in the form's order.
func (n QuestionNotice) answered() []confirm.QuestionField {
	var out []confirm.QuestionField
	for _, f := range n.Fields {
		if _, ok := n.Answer[f.Name]; ok {
			out = append(out, f)
		}
	}
	return out
}

// AnswerValue is an answered value in words: text as typed, a number as
// written, yes or no.
func AnswerValue(v any) string {
	switch x := v.(type) {
	case bool:
		if x {
			return "yes"
		}
		return "no"
	case float64:
		return strconv.FormatFloat(x, 'f', -1, 64)
	case int64:
		return strconv.FormatInt(x, 10)
	case string:
		return x
	}
	return fmt.Sprint(v)
}

// FieldKind says what a field takes, in a few words: "one of: a, b",
// "a whole number, at least 1", "yes or no", "text"; ", optional" when it
// may be left empty.
func FieldKind(f confirm.QuestionField) string {
	var s string
	switch f.Type {
	case confirm.FieldBoolean:
		s = "yes or no"
	case confirm.FieldNumber, confirm.FieldInteger:
		s = "a number"
		if f.Type == confirm.FieldInteger {
			s = "a whole number"
		}
		if f.Min != nil {
			s += ", at least " + strconv.FormatFloat(*f.Min, 'f', -1, 64)
		}
		if f.Max != nil {
			s += ", at most " + strconv.FormatFloat(*f.Max, 'f', -1, 64)
		}
	default:
		if len(f.Choices) > 0 {
			s = "one of: " + strings.Join(f.Choices, ", ")
		} else {
			s = "text"
			if f.MaxLen > 0 {
				s += ", at most " + strconv.Itoa(f.MaxLen) + " characters"
			}
		}
	}
	if !f.Required {
		s += ", optional"
	}
	return s
}

// Text is the notice as plain text (a platform without the notice's
// layout): the server's message as given (callers quote or escape it).
func (n QuestionNotice) Text() string {
	nt := n.Notice()
	var lines []string
	for i, l := range nt.Lines {
		lines = append(lines, PlainText(l.Parts))
		if i == 0 && nt.Quote != "" {
			lines = append(lines, nt.Quote)
		}
	}
	return strings.Join(lines, "\n")
}

// Fallback is the notice's plain text for notifications: Airlock's words
// and the server's name only, so it pings nobody.
func (n QuestionNotice) Fallback() string {
	s := "The MCP server " + ToolWord(n.Server) + " asks a question during a call of " + ToolWord(n.Tool) + "."
	switch n.Status {
	case confirm.QuestionPending:
		return s + " Waiting for an answer."
	case confirm.QuestionAccepted:
		return s + " Answered."
	case confirm.QuestionDeclined:
		return s + " Declined."
	}
	return s + " No longer asked."
}

// AnswerForm is what Answer… opens: the question (the server's message
// quoted) and one input per field, labelled with the field's title (or
// name), hinting what it takes.
func AnswerForm(n QuestionNotice) Form {
	f := Form{
		Title:  "Answer the server",
		About:  Line{Parts: []Part{words("The MCP server "), {Kind: Code, Text: n.Server}, words(" asks, during a call of "), {Kind: Code, Text: n.Tool}, words(":")}},
		Quote:  n.Message,
		Note:   Line{Parts: []Part{words("Submitting sends your answer to the server; it is kept in the audit log. Leave an optional field empty to leave it out.")}},
		Submit: "Send answer",
		Cancel: Cancel,
	}
	for _, q := range n.Fields {
		in := Field{Label: q.Label(), Hint: FieldKind(q), Placeholder: placeholder(q)}
		if d := strings.TrimSpace(q.Description); d != "" {
			in.Hint = d + " (" + in.Hint + ")"
		}
		if q.Required {
			in.MinLen = 1
		}
		f.Fields = append(f.Fields, in)
	}
	return f
}

func placeholder(f confirm.QuestionField) string {
	switch {
	case f.Type == confirm.FieldBoolean:
		return "yes or no"
	case len(f.Choices) > 0 && len(f.Choices) <= 4:
		return strings.Join(f.Choices, " or ")
	case slices.Contains([]string{confirm.FieldNumber, confirm.FieldInteger}, f.Type):
		return "a number"
	}
	return ""
}
