package slack

import (
	"fmt"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/slack-go/slack"

	"github.com/airlockhq/airlock/adapters/internal/visible"
	"github.com/airlockhq/airlock/bot"
	cardpkg "github.com/airlockhq/airlock/card"
	"github.com/airlockhq/airlock/confirm"
)

// Action ids of the card's buttons, of the grant notice's button and of
// the deny-reason modal. Every card button carries the call's opaque
// reference (confirm.Ref) as its value, the Revoke button the grant's
// (confirm.GrantRef), never the tool name or the arguments.
const (
	ActionAllow       = "airlock_allow"         // style primary; the only primary button
	ActionAllowGrant  = "airlock_allow_grant"   // no style: "Allow for 1h", allow and grant later calls of the tool in the thread
	ActionDeny        = "airlock_deny"          // style danger; the only danger button
	ActionDenyReason  = "airlock_deny_reason"   // no style: opens the deny-reason modal
	ActionShowArgs    = "airlock_show_args"     // no style: opens a modal with the whole arguments
	ActionRevokeGrant = "airlock_revoke_grant"  // no style, on a grant notice: revokes the grant
	ActionEdit        = "airlock_edit"          // no style: "Edit…" opens the edit modal (value: the call's reference)
	ActionExtend      = "airlock_extend"        // no style, once per card: "Extend 30m" (value: Card.ExtendRef)
	ActionChecked     = "airlock_checked"       // no style: "I checked — go on" on an unknown run (value: its confirm.CheckedRef)
	ActionRunStop     = "airlock_run_stop"      // style danger, on a run message: "Stop run" (value: confirm.RunRef)
	ActionRunMarkDone = "airlock_run_mark_done" // style primary, on a halted run's message: "Mark done"
	ActionRunRetry    = "airlock_run_retry"     // no style, on a halted run's message: "Retry"
	ActionAllowAll    = "airlock_allow_all"     // no style, on a card of 2+ waiting calls: allow every one the clicker may (value: confirm.AllRef)
	ActionDenyAll     = "airlock_deny_all"      // no style, beside it: deny every one the clicker may (value: confirm.AllRef)
	ActionPreview     = "airlock_preview"       // no style: "Show full preview" opens a modal with the whole preview (value: the call's reference)

	// CallbackDenyReason is the callback_id of the deny-reason modal.
	CallbackDenyReason = "airlock_deny_reason"
	// CallbackShowArgs is the callback_id of the read-only arguments modal.
	CallbackShowArgs = "airlock_show_args"
	// CallbackPreview is the callback_id of the read-only preview modal.
	CallbackPreview = "airlock_preview"
	// CallbackEdit is the callback_id of the edit modal.
	CallbackEdit = "airlock_edit"

	reasonBlockID  = "airlock_reason"
	reasonActionID = "airlock_reason_input"

	// EditBlockID is the edit modal's input block: a refused edit's
	// message is answered under it (response_action "errors").
	EditBlockID  = "airlock_edit_args"
	editActionID = "airlock_edit_args_input"

	// MaxEditChars is the most a Slack plain_text_input holds: arguments
	// whose pretty JSON is longer can't be edited in Slack.
	MaxEditChars = 3000
)

// Rendering limits. Slack allows 3000 characters in a section's text, 50
// blocks in a message and 100 in a modal.
const (
	maxSectionText  = 3000
	maxMessageBlock = 50
	maxModalBlocks  = 100

	// ArgsPreviewChars and ArgsPreviewLines bound the arguments shown on
	// the card; longer arguments are cut with a note, and while the card
	// waits a "Show full arguments" button opens them whole in a modal.
	ArgsPreviewChars = 1000
	ArgsPreviewLines = 20

	maxIntroChars   = 1200
	maxSummaryChars = 400
	maxResultChars  = 300
	maxReasonChars  = 520
	maxToolChars    = 80
	maxModalArgs    = 2800 // characters of arguments per modal section

	maxEditErrorChars = 300 // a refused edit's message under the modal's input
	maxChangesShown   = 10  // changed keys listed on an edited call
	maxChangeKey      = 80
	maxChangeValue    = 200
	maxEscalations    = 5 // escalation steps listed on a card
	maxLinkChars      = 2000
)

var (
	userIDPattern  = regexp.MustCompile(`^[UW][A-Z0-9]{2,40}$`)
	groupIDPattern = regexp.MustCompile(`^S[A-Z0-9]{2,40}$`)
)

// Render returns the Block Kit blocks of a card: a header, what the agent
// wants to do (its own words quoted), one rich_text block per call (tool,
// why a person is asked and how many must allow, who may decide when a
// rule narrowed it, the read-back, the arguments preformatted, where it
// stands with the approvals so far) followed, for each call still
// waiting, by an actions block with Allow (primary), "Allow for 1h" (no
// style, when the call may be granted), Deny (danger), "Deny with
// reason…" (no style) and, when the card cut its arguments, "Show full
// arguments" (no style), and a footer saying who may approve and when the
// request expires. A call needing several approvals keeps its buttons
// until it is decided. A complete card has no buttons, except "I checked
// — go on" (no style) on a call whose run ended unknown until a person
// marks it checked; then the call says who checked it and when.
//
// Every text the model, a tool, a rule or a person wrote is in rich_text
// text elements, which Slack shows literally: no mrkdwn, links, mentions
// or emoji, and characters that would act unseen are shown escaped (see
// escape.go). People on a call are user elements. Only Airlock's own
// words use mrkdwn.
//
// A call a grant allowed says whose grant it was when grantedBy (grant id
// to the user who granted it) knows; otherwise it names the grant.
//
// A card of more calls than a message holds is several messages (see
// RenderMessages, which the adapter posts); Render returns the first.
func Render(c cardpkg.Card) []slack.Block { return RenderWith(c, nil) }

