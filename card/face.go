package card

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// The card's face: what a card says around its calls, as typed parts.
// Renderers put each piece in its place (a header block, a message's
// content, a footer, a terminal's lines) within their platform's limits;
// the words are chosen here, once for every platform.

// More part kinds (see PartKind).
const (
	// Link is a link labelled Text to URL. A renderer shows it only when
	// it trusts the URL (a permalink its platform gave), after Lead; else
	// neither.
	Link PartKind = People + 1 + iota
	// Channel is a channel id (Text), named without notifying anyone; a
	// renderer that cannot name it writes SomeChannel.
	Channel
	// Clock is a time of day (At), of an escalation step or a deadline
	// soon: the time only, in each reader's time zone where the platform
	// can.
	Clock
	// Deadline is a time to come (At): an expiry, a grant's end; date
	// and time to the minute.
	Deadline
	// Control names a button (Act, its label in Text) of call N (0: the
	// card's own): a renderer writes its button's label, or the command
	// that does what it does.
	Control
)

// Icons of the card's face (see Icon).
const (
	IconCopyDM        Icon = IconChecked + 1 + iota // a copy sent to an approver
	IconCopyApprovals                               // a card posted in an approvals channel
	IconExtended                                    // someone pushed the deadline
	IconEscalated                                   // an escalation step fired
	IconEscalates                                   // an escalation step to come
	IconGrant                                       // a grant notice
	IconRevoked                                     // a grant revoked or lapsed
	IconPointer                                     // a pointer to a card waiting elsewhere
	IconClosed                                      // a pointer to a card decided elsewhere
	IconNotShown                                    // calls a message could not show
	IconEdited                                      // an approver changed a call's arguments
	IconRecheck                                     // the preview's recheck found it unchanged
)

// Words a renderer writes in place of what it cannot name.
const (
	Someone     = "someone"               // a person without an id
	Nobody      = "nobody"                // an empty set of people
	SomeChannel = "the approvals channel" // a channel without a usable id
	UnknownTime = "an unknown time"       // a zero time
	GroupWord   = "group"                 // before a group named by its name, not an id
	RoleWord    = "role"                  // before a role named by its name, not an id
)

// Who may act for Airlock itself (State.By): the bot's actors, named in
// words by ActorName. bot.PolicyActor and bot.SystemActor are these.
const (
	PolicyActor = "policy"
	SystemActor = "airlock"
)

// ActorName is the words for one of Airlock's own actors or for nobody
// ("" → "someone"); false for a person, whom renderers name their way.
func ActorName(id string) (string, bool) {
	switch id {
	case "":
		return Someone, true
	case PolicyActor:
		return "the policy", true
	case SystemActor:
		return "Airlock", true
	}
	return "", false
}

// AndMore ends a list cut short: "and 3 more".
func AndMore(n int) string { return "and " + strconv.Itoa(n) + " more" }

func words(s string) Part { return Part{Kind: Words, Text: s} }

// Title is the card's title: "Approval needed" while a call waits,
// "Approval request closed" once none does.
func (c Card) Title() string {
	if c.Complete() {
		return "Approval request closed"
	}
	return "Approval needed"
}

// Lead says what is asked: who asked, how many calls the agent wants to
// run (or which runbook step), and that nothing runs until each is
// decided; once decided, that the outcomes follow.
func (c Card) Lead() Line {
	if s := c.Step; s != nil {
		ps := append(s.titleParts(true), words(", started by "), Part{Kind: Person, Text: s.StartedBy})
		if c.Complete() {
			return Line{Parts: append(ps, words(". It is decided; the outcome is below."))}
		}
		return Line{Parts: append(ps, words(". "), Part{Kind: Strong, Text: "Nothing runs until it is allowed or denied."})}
	}
	var ps []Part
	who := "The agent"
	if cl := c.Client; cl != nil {
		ps = []Part{words("Asked by "), {Kind: Code, Text: cl.Name}, words(", the agent of "), {Kind: Person, Text: c.RequestedBy},
			words(", in its session "), {Kind: Code, Text: Excerpt(cl.Session, 60)}}
		who = "; it"
	} else if c.RequestedBy != "" {
		ps = []Part{words("Asked by "), {Kind: Person, Text: c.RequestedBy}}
		who = "; the agent"
	}
	n := len(c.Calls)
	if c.Complete() {
		return Line{Parts: append(ps, words(fmt.Sprintf("%s wanted to run %d %s. Every call is decided; the outcomes are below.", who, n, Plural(n, "call", "calls"))))}
	}
	ps = append(ps, words(fmt.Sprintf("%s wants to run %d %s. ", who, n, Plural(n, "call", "calls"))),
		Part{Kind: Strong, Text: "Nothing runs until each call that needs approval is allowed or denied."})
	if cl := c.Client; cl != nil && cl.LeftAt != nil {
		ps = append(ps, words(" The agent stopped waiting "), Part{Kind: Time, At: *cl.LeftAt},
			words("; if it calls again with the same arguments, it gets this decision."))
	}
	return Line{Parts: ps}
}

