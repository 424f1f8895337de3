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

const (
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
// a link back to the thread (card.Card.CopyNote).
func copyNote(c cardpkg.Card) slack.Block {
	l := c.CopyNote()
	if len(l.Parts) == 0 {
		return nil
	}
	return slack.NewRichTextBlock("copy", slack.NewRichTextSection(faceLine(l, fullCaps)...))
}

// faceLine lays out a line of the card's face as rich text: its emoji,
// then its parts (see partsWith).
func faceLine(l cardpkg.Line, k caps) []slack.RichTextSectionElement {
	return faceLineAfter(l, "", k)
}

// faceLineAfter is faceLine after lead (a line break between lines).
func faceLineAfter(l cardpkg.Line, lead string, k caps) []slack.RichTextSectionElement {
	var out []slack.RichTextSectionElement
	if e, ok := faceEmojis[l.Icon]; ok {
		if lead != "" {
			out = append(out, rtText(lead, nil))
		}
		out, lead = append(out, emoji(e)), " "
	}
	if len(l.Parts) > 0 && lead != "" {
		switch l.Parts[0].Kind {
		case cardpkg.Words, cardpkg.Strong, cardpkg.Label:
		default:
			out, lead = append(out, rtText(lead, nil)), ""
		}
	}
	return append(out, partsWith(l.Parts, lead, false, k)...)
}

// noticeSection lays out a notice's lines as one rich text section, each
// after a line break.
func noticeSection(ls []cardpkg.Line, k caps) slack.RichTextElement {
	var els []slack.RichTextSectionElement
	for i, l := range ls {
		lead := ""
		if i > 0 {
			lead = "\n"
		}
		els = append(els, faceLineAfter(l, lead, k)...)
	}
	return slack.NewRichTextSection(els...)
}

// faceEmojis are the emoji of the icons of the card's face and notices.
var faceEmojis = map[cardpkg.Icon]string{
	cardpkg.IconCopyDM: "incoming_envelope", cardpkg.IconCopyApprovals: "inbox_tray",
	cardpkg.IconExtended: "hourglass", cardpkg.IconEscalated: "mega", cardpkg.IconEscalates: "alarm_clock",
	cardpkg.IconNotShown: "warning", cardpkg.IconGrant: "key", cardpkg.IconPointer: "hourglass_flowing_sand",
	cardpkg.IconClosed: "ballot_box_with_check", cardpkg.IconUnknown: "warning", cardpkg.IconEdited: "pencil2",
	cardpkg.IconRecheck: "arrows_counterclockwise", cardpkg.IconRefused: "no_entry_sign",
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

// schedule is what happened to the card's deadline and who it reaches
// (card.Card.Schedule): the one Extend and the escalation steps, fired or
// not. People are user and usergroup elements, shown by name, never
// mrkdwn.
func schedule(c cardpkg.Card) slack.Block {
	return scheduleUpTo(c, maxEscalations, maxPeoplePerSet)
}

// scheduleUpTo is schedule listing at most steps escalation steps and
// perSet people a set.
func scheduleUpTo(c cardpkg.Card, steps, perSet int) slack.Block {
	k := fullCaps
	k.people = perSet
	var secs []slack.RichTextElement
	for _, l := range c.Schedule(steps) {
		secs = append(secs, slack.NewRichTextSection(faceLine(l, k)...))
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
		return []slack.RichTextSectionElement{rtText(cardpkg.UnknownTime, nil)}
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
// without Block Kit show it (card.Card.Fallback: Airlock's words only, no
// user id, so it pings nobody).
func FallbackText(c cardpkg.Card) string { return clip(c.Fallback(), 3000) }

func header(c cardpkg.Card) slack.Block {
	return slack.NewHeaderBlock(slack.NewTextBlockObject(slack.PlainTextType, c.Title(), true, false), slack.HeaderBlockOptionBlockID("header"))
}

// introSection says what is asked (card.Card.Lead) in mrkdwn: people as
// mentions, the config's names in code spans (see coverText).
func introSection(c cardpkg.Card) slack.Block {
	return slack.NewSectionBlock(mrkdwn(clipSection(coverText(c.Lead().Parts))), nil, nil, slack.SectionBlockOptionBlockID("intro"))
}

// introQuote is the model's own words on the card, quoted and literal.
func introQuote(c cardpkg.Card) slack.Block {
	label, intro := c.Said()
	if intro == "" {
		return nil
	}
	return slack.NewRichTextBlock("intro_words",
		slack.NewRichTextSection(rtText(label, italic)),
		richQuote(revealClip(limitLines(intro, 15), maxIntroChars)),
	)
}

// gate says in a few words whether and why a person is asked
// (card.Call.Gate), after the tier's emoji when it is not the default.
// Rule names come from the config and are shown literally like
// everything else on the card.
func gate(c cardpkg.Call) string {
	if c.Flagged && c.State.Kind != cardpkg.DeniedByRule {
		return riskEmoji[c.Risk] + c.Gate()
	}
	return c.Gate()
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
		els = append(els, slack.NewRichTextSection(partsWith(c.Deciders().Parts, "", false, k)...))
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
		els = append(els, slack.NewRichTextSection(rtText(wordsOf(cardpkg.ArgsCut(preview.hidden, offer, c.Number)), italic)))
	}
	els = append(els, previewElements(c, k)...)
	els = append(els, slack.NewRichTextSection(status(c, grantedBy, k)...))
	return slack.NewRichTextBlock("call_"+strconv.Itoa(c.Number), els...)
}

// wordsOf is a line of Airlock's words only (words, and the names of
// buttons) as one text.
func wordsOf(l cardpkg.Line) string {
	var b strings.Builder
	for _, p := range l.Parts {
		b.WriteString(p.Text)
	}
	return b.String()
}

// edited says who changed a call's arguments and when
// (card.Edit.Line), and each changed key as "key: before → after",
// literal like the arguments (preformatted rich text, hidden characters
// escaped). The read-back and arguments the card shows after it are the
// edited ones.
func edited(e cardpkg.Edit, k caps) []slack.RichTextElement {
	listed := min(len(e.Changes), k.changes)
	out := []slack.RichTextElement{slack.NewRichTextSection(faceLine(e.Line(listed), k)...)}
	if listed == 0 {
		return out
	}
	var lines []string
	for i, ch := range e.Changes {
		if i == k.changes {
			lines = append(lines, cardpkg.MoreChanges(len(e.Changes)-i))
			break
		}
		lines = append(lines, ch.Format(
			func(key string) string { return changeValue(key, k.changeKey, "") },
			func(v string) string { return changeValue(v, k.changeValue, "") }))
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
	maxPeoplePerSet   = 20
	maxLiteralPersonL = 60
)

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

// actionsBlock lays actions out as one actions block of buttons, each
// carrying its reference as its value.
func actionsBlock(id string, acts []cardpkg.Action) slack.Block {
	els := make([]slack.BlockElement, 0, len(acts))
	for _, a := range acts {
		btn := slack.NewButtonBlockElement(table.Action(a.Kind), a.Ref, plain(a.Label))
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
		case cardpkg.People:
			flush()
			out = append(out, peopleUpTo(p.Who, k.people)...)
		case cardpkg.Clock:
			flush()
			out = append(out, clock(p.At)...)
		case cardpkg.Deadline:
			flush()
			out = append(out, date(p.At, "{date_short_pretty} at {time}")...)
		case cardpkg.Channel:
			flush()
			out = append(out, channelElement(p.Text))
		case cardpkg.Link:
			if u, ok := safeLink(p.URL); ok {
				flush()
				if p.Lead != "" {
					out = append(out, rtText(p.Lead, nil))
				}
				out = append(out, slack.NewRichTextSectionLinkElement(u, p.Text, nil))
			}
		case cardpkg.Control:
			text, pending = text+t, true
		}
	}
	flush()
	return out
}

// footer is the card's last line (card.Card.Footer) as mrkdwn, its
// pieces apart by "  ·  ".
func footer(c cardpkg.Card) string {
	var pieces []string
	for _, l := range c.Footer() {
		pieces = append(pieces, coverText(l.Parts))
	}
	return clip(strings.Join(pieces, "  ·  "), maxSectionText)
}

// deciderUpTo is who decided: a user element for a Slack user id, words
// for the bot's own actors, literal text of at most n characters
// otherwise.
func deciderUpTo(id string, n int) slack.RichTextSectionElement {
	if name, ok := cardpkg.ActorName(id); ok {
		return rtText(name, nil)
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
		return rtText(cardpkg.Someone, nil)
	}
	return rtText(revealClip(oneLine(id), n), nil)
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
		return argsView{text: cardpkg.NoArguments}
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

// DenyReasonModal is the modal "Deny with reason…" opens
// (card.ReasonForm). Its private metadata carries the call's reference
// and where the card is, so the submission can be decided and answered
// in the right channel.
func DenyReasonModal(meta ModalMeta, call *cardpkg.Call) slack.ModalViewRequest {
	var c cardpkg.Call
	if call != nil {
		c = *call
	}
	f := cardpkg.ReasonForm(c)
	in := f.Fields[0]
	input := slack.NewPlainTextInputBlockElement(plain(in.Placeholder), reasonActionID)
	input.Multiline = in.Multiline
	input.MaxLength = bot.MaxReasonLen
	input.FocusOnLoad = true
	blocks := append(formHead(f, 0), slack.NewInputBlock(reasonBlockID, plain(in.Label), nil, input))
	return slack.ModalViewRequest{
		Type:            slack.VTModal,
		CallbackID:      CallbackDenyReason,
		Title:           plain(clip(f.Title, 24)),
		Submit:          plain(f.Submit),
		Close:           plain(f.Cancel),
		PrivateMetadata: meta.encode(),
		Blocks:          slack.Blocks{BlockSet: blocks},
	}
}

// formHead lays out what a form is about (the call, its read-back
// quoted: at most summaryLines lines, 0 for no bound) as literal rich
// text, and what submitting does, in mrkdwn.
func formHead(f cardpkg.Form, summaryLines int) []slack.Block {
	var blocks []slack.Block
	if len(f.About.Parts) > 0 {
		about := []slack.RichTextElement{slack.NewRichTextSection(partsWith(f.About.Parts, "", false, formCaps)...)}
		if s := strings.TrimSpace(f.Quote); s != "" {
			if summaryLines > 0 {
				s = limitLines(s, summaryLines)
			}
			about = append(about, richQuote(revealClip(s, maxSummaryChars)))
		}
		blocks = append(blocks, slack.NewRichTextBlock("call", about...))
	}
	if len(f.Note.Parts) > 0 {
		blocks = append(blocks, slack.NewSectionBlock(mrkdwn(coverText(f.Note.Parts)), nil, nil, slack.SectionBlockOptionBlockID("about")))
	}
	return blocks
}

// formCaps bound what a form says of a call: its tool's name, a phrase.
var formCaps = caps{tool: maxToolChars, reason: maxReasonChars, result: maxResultChars, people: maxPeoplePerSet, person: maxLiteralPersonL}

// EditValue is the edit modal's pre-filled text for a call's arguments:
// their JSON with every hidden character (bidi controls, zero-width and
// other format characters, C0 and C1 controls) written as its JSON escape,
// such as \u202e, as the terminal shows it. Inside a JSON string the
// escape is the same character, so the text decodes to the same value.
func EditValue(args string) string { return visible.Reveal(args) }

// EditModal is the modal Edit… opens (card.EditForm): the call (number,
// tool, current read-back) and one multi-line input holding its
// arguments as pretty JSON. Its private metadata carries the call's
// reference, where the card is and the card message, so the submission
// is judged as a click on that card. The caller checks that the
// arguments fit (MaxEditChars).
func EditModal(meta ModalMeta, f bot.EditForm) slack.ModalViewRequest {
	form := cardpkg.EditForm(f.Number, f.Tool, f.Summary, EditValue(f.Args), f.Holds)
	in := form.Fields[0]
	input := slack.NewPlainTextInputBlockElement(nil, editActionID)
	input.Multiline = in.Multiline
	input.MaxLength = MaxEditChars
	input.InitialValue = in.Value
	input.FocusOnLoad = true
	label := slack.NewTextBlockObject(slack.PlainTextType, clip(in.Label, 2000), false, false)
	hint := slack.NewTextBlockObject(slack.PlainTextType, in.Hint, false, false)
	return slack.ModalViewRequest{
		Type:            slack.VTModal,
		CallbackID:      CallbackEdit,
		Title:           plain(clip(form.Title, 24)),
		Submit:          plain(form.Submit),
		Close:           plain(form.Cancel),
		PrivateMetadata: meta.encode(),
		Blocks:          slack.Blocks{BlockSet: append(formHead(form, 6), slack.NewInputBlock(EditBlockID, label, hint, input))},
	}
}

// ArgsModal shows a call's whole arguments (card.ArgsView), read-only
// and literal, in preformatted rich text of at most maxModalArgs
// characters a block.
func ArgsModal(call cardpkg.Call) slack.ModalViewRequest {
	v := cardpkg.ArgsView(call)
	return readOnlyModal(CallbackShowArgs, v, viewHead(v), call.Args, "args_")
}

// viewHead is a read-only view's head: which call, its read-back quoted.
func viewHead(v cardpkg.View) []slack.RichTextElement {
	head := []slack.RichTextElement{slack.NewRichTextSection(partsWith(v.Head.Parts, "", false, formCaps)...)}
	if s := strings.TrimSpace(v.Quote); s != "" {
		head = append(head, richQuote(revealClip(s, maxSummaryChars)))
	}
	return head
}

// readOnlyModal is a modal of head and then text, literal, in
// preformatted rich text blocks (ids prefix1, prefix2, …) of at most
// maxModalArgs characters; a text too long for the modal says how many
// parts of how many it shows (card.View.Cut).
func readOnlyModal(callback string, v cardpkg.View, head []slack.RichTextElement, text, prefix string) slack.ModalViewRequest {
	blocks := []slack.Block{slack.NewRichTextBlock("head", head...)}
	chunks := chunkArgs(text, maxModalArgs, v.Empty)
	limit := maxModalBlocks - 2
	for i, ch := range chunks {
		if i == limit {
			blocks = append(blocks, slack.NewContextBlock("cut", mrkdwn("_"+v.Cut(limit, len(chunks))+"_")))
			break
		}
		pre := &slack.RichTextPreformatted{Type: slack.RTEPreformatted, Elements: []slack.RichTextSectionElement{rtText(ch, nil)}}
		blocks = append(blocks, slack.NewRichTextBlock(prefix+strconv.Itoa(i+1), pre))
	}
	return slack.ModalViewRequest{
		Type:       slack.VTModal,
		CallbackID: callback,
		Title:      plain(clip(v.Title, 24)),
		Close:      plain(cardpkg.Close),
		Blocks:     slack.Blocks{BlockSet: blocks},
	}
}

// chunkArgs reveals the arguments' hidden characters and splits them into
// pieces of at most n characters, after a line break where one is near,
// never inside an escape; empty, it is the one piece empty.
func chunkArgs(s string, n int, empty string) []string {
	if strings.TrimSpace(s) == "" {
		return []string{empty}
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
