package card

import (
	"strconv"
	"strings"
	"time"

	"github.com/airlockhq/airlock/confirm"
)

// PartKind is what a part of a status is: Airlock's own words, or a
// person, a time, or text from outside Airlock that a renderer must show
// inert (escaped, clipped to its platform's bounds).
type PartKind uint8

const (
	Words  PartKind = iota // Airlock's words (Text)
	Strong                 // Airlock's words, stressed (Text)
	Label                  // Airlock's words naming what follows, e.g. "Reason: " (Text)
	Person                 // a platform user id (Text), shown as a name that pings nobody
	Time                   // a moment (At), shown in each reader's time zone where the platform can
	Code                   // a name from the config or an id (Text, untrusted): literal, short, on one line
	Quote                  // words a person, a rule or Airlock's checks wrote (Text, untrusted): literal
	Output                 // a tool's output (Text, untrusted): literal, on one line, cut short
)

// Part is one piece of a status line.
type Part struct {
	Kind PartKind
	Text string
	At   time.Time
	Who  confirm.Approvers // for People (covers.go)
	URL  string            // for Link: where it goes
	Lead string            // for Link: words before it, left out with it
	Act  ActionKind        // for Control: the button named
	N    int               // for Control: its call's number (0: the card's own)
}

// Icon is the symbol a renderer may set before a line; each maps it to
// its own emoji or colour.
type Icon uint8

const (
	IconNone      Icon = iota
	IconWaiting        // a person must decide
	IconPolicy         // runs with the batch
	IconAllowed        // people or a grant allowed it
	IconDenied         // a person denied it, or it did not run
	IconRefused        // a rule refused it
	IconExpired        // nobody decided in time
	IconWarning        // its arguments were invalid
	IconQuestion       // a state this version does not know
	IconRunning        // its run is under way
	IconSucceeded      // its run succeeded
	IconFailed         // its run failed
	IconUnknown        // its run's outcome is unknown
	IconChecked        // a person checked an unknown run
)

// Line is a line of parts with its icon.
type Line struct {
	Icon  Icon
	Parts []Part
}

// Status is where a call stands, as typed parts: the decision (who
// decided and when), the run when it ran, and notes on lines of their
// own (a deny's reason, a rule's words, what an unknown run means).
// Renderers lay it out; they choose no words.
type Status struct {
	Decision Line
	Run      Line // no parts when it did not run
	Notes    []Line
}

// maxVoters is how many approvers a status names; the rest are counted.
const maxVoters = 10

// UnknownWords say what an unknown outcome means, on cards and notices.
const UnknownWords = "it may or may not have taken effect. It was not retried; check before retrying."