// titleParts is the step in parts: "Step restart of runbook restart",
// the names Code, with the attempt and the retry as Title says them.
func (s Step) titleParts(capital bool) []Part {
	step := "step "
	if capital {
		step = "Step "
	}
	ps := []Part{words(step), {Kind: Code, Text: s.ID}, words(" of runbook "), {Kind: Code, Text: s.Runbook}}
	if s.Attempt > 1 {
		ps = append(ps, words(", attempt "+strconv.Itoa(s.Attempt)))
	}
	if s.Attempts > 1 {
		ps = append(ps, words(" (up to "+strconv.Itoa(s.Attempts)+" attempts; one approval covers them)"))
	}
	return ps
}

// Said is the agent's own words on the card (untrusted: renderers quote
// them, inert) after their label; "" when it said nothing.
func (c Card) Said() (label, said string) {
	if s := strings.TrimSpace(c.Intro); s != "" && c.Step == nil {
		return "The agent says:", s
	}
	return "", ""
}

// CopyNote says where a card posted away from its conversation stands
// (an approvals channel, or a copy in an approver's DM), with a link back
// to the thread; no parts on a card in its own thread.
func (c Card) CopyNote() Line {
	var l Line
	switch c.Copy {
	case "":
		return Line{}
	case CopyDM:
		l = Line{IconCopyDM, []Part{words("A copy of an approval card, sent to you as an approver. A decision on any copy counts once, and every copy shows it.")}}
	default:
		l = Line{IconCopyApprovals, []Part{words("Posted here for approval; the conversation goes on in its own thread.")}}
	}
	if c.ThreadLink != "" {
		l.Parts = append(l.Parts, Part{Kind: Link, Lead: " ", Text: "View the conversation", URL: c.ThreadLink})
	}
	return l
}

// Schedule is what happened to the card's deadline and whom it reaches:
// the one Extend (who, when, the new deadline while the card waits), then
// the escalation steps (when, whom they mention, who may decide from
// then), at most maxSteps of them and a line counting the rest. A closed
// card lists only the steps that fired.
func (c Card) Schedule(maxSteps int) []Line {
	var out []Line
	if l, ok := c.Extension(); ok {
		out = append(out, l)
	}
	shown := 0
	var rest int
	for _, st := range c.Escalations {
		if !st.Fired && c.Complete() {
			continue
		}
		if shown == maxSteps {
			rest++
			continue
		}
		shown++
		out = append(out, st.Line())
	}
	if rest > 0 {
		out = append(out, Line{IconEscalates, []Part{words(fmt.Sprintf("… and %d more escalation %s.", rest, Plural(rest, "step", "steps")))}})
	}
	return out
}

// Extension says who extended the card and when, and while it waits its
// new deadline; false when nobody did.
func (c Card) Extension() (Line, bool) {
	e := c.Extended
	if e == nil {
		return Line{}, false
	}
	ps := []Part{words("Extended by "), {Kind: Person, Text: e.By}}
	if !e.At.IsZero() {
		ps = append(ps, words(" "), Part{Kind: Time, At: e.At})
	}
	if !c.Complete() && !c.ExpiresAt.IsZero() {
		ps = append(ps, words("; now expires at "), Part{Kind: Clock, At: c.ExpiresAt})
	}
	return Line{IconExtended, append(ps, words("."))}, true
}