// RenderWith is Render with who granted the grants that allowed calls:
// the card's first message (see RenderMessages), its only one unless the
// card has more calls than a message holds.
func RenderWith(c cardpkg.Card, grantedBy map[string]string) []slack.Block {
	return RenderMessages(c, grantedBy)[0].Blocks
}

// copyNote says, on a card posted away from its conversation (in an
// approvals channel, or a copy in an approver's DM), where it stands, with
// a "View the conversation" link back to the thread.
func copyNote(c cardpkg.Card) slack.Block {
	var els []slack.RichTextSectionElement
	switch c.Copy {
	case "":
		return nil
	case cardpkg.CopyDM:
		els = []slack.RichTextSectionElement{emoji("incoming_envelope"),
			rtText(" A copy of an approval card, sent to you as an approver. A decision on any copy counts once, and every copy shows it.", nil)}
	default:
		els = []slack.RichTextSectionElement{emoji("inbox_tray"),
			rtText(" Posted here for approval; the conversation goes on in its own thread.", nil)}
	}
	if u, ok := safeLink(c.ThreadLink); ok {
		els = append(els, rtText(" ", nil), slack.NewRichTextSectionLinkElement(u, "View the conversation", nil))
	}
	return slack.NewRichTextBlock("copy", slack.NewRichTextSection(els...))
}

// safeLink accepts a link Airlock shows (a permalink Slack gave): an
// absolute http(s) URL without spaces, hidden characters or the
// characters of Slack's entities. Anything else is not shown.
func safeLink(u string) (string, bool) {
	if u == "" || len(u) > maxLinkChars || strings.ContainsAny(u, "<>|\"\\` ") || visible.Contains(u) {
		return "", false
	}
	for _, r := range u {
		if r <= ' ' || r == 0x7f {
			return "", false
		}
	}
	p, err := url.Parse(u)
	if err != nil || (p.Scheme != "https" && p.Scheme != "http") || p.Host == "" || p.User != nil {
		return "", false
	}
	return u, true
}

// schedule is what happened to the card's deadline and who it reaches:
// the one Extend (by whom, the new deadline) and the escalation steps
// (when, whom they mention, who may decide from then; fired or not).
// People are user and usergroup elements, shown by name, never mrkdwn.
// A closed card lists only the steps that fired.
func schedule(c cardpkg.Card, complete bool) slack.Block {
	return scheduleUpTo(c, complete, maxEscalations, maxPeoplePerSet)
}

// scheduleUpTo is schedule listing at most steps escalation steps and
// perSet people a set.
func scheduleUpTo(c cardpkg.Card, complete bool, steps, perSet int) slack.Block {
	var secs []slack.RichTextElement
	if e := c.Extended; e != nil {
		els := []slack.RichTextSectionElement{emoji("hourglass"), rtText(" Extended by ", nil), person(e.By), rtText(" — now expires ", nil)}
		secs = append(secs, slack.NewRichTextSection(append(els, clock(c.ExpiresAt)...)...))
	}
	var shown []cardpkg.Escalation
	for _, st := range c.Escalations {
		if st.Fired || !complete {
			shown = append(shown, st)
		}
	}
	for i, st := range shown {
		if i == steps {
			secs = append(secs, slack.NewRichTextSection(rtText(fmt.Sprintf("… and %d more escalation %s", len(shown)-i, plural(len(shown)-i, "step", "steps")), italic)))
			break
		}
		var els []slack.RichTextSectionElement
		if st.Fired {
			els = append(els, emoji("mega"), rtText(" Escalated at ", nil))
		} else {
			els = append(els, emoji("alarm_clock"), rtText(" Escalates at ", nil))
		}
		els = append(els, clock(st.At)...)
		if !st.Mention.Empty() {
			els = append(els, rtText(" to ", nil))
			els = append(els, peopleUpTo(st.Mention, perSet)...)
		}
		if !st.Approvers.Empty() {
			if st.Fired {
				els = append(els, rtText("; may now also decide: ", nil))
			} else {
				els = append(els, rtText("; then may also decide: ", nil))
			}
			els = append(els, peopleUpTo(st.Approvers, perSet)...)
		}
		secs = append(secs, slack.NewRichTextSection(els...))
	}
	if len(secs) == 0 {
		return nil
	}
	return slack.NewRichTextBlock("schedule", secs...)
}

// clock is a time of day as a date element: each reader sees it in their
// own time zone; the fallback is "15:04 UTC".
func clock(t time.Time) []slack.RichTextSectionElement {
	if t.IsZero() {
		return []slack.RichTextSectionElement{rtText("an unknown time", nil)}
	}
	fallback := t.UTC().Format("15:04 UTC")
	return []slack.RichTextSectionElement{slack.NewRichTextSectionDateElement(t.Unix(), "{time}", nil, &fallback)}
}