// Status is where the call stands. A call nobody is asked about reads
// as running with the batch even while the batch waits.
func (c Call) Status() Status {
	st := c.State
	w := func(s string) Part { return Part{Kind: Words, Text: s} }
	at := func() []Part {
		if st.At == nil || st.At.IsZero() {
			return nil
		}
		return []Part{w(" "), {Kind: Time, At: *st.At}}
	}
	reason := func(l Line) Status {
		out := Status{Decision: l}
		if r := strings.TrimSpace(st.Reason); r != "" {
			out.Notes = append(out.Notes, Line{Parts: []Part{{Kind: Label, Text: "Reason: "}, {Kind: Quote, Text: r}}})
		}
		return out
	}
	var s Status
	switch st.Kind {
	case Waiting:
		if !c.Flagged {
			return Status{Decision: Line{IconNone, []Part{w("runs with the batch (no approval needed)")}}}
		}
		if c.Approvals <= 1 {
			return Status{Decision: Line{IconWaiting, []Part{w("waiting for a decision")}}}
		}
		ps := []Part{w("waiting for a decision: " + strconv.Itoa(len(c.Votes)) + " of " + strconv.Itoa(c.Approvals) + " approvals")}
		if len(c.Votes) > 0 {
			ps = append(append(ps, w(": ")), voters(c.Votes, ", ")...)
		}
		return Status{Decision: Line{IconWaiting, ps}}
	case Denied:
		ps := append([]Part{w("denied by "), {Kind: Person, Text: st.By}}, at()...)
		return reason(Line{IconDenied, append(ps, w("; not run"))})
	case Withdrawn:
		ps := append([]Part{w("withdrawn by the requester "), {Kind: Person, Text: st.By}}, at()...)
		return reason(Line{IconDenied, append(ps, w("; not run"))})
	case MovedOn:
		return Status{Decision: Line{IconDenied, []Part{w("not run: the requester moved on")}}}
	case Expired:
		return Status{Decision: Line{IconExpired, []Part{w("expired: nobody decided in time; not run")}}}
	case Invalid:
		return Status{Decision: Line{IconWarning, []Part{w("not run: "), {Kind: Quote, Text: st.Message}}}}
	case NotRun:
		return Status{Decision: Line{IconDenied, []Part{w("not run: "), {Kind: Quote, Text: st.Message}}}}
	case DeniedByRule:
		s = Status{Decision: Line{IconRefused, []Part{w("refused by rule "), {Kind: Code, Text: st.Rule}, w("; not run")}}}
		if m := strings.TrimSpace(st.Message); m != "" && m != confirm.DefaultRuleDenyMessage(st.Rule) {
			s.Notes = append(s.Notes, Line{Parts: []Part{{Kind: Label, Text: "The rule says: "}, {Kind: Quote, Text: m}}})
		}
		return s
	case AllowedByPolicy:
		s.Decision = Line{IconPolicy, []Part{w("runs with the batch (no approval needed)")}}
	case AllowedByGrant:
		switch {
		case st.GrantBy != "":
			s.Decision.Parts = []Part{w("allowed by "), {Kind: Person, Text: st.GrantBy}, w("'s grant")}
		case st.GrantID != "":
			s.Decision.Parts = []Part{w("allowed by grant "), {Kind: Code, Text: st.GrantID}}
		default:
			s.Decision.Parts = []Part{w("allowed by a grant")}
		}
		s.Decision = Line{IconAllowed, append(s.Decision.Parts, at()...)}
	case Allowed:
		ps := []Part{w("allowed by ")}
		if c.Approvals > 1 && len(c.Votes) > 0 {
			ps = append(ps, voters(c.Votes, " and ")...) // each says how
		} else {
			ps = append(ps, Part{Kind: Person, Text: st.By})
			switch st.Via {
			case confirm.AssurancePasskey:
				ps = append(ps, w(" with a passkey"))
			case confirm.AssuranceSSO:
				ps = append(ps, w(" after a fresh sign-in"))
			}
		}
		s.Decision = Line{IconAllowed, append(ps, at()...)}
	default: // a state this version does not know
		return Status{Decision: Line{IconQuestion, []Part{w("state "), {Kind: Code, Text: string(st.Kind)}}}}
	}
	switch {
	case c.CarriedBy != "" && c.Run == confirm.RunNotStarted && st.Kind.allows():
		s.Run = Line{IconRunning, []Part{w("for "), {Kind: Code, Text: c.CarriedBy}, w(" to carry out; not started yet")}}
	case c.CarriedBy != "" && c.Run == confirm.RunRunning:
		s.Run = Line{IconRunning, []Part{w("carried out by "), {Kind: Code, Text: c.CarriedBy}, w("; outcome not reported yet")}}
	}
	switch c.Run {
	case confirm.RunRunning:
		if s.Run.Parts == nil {
			s.Run = Line{IconRunning, []Part{w("running")}}
		}
	case confirm.RunSucceeded:
		s.Run = Line{IconSucceeded, []Part{w("succeeded")}}
	case confirm.RunFailed:
		s.Run = Line{IconFailed, []Part{w("failed: "), {Kind: Output, Text: c.Result}}}
	case confirm.RunUnknown:
		s.Run = Line{IconUnknown, []Part{{Kind: Strong, Text: "outcome unknown"}, w(": " + UnknownWords)}}
		if c.Check != nil {
			s.Notes = append(s.Notes, c.Check.Line())
		}
	}
	return s
}