// Line is an escalation step in words, the same on every platform:
//
//	Escalated at 16:15: mentioned @leads; may now also decide: @boss.
//	Escalates at 16:25: will mention @boss; may then also decide: @boss.
func (e Escalation) Line() Line {
	verb, mention, decide, icon := "Escalates at ", ": will mention ", "; may then also decide: ", IconEscalates
	if e.Fired {
		verb, mention, decide, icon = "Escalated at ", ": mentioned ", "; may now also decide: ", IconEscalated
	}
	ps := []Part{words(verb), {Kind: Clock, At: e.At}}
	if !e.Mention.Empty() {
		ps = append(ps, words(mention), Part{Kind: People, Who: e.Mention})
	}
	if !e.Approvers.Empty() {
		ps = append(ps, words(decide), Part{Kind: People, Who: e.Approvers})
	}
	return Line{icon, append(ps, words("."))}
}

// Expires is the word before a card's deadline.
const Expires = "Expires"

// Footer is the card's last line, piece by piece (renderers put a
// separator between them): who asked, who may approve, while a call
// waits that the requester may withdraw and when the card expires, once
// none does that it is closed, and the request's id.
func (c Card) Footer() []Line {
	var out []Line
	if c.RequestedBy != "" {
		out = append(out, Line{Parts: []Part{words("Requested by "), {Kind: Person, Text: c.RequestedBy}}})
	}
	if c.Approvers.Empty() {
		out = append(out, Line{Parts: []Part{words("May approve: nobody is configured for this channel ("), {Kind: Code, Text: "channels[]"}, words(" in the config)")}})
	} else {
		out = append(out, Line{Parts: []Part{words("May approve: "), {Kind: People, Who: c.Approvers}}})
	}
	if c.Complete() {
		out = append(out, Line{Parts: []Part{words("Closed")}})
	} else {
		out = append(out, Line{Parts: []Part{words("The requester may withdraw (deny) their own calls")}})
		if !c.ExpiresAt.IsZero() {
			out = append(out, Line{Parts: []Part{words(Expires + " "), {Kind: Deadline, At: c.ExpiresAt}}})
		}
	}
	if c.BatchID != "" {
		out = append(out, Line{Parts: []Part{words("Request " + c.BatchID)}}) // Airlock's own id
	}
	if c.PageURL != "" {
		out = append(out, Line{Parts: []Part{{Kind: Link, Text: PageLinkWords, URL: c.PageURL}}})
	}
	return out
}

// PageLinkWords label the card's link to its page on the web console.
const PageLinkWords = "Open in the web console"

// plainName is a tool name that is inert everywhere as it is.
var plainName = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_-]{0,63}$`)

// PlainName reports whether a name is inert in every platform's markup as
// it is (letters, digits, _ and -, starting with a letter).
func PlainName(s string) bool { return plainName.MatchString(s) }

// ToolWord is a tool's name for Airlock's own plain texts (notifications):
// the name when it is a plain name, else "a tool".
func ToolWord(tool string) string {
	if PlainName(tool) {
		return tool
	}
	return "a tool"
}

// Fallback is the card's plain text for notifications and clients that
// show no layout: Airlock's words only (a tool's name only when it is a
// plain name), no user id, so it pings nobody and nothing a model wrote
// reaches a notification.
func (c Card) Fallback() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s (%d %s)", c.Title(), len(c.Calls), Plural(len(c.Calls), "call", "calls"))
	for _, call := range c.Calls {
		fmt.Fprintf(&b, "\n%d. %s — %s", call.Number, ToolWord(call.Tool), call.Brief())
		if call.Edited != nil {
			b.WriteString(" (arguments edited by an approver)")
		}
	}
	return b.String()
}

// PartFallback is the plain text of message part (from 1) of parts of a
// card laid out over several, holding calls: the card's Fallback for the
// first, and for the others which calls they continue with.
func (c Card) PartFallback(part, parts int, calls []Call) string {
	if part == 1 {
		return c.Fallback()
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s, continued (message %d of %d)", c.Title(), part, parts)
	for _, call := range calls {
		fmt.Fprintf(&b, "\n%d. %s — %s", call.Number, ToolWord(call.Tool), call.Brief())
	}
	return b.String()
}

// NotShown says that a message of the card could not show n of its calls
// within its platform's limits (blocks and characters a message holds).
func NotShown(n, blocks, chars int) Line {
	return Line{IconNotShown, []Part{words(fmt.Sprintf("%d more %s not shown: a message holds at most %d blocks and %d characters. Calls not shown cannot be decided here; unless decided they expire and do not run.",
		n, Plural(n, "call", "calls"), blocks, chars))}}
}

// Plural is one or many by n.
func Plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