// extendActions is the card's own buttons, no style, when it offers any
// (card.Card.CardActions: Allow all and Deny all, Extend).
func extendActions(c cardpkg.Card) slack.Block {
	acts := c.CardActions()
	if len(acts) == 0 {
		return nil
	}
	return actionsBlock("card_actions", acts)
}

// FallbackText is the message's plain text: notifications and clients
// without Block Kit show it. It holds Airlock's words only (a tool's name
// only when it is a plain name), so nothing a model wrote reaches a
// notification, and no user id, so it pings nobody.
func FallbackText(c cardpkg.Card) string {
	var b strings.Builder
	if c.Complete() {
		b.WriteString("Approval request closed")
	} else {
		b.WriteString("Approval needed")
	}
	fmt.Fprintf(&b, " (%d %s)", len(c.Calls), plural(len(c.Calls), "call", "calls"))
	for _, call := range c.Calls {
		fmt.Fprintf(&b, "\n%d. %s — %s", call.Number, toolWord(call.Tool), call.Brief())
		if call.Edited != nil {
			b.WriteString(" (arguments edited by an approver)")
		}
	}
	return clip(b.String(), 3000)
}

// plainName is a tool name that is inert in mrkdwn as it is.
var plainName = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_-]{0,63}$`)

// toolWord is a tool's name for Airlock's own texts: the name when it is
// a plain name, else "a tool".
func toolWord(tool string) string {
	if plainName.MatchString(tool) {
		return tool
	}
	return "a tool"
}

func header(complete bool) slack.Block {
	text := "Approval needed"
	if complete {
		text = "Approval request closed"
	}
	return slack.NewHeaderBlock(slack.NewTextBlockObject(slack.PlainTextType, text, true, false), slack.HeaderBlockOptionBlockID("header"))
}

func introSection(c cardpkg.Card) slack.Block {
	if s := c.Step; s != nil {
		// Airlock's call, not the agent's; the config's names literal.
		title := s.Title()
		end := ". "
		stress := "Nothing runs until it is allowed or denied."
		if c.Complete() {
			stress = ""
			end = ". It is decided; the outcome is below."
		}
		els := []slack.RichTextSectionElement{rtText(strings.ToUpper(title[:1])+title[1:]+", started by ", nil), person(s.StartedBy), rtText(end, nil)}
		if stress != "" {
			els = append(els, rtText(stress, bold))
		}
		return slack.NewRichTextBlock("intro", slack.NewRichTextSection(els...))
	}
	n := len(c.Calls)
	var b strings.Builder
	who := "The agent"
	if c.RequestedBy != "" {
		who = "Asked by " + user(c.RequestedBy) + "; the agent"
	}
	if c.Complete() {
		fmt.Fprintf(&b, "%s wanted to run %d %s. Every call is decided; the outcomes are below.", who, n, plural(n, "call", "calls"))
	} else {
		fmt.Fprintf(&b, "%s wants to run %d %s. *Nothing runs until each call that needs approval is allowed or denied.*", who, n, plural(n, "call", "calls"))
	}
	return slack.NewSectionBlock(mrkdwn(clipSection(b.String())), nil, nil, slack.SectionBlockOptionBlockID("intro"))
}

// introQuote is the model's own words on the card, quoted and literal.
func introQuote(c cardpkg.Card) slack.Block {
	intro := strings.TrimSpace(c.Intro)
	if intro == "" {
		return nil
	}
	return slack.NewRichTextBlock("intro_words",
		slack.NewRichTextSection(rtText("The agent says:", italic)),
		richQuote(revealClip(limitLines(intro, 15), maxIntroChars)),
	)
}

// gate says in a few words whether and why a person is asked: the
// call's Why() ("needs 2 approvals: rule prod") for flagged calls, without
// the tool's own flag when that is the only reason. Rule
// names come from the config and are shown literally like everything
// else on the card.
func gate(c cardpkg.Call) string {
	switch {
	case c.State.Kind == cardpkg.DeniedByRule:
		return "refused by a rule"
	case c.Flagged:
		// The tool's own flag alone goes without saying.
		plain := true
		for _, r := range c.Reasons {
			plain = plain && r.Kind == confirm.ReasonToolFlag
		}
		if plain {
			c.Reasons = nil
		}
		return riskEmoji[c.Risk] + c.Why()
	}
	return "no approval needed"
}

// riskEmoji marks the tiers above the default beside their words.
var riskEmoji = map[confirm.Risk]string{confirm.RiskHigh: "🟠 ", confirm.RiskCritical: "🔴 "}

// callBlock is one call: number, tool, whether it needs approval (why,
// and how many must allow), who may decide when a rule narrowed it, the
// read-back, the arguments preformatted (cut ones saying how much is
// hidden), and where it stands. offer says whether the card offers "Show
// full arguments".
func callBlock(c cardpkg.Call, preview argsView, offer bool, grantedBy map[string]string, k caps) slack.Block {
	els := []slack.RichTextElement{slack.NewRichTextSection(
		rtText(strconv.Itoa(c.Number)+". ", bold),
		rtText(revealClip(oneLine(c.Tool), k.tool), code),
		rtText("  ·  ", nil),
		rtText(revealClip(oneLine(gate(c)), k.reason), italic),
	)}
	if len(c.Restrict) > 0 && c.Open() {
		els = append(els, slack.NewRichTextSection(restriction(c.Restrict, k.people)...))
	}
	if e := c.Edited; e != nil {
		els = append(els, edited(*e, k)...)
	}
	if s := strings.TrimSpace(c.Summary); s != "" && k.summary > 0 {
		els = append(els, richQuote(revealClip(limitLines(s, k.summaryLines), k.summary)))
	}
	if preview.text != "" {
		els = append(els, &slack.RichTextPreformatted{Type: slack.RTEPreformatted, Elements: []slack.RichTextSectionElement{rtText(preview.text, nil)}})
	}
	if preview.cut {
		note := fmt.Sprintf("… %s.", cardpkg.Hidden(preview.hidden))
		if offer {
			note += " Show full arguments opens them whole."
		}
		els = append(els, slack.NewRichTextSection(rtText(note, italic)))
	}
	els = append(els, previewElements(c, k)...)
	els = append(els, slack.NewRichTextSection(status(c, grantedBy, k)...))
	return slack.NewRichTextBlock("call_"+strconv.Itoa(c.Number), els...)
}

// edited says who changed a call's arguments and when, and each changed
// key as "key: before → after", literal like the arguments (preformatted
// rich text, hidden characters escaped). The read-back and arguments the
// card shows after it are the edited ones.
func edited(e cardpkg.Edit, k caps) []slack.RichTextElement {
	head := []slack.RichTextSectionElement{emoji("pencil2"), rtText(" Edited by ", bold), personUpTo(e.By, k.person)}
	if !e.At.IsZero() {
		head = append(head, when(&e.At)...)
	}
	head = append(head, rtText(". The read-back and arguments below are the edited ones; it runs with them. Changed:", nil))
	if len(e.Changes) == 0 || k.changes == 0 {
		head[len(head)-1] = rtText(". The read-back and arguments below are the edited ones; it runs with them.", nil)
		return []slack.RichTextElement{slack.NewRichTextSection(head...)}
	}
	out := []slack.RichTextElement{slack.NewRichTextSection(head...)}
	var lines []string
	for i, ch := range e.Changes {
		if i == k.changes {
			rest := len(e.Changes) - i
			lines = append(lines, fmt.Sprintf("… and %d more changed %s", rest, plural(rest, "key", "keys")))
			break
		}
		lines = append(lines, changeValue(ch.Key, k.changeKey, "(empty key)")+": "+
			changeValue(ch.Before, k.changeValue, "(not set)")+" → "+changeValue(ch.After, k.changeValue, "(not set)"))
	}
	return append(out, &slack.RichTextPreformatted{Type: slack.RTEPreformatted, Elements: []slack.RichTextSectionElement{rtText(strings.Join(lines, "\n"), nil)}})
}

// changeValue is one side of a change on one line: line breaks and tabs
// written as escapes, hidden characters revealed, at most n characters.
func changeValue(s string, n int, empty string) string {
	if s == "" {
		return empty
	}
	return revealClip(strings.NewReplacer("\n", `\n`, "\r", `\r`, "\t", `\t`).Replace(s), n)
}

// Bounds of the people named on a call.
const (
	maxRestrictSets   = 5
	maxPeoplePerSet   = 20
	maxLiteralPersonL = 60
)

// restriction says who may decide a call a rule narrowed: people in every
// set.
func restriction(sets []confirm.Approvers, perSet int) []slack.RichTextSectionElement {
	lead := "Who may decide: "
	if len(sets) > 1 {
		lead = "Who may decide (people in each of these): "
	}
	out := []slack.RichTextSectionElement{rtText(lead, bold)}
	return append(out, joinRich(len(sets), func(i int) []slack.RichTextSectionElement { return peopleUpTo(sets[i], perSet) }, "; ", "; and %d more", maxRestrictSets)...)
}

// peopleUpTo is a set of people as rich text: user and usergroup elements
// for Slack ids, literal text for anything else; at most n named, the
// rest counted.
func peopleUpTo(s confirm.Approvers, n int) []slack.RichTextSectionElement {
	var names []slack.RichTextSectionElement
	for _, u := range s.Users {
		names = append(names, person(u))
	}
	for _, g := range s.Groups {
		if groupIDPattern.MatchString(g) {
			names = append(names, slack.NewRichTextSectionUserGroupElement(g))
		} else {
			names = append(names, rtText("group "+revealClip(oneLine(g), maxLiteralPersonL), nil))
		}
	}
	for _, r := range s.Roles {
		names = append(names, rtText("role "+revealClip(oneLine(r), maxLiteralPersonL), nil))
	}
	if len(names) == 0 {
		return []slack.RichTextSectionElement{rtText("nobody", nil)}
	}
	return joinRich(len(names), func(i int) []slack.RichTextSectionElement { return names[i : i+1] }, ", ", " and %d more", n)
}

// joinRich joins the count pieces piece(i) with sep, at most n of them: a
// longer list ends in more, a format of how many are left out.
func joinRich(count int, piece func(i int) []slack.RichTextSectionElement, sep, more string, n int) []slack.RichTextSectionElement {
	var out []slack.RichTextSectionElement
	for i := range count {
		if i == n {
			return append(out, rtText(fmt.Sprintf(more, count-n), nil))
		}
		if i > 0 {
			out = append(out, rtText(sep, nil))
		}
		out = append(out, piece(i)...)
	}
	return out
}

// callActions are the buttons of a call (card.Card.Actions): "Show full
// arguments" only when the card cut its arguments. Allow is the only
// primary button and Deny the only danger button of the card.
func callActions(cd cardpkg.Card, c cardpkg.Call, cut bool) []cardpkg.Action {
	var out []cardpkg.Action
	for _, a := range cd.Actions(c, func(t string) string { return clip(oneLine(visible.Reveal(t)), 40) }) {
		if a.Kind == cardpkg.ActShowArgs && !cut {
			continue
		}
		out = append(out, a)
	}
	return out
}

// actionIDs are the action_ids of the card's action kinds.
var actionIDs = map[cardpkg.ActionKind]string{
	cardpkg.ActAllow: ActionAllow, cardpkg.ActAllowGrant: ActionAllowGrant, cardpkg.ActDeny: ActionDeny,
	cardpkg.ActDenyReason: ActionDenyReason, cardpkg.ActEdit: ActionEdit, cardpkg.ActShowArgs: ActionShowArgs,
	cardpkg.ActChecked: ActionChecked, cardpkg.ActExtend: ActionExtend,
	cardpkg.ActRunStop: ActionRunStop, cardpkg.ActRunMarkDone: ActionRunMarkDone, cardpkg.ActRunRetry: ActionRunRetry,
	cardpkg.ActAllowAll: ActionAllowAll, cardpkg.ActDenyAll: ActionDenyAll,
	cardpkg.ActShowPreview: ActionPreview,
	cardpkg.ActAllowTyped:  ActionAllowTyped,
}

// actionsBlock lays actions out as one actions block of buttons, each
// carrying its reference as its value.
func actionsBlock(id string, acts []cardpkg.Action) slack.Block {
	els := make([]slack.BlockElement, 0, len(acts))
	for _, a := range acts {
		btn := slack.NewButtonBlockElement(actionIDs[a.Kind], a.Ref, plain(a.Label))
		switch a.Emphasis {
		case cardpkg.Primary:
			btn.Style = slack.StylePrimary
		case cardpkg.Danger:
			btn.Style = slack.StyleDanger
		}
		btn.AccessibilityLabel = clip(a.A11yLabel, 75)
		els = append(els, btn)
	}
	return slack.NewActionBlock(id, els...)
}

// status lays out where a call stands (card.Call.Status): the decision
// after its emoji, the run after "  ·  " and its emoji, each note on a
// line of its own. People are user elements, times date elements; texts
// a person, a rule, the model or a tool wrote (reasons, messages,
// results) are literal. A grant is named by who granted it when
// grantedBy knows.
func status(c cardpkg.Call, grantedBy map[string]string, k caps) []slack.RichTextSectionElement {
	if by := grantedBy[c.State.GrantID]; by != "" && c.State.GrantID != "" {
		c.State.GrantBy = by
	}
	s := c.Status()
	out := append(icon(s.Decision.Icon), partsWith(s.Decision.Parts, " ", true, k)...)
	if len(s.Run.Parts) > 0 {
		out = append(out, rtText("  ·  ", nil))
		out = append(out, icon(s.Run.Icon)...)
		out = append(out, partsWith(s.Run.Parts, " ", false, k)...)
	}
	for _, n := range s.Notes {
		out = append(out, partsWith(n.Parts, "\n", false, k)...)
	}
	return out
}

// emojis are the emoji of the card's icons; an icon not here has none.
var emojis = map[cardpkg.Icon]string{
	cardpkg.IconNone: "arrow_forward", cardpkg.IconPolicy: "arrow_forward",
	cardpkg.IconWaiting: "hourglass_flowing_sand", cardpkg.IconAllowed: "white_check_mark",
	cardpkg.IconDenied: "no_entry_sign", cardpkg.IconRefused: "no_entry_sign", cardpkg.IconExpired: "alarm_clock",
	cardpkg.IconWarning: "warning", cardpkg.IconQuestion: "grey_question", cardpkg.IconRunning: "gear",
	cardpkg.IconSucceeded: "heavy_check_mark", cardpkg.IconFailed: "x", cardpkg.IconUnknown: "warning",
}

func icon(i cardpkg.Icon) []slack.RichTextSectionElement {
	if e, ok := emojis[i]; ok {
		return []slack.RichTextSectionElement{emoji(e)}
	}
	return nil
}

// parts lays out a status's parts as rich text, lead before the first
// (capitalised when capital): Airlock's words as text (labels and
// stressed words bold), people as user elements, times as date
// elements, and text from outside Airlock revealed and clipped, within
// the text element of the words before it.
func parts(ps []cardpkg.Part, lead string, capital bool) []slack.RichTextSectionElement {
	return partsWith(ps, lead, capital, fullCaps)
}

// partsWith is parts with texts from outside Airlock clipped to k.
func partsWith(ps []cardpkg.Part, lead string, capital bool, k caps) []slack.RichTextSectionElement {
	var out []slack.RichTextSectionElement
	text := "" // words not yet written
	pending := false
	flush := func() {
		if pending {
			out = append(out, rtText(text, nil))
		}
		text, pending = "", false
	}
	for i, p := range ps {
		t := p.Text
		if i == 0 && (p.Kind == cardpkg.Words || p.Kind == cardpkg.Strong || p.Kind == cardpkg.Label) {
			if capital && t != "" {
				t = strings.ToUpper(t[:1]) + t[1:]
			}
			t = lead + t
		}
		switch p.Kind {
		case cardpkg.Words:
			flush()
			text, pending = t, true
		case cardpkg.Quote:
			text, pending = text+revealClip(t, k.reason), true
		case cardpkg.Output:
			text, pending = text+revealClip(oneLine(t), k.result), true
		case cardpkg.Strong, cardpkg.Label:
			flush()
			out = append(out, rtText(t, bold))
		case cardpkg.Person:
			flush()
			out = append(out, deciderUpTo(t, k.person))
		case cardpkg.Time:
			flush()
			fallback := p.At.UTC().Format("2006-01-02 15:04:05 UTC")
			out = append(out, slack.NewRichTextSectionDateElement(p.At.Unix(), "{date_short_pretty} at {time_secs}", nil, &fallback))
		case cardpkg.Code:
			flush()
			out = append(out, rtText(revealClip(oneLine(t), k.tool), code))
		}
	}
	flush()
	return out
}

func footer(c cardpkg.Card, complete bool) string {
	var parts []string
	if c.RequestedBy != "" {
		parts = append(parts, "Requested by "+user(c.RequestedBy))
	}
	parts = append(parts, "May approve: "+approvers(c.Approvers))
	if !complete {
		parts = append(parts, "The requester may withdraw (deny) their own calls")
		if !c.ExpiresAt.IsZero() {
			parts = append(parts, "Expires "+slackDate(c.ExpiresAt, "{date_short_pretty} at {time}"))
		}
	} else {
		parts = append(parts, "Closed")
	}
	if c.BatchID != "" {
		parts = append(parts, "Request "+escapeClip(c.BatchID, 40))
	}
	return clip(strings.Join(parts, "  ·  "), maxSectionText)
}

func approvers(s confirm.Approvers) string {
	var names []string
	for _, u := range s.Users {
		names = append(names, user(u))
	}
	for _, g := range s.Groups {
		if groupIDPattern.MatchString(g) {
			names = append(names, "<!subteam^"+g+">")
		} else {
			names = append(names, escapeClip(g, 40))
		}
	}
	if len(names) == 0 {
		return "nobody is configured for this channel (`channels[]` in the config)"
	}
	const maxNames = 20
	if len(names) > maxNames {
		rest := len(names) - maxNames
		names = append(names[:maxNames], fmt.Sprintf("and %d more", rest))
	}
	return strings.Join(names, ", ")
}

// deciderUpTo is who decided: a user element for a Slack user id, words
// for the bot's own actors, literal text of at most n characters
// otherwise.
func deciderUpTo(id string, n int) slack.RichTextSectionElement {
	switch id {
	case "":
		return rtText("someone", nil)
	case bot.PolicyActor:
		return rtText("the policy", nil)
	case bot.SystemActor:
		return rtText("Airlock", nil)
	}
	if userIDPattern.MatchString(id) {
		return slack.NewRichTextSectionUserElement(id, nil)
	}
	return rtText(revealClip(oneLine(id), n), nil)
}

// person is a person named on a card or a notice: a user element for a
// Slack user id (shown as the name; it is not text Slack parses), literal
// text otherwise.
func person(id string) slack.RichTextSectionElement { return personUpTo(id, maxLiteralPersonL) }

// personUpTo is person with literal text of at most n characters.
func personUpTo(id string, n int) slack.RichTextSectionElement {
	if userIDPattern.MatchString(id) {
		return slack.NewRichTextSectionUserElement(id, nil)
	}
	if strings.TrimSpace(id) == "" {
		return rtText("someone", nil)
	}
	return rtText(revealClip(oneLine(id), n), nil)
}

// user is a user id in Airlock's mrkdwn: a mention for a Slack user id.
func user(id string) string {
	if userIDPattern.MatchString(id) {
		return "<@" + id + ">"
	}
	return escapeClip(id, 60)
}

// when is a decision's time as a date element: each reader sees it in
// their own time zone; the fallback is UTC.
func when(t *time.Time) []slack.RichTextSectionElement {
	if t == nil || t.IsZero() {
		return nil
	}
	fallback := t.UTC().Format("2006-01-02 15:04:05 UTC")
	return []slack.RichTextSectionElement{rtText(" ", nil), slack.NewRichTextSectionDateElement(t.Unix(), "{date_short_pretty} at {time_secs}", nil, &fallback)}
}

// slackDate is Slack's date token for mrkdwn: each reader sees it in
// their own time zone; the fallback is UTC.
func slackDate(t time.Time, format string) string {
	return fmt.Sprintf("<!date^%d^%s|%s>", t.Unix(), format, t.UTC().Format("2006-01-02 15:04:05 UTC"))
}

// argsView is the arguments as a card shows them.
type argsView struct {
	text   string // revealed, at most ArgsPreviewChars characters and ArgsPreviewLines lines
	cut    bool
	hidden int // characters of the arguments not shown
}

// argsPreview cuts the arguments to the preview size.
func argsPreview(args string) argsView { return argsPreviewWith(args, fullCaps) }

// argsPreviewWith cuts the arguments to k's size; with none left, no
// text at all (the note says how much is hidden).
func argsPreviewWith(args string, k caps) argsView {
	args = strings.TrimSpace(args)
	if args == "" {
		return argsView{text: "(no arguments)"}
	}
	if k.args == 0 {
		return argsView{cut: true, hidden: utf8.RuneCountInString(visible.Reveal(args))}
	}
	text, hidden := visible.Preview(args, k.args, k.argsLines)
	v := argsView{text: text, hidden: hidden}
	v.cut = v.hidden > 0
	if v.text == "" {
		v.text = " "
	}
	return v
}

// DenyReasonModal is the modal "Deny with reason…" opens. Its private
// metadata carries the call's reference and where the card is, so the
// submission can be decided and answered in the right channel.
func DenyReasonModal(meta ModalMeta, call *cardpkg.Call) slack.ModalViewRequest {
	var blocks []slack.Block
	if call != nil {
		about := []slack.RichTextElement{slack.NewRichTextSection(
			rtText(fmt.Sprintf("You are denying call %d, ", call.Number), nil),
			rtText(revealClip(oneLine(call.Tool), maxToolChars), code),
		)}
		if s := strings.TrimSpace(call.Summary); s != "" {
			about = append(about, richQuote(revealClip(s, maxSummaryChars)))
		}
		blocks = append(blocks, slack.NewRichTextBlock("call", about...))
	}
	input := slack.NewPlainTextInputBlockElement(plain("Why is this denied?"), reasonActionID)
	input.Multiline = true
	input.MaxLength = bot.MaxReasonLen
	input.FocusOnLoad = true
	blocks = append(blocks,
		slack.NewSectionBlock(mrkdwn("The call will not run. Your reason is passed to the agent."), nil, nil, slack.SectionBlockOptionBlockID("about")),
		slack.NewInputBlock(reasonBlockID, plain("Reason"), nil, input),
	)
	return slack.ModalViewRequest{
		Type:            slack.VTModal,
		CallbackID:      CallbackDenyReason,
		Title:           plain("Deny with reason"),
		Submit:          plain("Deny"),
		Close:           plain("Cancel"),
		PrivateMetadata: meta.encode(),
		Blocks:          slack.Blocks{BlockSet: blocks},
	}
}

// EditValue is the edit modal's pre-filled text for a call's arguments:
// their JSON with every hidden character (bidi controls, zero-width and
// other format characters, C0 and C1 controls) written as its JSON escape,
// such as \u202e, as the terminal shows it. Inside a JSON string the
// escape is the same character, so the text decodes to the same value.
func EditValue(args string) string { return visible.Reveal(args) }

// EditModal is the modal Edit… opens: the call (number, tool, current
// read-back) and one multi-line input holding its arguments as pretty
// JSON, labelled with the call's number and tool. Its private metadata
// carries the call's reference, where the card is and the card message,
// so the submission is judged as a click on that card. The caller checks
// that the arguments fit (MaxEditChars).
func EditModal(meta ModalMeta, f bot.EditForm) slack.ModalViewRequest {
	tool := revealClip(oneLine(f.Tool), maxToolChars)
	about := []slack.RichTextElement{slack.NewRichTextSection(
		rtText(fmt.Sprintf("You are editing call %d, ", f.Number), nil),
		rtText(tool, code),
	)}
	if s := strings.TrimSpace(f.Summary); s != "" {
		about = append(about, richQuote(revealClip(limitLines(s, 6), maxSummaryChars)))
	}
	input := slack.NewPlainTextInputBlockElement(nil, editActionID)
	input.Multiline = true
	input.MaxLength = MaxEditChars
	input.InitialValue = EditValue(f.Args)
	input.FocusOnLoad = true
	label := slack.NewTextBlockObject(slack.PlainTextType, clip(fmt.Sprintf("Arguments of call %d (%s), as JSON", f.Number, tool), 2000), false, false)
	hint := slack.NewTextBlockObject(slack.PlainTextType, "Checked against the tool's schema and the policy before anything changes.", false, false)
	submit, counts := "Allow edited", "Submitting counts as your *Allow* of the edited call. Earlier approvals of this call no longer count: they approved other arguments. The original arguments stay in the audit log."
	if f.Holds {
		submit, counts = "Save edit", "This call is *critical*: saving the edit does not allow it. Allow… then asks you to type the confirmation phrase of the edited arguments. The original arguments stay in the audit log."
	}
	return slack.ModalViewRequest{
		Type:            slack.VTModal,
		CallbackID:      CallbackEdit,
		Title:           plain(clip(fmt.Sprintf("Edit call %d", f.Number), 24)),
		Submit:          plain(submit),
		Close:           plain("Cancel"),
		PrivateMetadata: meta.encode(),
		Blocks: slack.Blocks{BlockSet: []slack.Block{
			slack.NewRichTextBlock("call", about...),
			slack.NewSectionBlock(mrkdwn(counts), nil, nil, slack.SectionBlockOptionBlockID("about")),
			slack.NewInputBlock(EditBlockID, label, hint, input),
		}},
	}
}

// ArgsModal shows a call's whole arguments, read-only and literal, in
// preformatted rich text of at most maxModalArgs characters a block.
func ArgsModal(call cardpkg.Call) slack.ModalViewRequest {
	head := []slack.RichTextElement{slack.NewRichTextSection(
		rtText(strconv.Itoa(call.Number)+". ", bold),
		rtText(revealClip(oneLine(call.Tool), maxToolChars), code),
	)}
	if s := strings.TrimSpace(call.Summary); s != "" {
		head = append(head, richQuote(revealClip(s, maxSummaryChars)))
	}
	return readOnlyModal(CallbackShowArgs, fmt.Sprintf("Call %d arguments", call.Number), head, call.Args, "args_",
		"_The arguments are longer than a Slack modal holds; %d of %d parts shown. The audit log has them whole._")
}

// readOnlyModal is a modal of head and then text, literal, in
// preformatted rich text blocks (ids prefix1, prefix2, …) of at most
// maxModalArgs characters; cut says how many parts of how many a text
// too long for the modal shows.
func readOnlyModal(callback, title string, head []slack.RichTextElement, text, prefix, cut string) slack.ModalViewRequest {
	blocks := []slack.Block{slack.NewRichTextBlock("head", head...)}
	chunks := chunkArgs(text, maxModalArgs)
	limit := maxModalBlocks - 2
	for i, ch := range chunks {
		if i == limit {
			blocks = append(blocks, slack.NewContextBlock("cut", mrkdwn(fmt.Sprintf(cut, limit, len(chunks)))))
			break
		}
		pre := &slack.RichTextPreformatted{Type: slack.RTEPreformatted, Elements: []slack.RichTextSectionElement{rtText(ch, nil)}}
		blocks = append(blocks, slack.NewRichTextBlock(prefix+strconv.Itoa(i+1), pre))
	}
	return slack.ModalViewRequest{
		Type:       slack.VTModal,
		CallbackID: callback,
		Title:      plain(clip(title, 24)),
		Close:      plain("Close"),
		Blocks:     slack.Blocks{BlockSet: blocks},
	}
}

// chunkArgs reveals the arguments' hidden characters and splits them into
// pieces of at most n characters, after a line break where one is near,
// never inside an escape.
func chunkArgs(s string, n int) []string {
	if strings.TrimSpace(s) == "" {
		return []string{"(no arguments)"}
	}
	var out []string
	var cur []string // revealed characters
	curLen := 0
	for _, r := range s {
		p := string(r)
		if visible.Hidden(r) {
			p = visible.Escape(r)
		}
		pl := utf8.RuneCountInString(p)
		if curLen+pl > n && len(cur) > 0 {
			cut := len(cur)
			for i := len(cur) - 1; i > len(cur)/2; i-- {
				if cur[i-1] == "\n" {
					cut = i
					break
				}
			}
			out = append(out, strings.Join(cur[:cut], ""))
			cur = append([]string(nil), cur[cut:]...)
			curLen = 0
			for _, c := range cur {
				curLen += utf8.RuneCountInString(c)
			}
		}
		cur = append(cur, p)
		curLen += pl
	}
	if len(cur) > 0 {
		out = append(out, strings.Join(cur, ""))
	}
	for i := range out {
		if out[i] == "" {
			out[i] = " "
		}
	}
	return out
}

// --- text helpers ---

// clip keeps at most n characters of s, ending a cut text with "…".
func clip(s string, n int) string { return visible.Clip(s, n) }

// clipSection keeps a section's text within Slack's limit.
func clipSection(s string) string { return clip(s, maxSectionText) }

// limitLines keeps at most n lines of s, joining the rest into the last.
func limitLines(s string, n int) string {
	lines := strings.SplitN(s, "\n", n)
	if len(lines) == n {
		lines[n-1] = oneLine(lines[n-1])
	}
	return strings.Join(lines, "\n")
}

func oneLine(s string) string { return cardpkg.OneLine(s) }

func mrkdwn(s string) *slack.TextBlockObject {
	return slack.NewTextBlockObject(slack.MarkdownType, s, false, false)
}

func plain(s string) *slack.TextBlockObject {
	return slack.NewTextBlockObject(slack.PlainTextType, s, true, false)
}

// Rich text styles.
var (
	bold   = &slack.RichTextSectionTextStyle{Bold: true}
	italic = &slack.RichTextSectionTextStyle{Italic: true}
	code   = &slack.RichTextSectionTextStyle{Code: true}
)

// rtText is a rich text element Slack shows literally. Callers reveal
// text from outside Airlock first.
func rtText(s string, style *slack.RichTextSectionTextStyle) slack.RichTextSectionElement {
	if s == "" {
		s = " "
	}
	return slack.NewRichTextSectionTextElement(s, style)
}

func emoji(name string) slack.RichTextSectionElement {
	return slack.NewRichTextSectionEmojiElement(name, 0, nil)
}

// richQuote is literal text as a rich text quote.
func richQuote(s string) slack.RichTextElement {
	return &slack.RichTextQuote{Type: slack.RTEQuote, Elements: []slack.RichTextSectionElement{rtText(s, nil)}}
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