// Line says what an unknown run means for its tool's later calls and,
// once a person checked it, who and when.
func (k Check) Line() Line {
	if !k.Done() {
		return Line{Parts: []Part{{Kind: Words, Text: "Until someone marks it checked, every call of this tool in this thread needs a person's yes."}}}
	}
	return Line{IconChecked, []Part{{Kind: Label, Text: "Checked by "}, {Kind: Person, Text: k.By},
		{Kind: Words, Text: " "}, {Kind: Time, At: *k.At}, {Kind: Words, Text: "; later calls of this tool are judged as usual."}}}
}

// voters names the people who approved, at most maxVoters of them.
func voters(votes []confirm.Vote, sep string) []Part {
	var out []Part
	for i, v := range votes {
		if i > 0 {
			out = append(out, Part{Kind: Words, Text: sep})
		}
		if i == maxVoters {
			out = append(out, Part{Kind: Words, Text: strconv.Itoa(len(votes)-maxVoters) + " more"})
			break
		}
		out = append(out, Part{Kind: Person, Text: v.By})
		switch v.Via {
		case confirm.AssurancePasskey:
			out = append(out, Part{Kind: Words, Text: " (passkey)"})
		case confirm.AssuranceSSO:
			out = append(out, Part{Kind: Words, Text: " (fresh sign-in)"})
		}
	}
	return out
}

// Text is the status as plain text: people as their ids, times as
// "15:04:05 UTC", the run after "; ", each note after ". ".
func (s Status) Text() string {
	var b strings.Builder
	b.WriteString(PlainText(s.Decision.Parts))
	if len(s.Run.Parts) > 0 {
		b.WriteString("; " + PlainText(s.Run.Parts))
	}
	for _, n := range s.Notes {
		if strings.HasSuffix(b.String(), ".") {
			b.WriteString(" ")
		} else {
			b.WriteString(". ")
		}
		b.WriteString(PlainText(n.Parts))
	}
	return b.String()
}

// PlainText writes parts as plain text (no escaping: callers quote or
// escape what they show).
func PlainText(ps []Part) string {
	var b strings.Builder
	for _, p := range ps {
		switch p.Kind {
		case Time:
			b.WriteString("at " + p.At.UTC().Format("15:04:05 UTC"))
		case Clock, Deadline:
			b.WriteString(p.At.UTC().Format("15:04 UTC"))
		case Output:
			b.WriteString(Excerpt(p.Text, 200))
		case People:
			b.WriteString(strings.Join(p.Who.Names(), ", "))
		case Link:
			// plain text has no links
		case Channel:
			b.WriteString(SomeChannel)
		default:
			b.WriteString(p.Text)
		}
	}
	return b.String()
}

// Brief is where a call stands in Airlock's words only (no person, no
// text from outside Airlock), for notifications: "denied; not run".
func (c Call) Brief() string {
	var who string
	switch c.State.Kind {
	case Waiting:
		if c.Approvals > 1 {
			return "waiting for a decision (" + strconv.Itoa(len(c.Votes)) + " of " + strconv.Itoa(c.Approvals) + " approvals)"
		}
		return "waiting for a decision"
	case Denied:
		return "denied; not run"
	case Withdrawn:
		return "withdrawn by the requester; not run"
	case MovedOn:
		return "not run: the requester moved on"
	case Expired:
		return "expired; not run"
	case Invalid:
		return "invalid; not run"
	case DeniedByRule:
		return "refused by a rule; not run"
	case AllowedByPolicy:
		who = "runs with the batch"
	case AllowedByGrant:
		who = "allowed by a grant"
	case Allowed:
		who = "allowed"
	default:
		return "not run"
	}
	switch c.Run {
	case confirm.RunRunning:
		if c.CarriedBy != "" {
			return who + "; carried out by the agent, outcome not reported yet"
		}
		return who + "; running"
	case confirm.RunSucceeded:
		return who + "; succeeded"
	case confirm.RunFailed:
		return who + "; failed"
	case confirm.RunUnknown:
		if c.Check != nil && c.Check.Done() {
			return who + "; outcome unknown; checked"
		}
		return who + "; outcome unknown"
	}
	return who
}
