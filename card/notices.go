package card

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Notices: the thread lines Airlock posts beside its cards (a grant, an
// unknown outcome of a call no card shows, a pointer to a card posted in
// an approvals channel), in one set of words. Renderers lay out the lines
// (the first after its icon), the quote inert under them, their button
// (Revoke, "I checked — go on") and the foot beside it.

// Notice is a notice as typed parts.
type Notice struct {
	Lines []Line
	// Quote is text from outside Airlock shown quoted, inert, under the
	// lines (an unknown run's read-back); "" for none.
	Quote string
	// Foot says who may press the notice's button; no parts when it has
	// none.
	Foot Line
}

// RevokeLabel is the label of a grant notice's Revoke button.
const RevokeLabel = "Revoke"

// Notice is the grant notice at now: who granted calls of which tool
// until when and for whom; once revoked, who and when, or once lapsed,
// that it has; while active, that each call is noted and who may revoke.
func (n GrantNotice) Notice(now time.Time) Notice {
	out := Notice{Lines: []Line{n.granted()}}
	switch {
	case n.RevokedAt != nil:
		out.Lines = append(out.Lines, n.revoked())
	case !n.Active(now):
		out.Lines = append(out.Lines, Line{IconRevoked, []Part{{Kind: Strong, Text: "Expired."}, words(" Later calls need a card again.")}})
	default:
		out.Foot = Line{Parts: []Part{words("Each call it allows is noted in this thread. Any approver of this channel may revoke it.")}}
	}
	return out
}

func (n GrantNotice) granted() Line {
	return Line{IconGrant, []Part{{Kind: Person, Text: n.By}, words(" granted calls of "), {Kind: Code, Text: n.Tool},
		words(" in this thread without a card until "), {Kind: Deadline, At: n.Until}, words(", for requests by "),
		{Kind: Person, Text: n.For}, words(" or an approver of this channel.")}}
}

func (n GrantNotice) revoked() Line {
	ps := []Part{{Kind: Strong, Text: "Revoked by "}, {Kind: Person, Text: n.RevokedBy}}
	if n.RevokedAt != nil && !n.RevokedAt.IsZero() {
		ps = append(ps, words(" "), Part{Kind: Time, At: *n.RevokedAt})
	}
	return Line{IconRevoked, append(ps, words(". Later calls need a card again."))}
}

// RevokeA11yLabel is the Revoke button's label for screen readers; tool
// writes the tool's name (the renderer's escaping).
func (n GrantNotice) RevokeA11yLabel(tool func(string) string) string {
	return "Revoke the grant for " + tool(n.Tool)
}

// Text is the notice in shared words, as plain text (for a platform
// without the notice's layout, and notifications).
func (n GrantNotice) Text() string {
	s := PlainText(n.granted().Parts)
	if n.RevokedAt != nil {
		s += " " + PlainText(n.revoked().Parts)
	}
	return s
}

// Notice is the unknown outcome's thread line: which call, that it may or
// may not have taken effect, its read-back quoted, what that means for
// later calls of its tool until a person marks it checked (then who did
// and when), and while nobody did, who may.
func (n UnknownNotice) Notice() Notice {
	out := Notice{Lines: []Line{n.head(), n.Check.Line()}, Quote: strings.TrimSpace(n.Summary)}
	if !n.Check.Done() {
		out.Foot = Line{Parts: []Part{words("Any approver of this channel may mark it checked once they know whether it took effect.")}}
	}
	return out
}

func (n UnknownNotice) head() Line {
	return Line{IconUnknown, []Part{{Kind: Strong, Text: "Outcome unknown"}, words(" for call " + strconv.Itoa(n.Number) + " ("),
		{Kind: Code, Text: n.Tool}, words("): " + UnknownWords)}}
}

// Text is the notice in shared words, as plain text (for a platform
// without the notice's layout): the tool and read-back as given (callers
// quote or escape them).
func (n UnknownNotice) Text() string {
	s := "⚠ " + PlainText(n.head().Parts)
	if q := strings.TrimSpace(n.Summary); q != "" {
		s += " (" + q + ")"
	}
	return s + " " + PlainText(n.Check.Line().Parts)
}

// Fallback is the notice's plain text for notifications: Airlock's words,
// the tool's name only when it is a plain name, no read-back and no user
// id, so it pings nobody.
func (n UnknownNotice) Fallback() string {
	s := "Outcome unknown for call " + strconv.Itoa(n.Number) + " (" + ToolWord(n.Tool) + "): it may or may not have taken effect; check before retrying."
	if n.Check.Done() {
		return s + " Marked checked."
	}
	return s + " Until someone marks it checked, calls of this tool need a yes."
}

// Head is the pointer's first line: while a call waits, that the request
// waits in the approvals channel; once none does, that it closed there;
// with a link to the card.
func (p Pointer) Head() Line {
	link := Part{Kind: Link, Lead: " — ", Text: "View the card", URL: p.CardLink}
	ch := Part{Kind: Channel, Text: p.Channel}
	if !p.Complete() {
		return Line{IconPointer, []Part{words("Waiting for approval in "), ch, link}}
	}
	return Line{IconClosed, []Part{words("Approval request in "), ch, words(" closed"), link}}
}

// MoreCalls ends a list of calls cut short: "… and 3 more calls: see the
// card".
func MoreCalls(n int) string {
	return fmt.Sprintf("… and %d more %s: see the card", n, Plural(n, "call", "calls"))
}

// Fallback is the pointer's plain text for notifications, channel naming
// the approvals channel as the platform writes it in plain text: its
// words, a tool's name only when it is a plain name, no user id.
func (p Pointer) Fallback(channel string) string {
	if !p.Complete() {
		return "Waiting for approval in " + channel
	}
	var b strings.Builder
	b.WriteString("Approval request in " + channel + " closed")
	for _, c := range p.Calls {
		fmt.Fprintf(&b, "\n%d. %s — %s", c.Number, ToolWord(c.Tool), c.Brief())
	}
	return b.String()
}
