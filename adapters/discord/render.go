package discord

import (
	"fmt"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/bwmarrin/discordgo"

	"github.com/airlockhq/airlock/adapters/internal/visible"
	"github.com/airlockhq/airlock/bot"
	"github.com/airlockhq/airlock/card"
	"github.com/airlockhq/airlock/confirm"
)

// Discord's message limits.
const (
	maxContent       = 2000 // characters of a message's content
	maxEmbeds        = 10   // embeds per message
	maxRows          = 5    // action rows per message
	maxTitle         = 256  // embed title
	maxDescription   = 4096 // embed description
	maxFieldValue    = 1024 // embed field value
	maxEmbedsTotal   = 6000 // characters over every embed of a message
	maxCustomID      = 100  // a component's custom_id
	embedsTotalQuota = 5600 // what the renderer allows itself, under maxEmbedsTotal
)

// ReasonInputID is the custom id of the reason modal's text input.
const ReasonInputID = "reason"

// EditInputID is the custom id of the edit modal's text input.
const EditInputID = "args"

// MaxEditChars is the most characters of arguments the edit modal holds
// (Discord's limit of a text input); larger arguments can't be edited in
// Discord.
const MaxEditChars = 4000

// ArgsFileName is the name of the file "Show full arguments" attaches
// when the arguments do not fit in a message.
const ArgsFileName = "arguments.json"

// Embed colours by where a call stands.
const (
	colourPending = 0xF1C40F
	colourAllowed = 0x2ECC71
	colourDenied  = 0xE74C3C
	colourPolicy  = 0x95A5A6
	colourExpired = 0x7F8C8D
	colourWarning = 0xE67E22
)

// maxButtons is Discord's limit of buttons in an action row. A waiting
// call offers at most Allow, "Allow for", Deny, "Deny with reason…",
// "Edit…" and "Show full arguments": six, so with grants on a call may
// take two rows (see callRows).
const maxButtons = 5

// Bounds of the texts a card shows, in characters of escaped text.
const (
	maxIntroChars   = 1200
	maxIntroLines   = 15
	maxApprovers    = 20
	maxReasonChars  = 700 // deny messages and reasons (500 characters, escaped)
	maxResultChars  = 200
	maxWhoChars     = 60
	maxVoters       = 10  // people named in a call's approvals; the rest are counted
	argsFieldMin    = 160 // the arguments field is never cut below this
	descriptionMin  = 60
	argsFieldLabel  = card.ArgumentsLabel
	statusLabel     = card.StatusLabel
	flagReasonLabel = card.WhyLabel
	editedLabel     = card.EditedLabel
)

// RevokeLabel is the label of a grant notice's Revoke button.
const RevokeLabel = card.RevokeLabel

// CardMessage is one Discord message of a rendered card.
type CardMessage struct {
	Content    string                       `json:"content"`
	Embeds     []*discordgo.MessageEmbed    `json:"embeds"`
	Components []discordgo.MessageComponent `json:"components"`
}

// Render renders a card as one Discord message: the content (who asked,
// who may decide, when it expires, whether it was extended, its
// escalation steps, on a copy a link to the conversation, then the
// model's words quoted), an embed per call (title "[n] tool", the
// read-back as description, for a call a person must decide why and how
// many approvals it needs and who may decide it when a rule narrowed
// that, on an edited call who edited it and the changed arguments, the
// arguments in a ```json block, the call's state with approvals so far)
// and, per call still waiting for a decision, its buttons: Allow (success
// style), "Allow for <duration>" (secondary style, on calls a grant may
// allow), Deny (danger style), "Deny with reason…" (secondary style),
// "Edit…" (secondary style, on calls an approver may edit) and, when the
// arguments are cut, "Show full arguments" (secondary style), in one row,
// or two when they are six. While a call waits and the card was not
// extended, a last row holds "Extend <duration>" (secondary style). No
// other button of a card uses the success or danger style. A call
// needing several approvals keeps its buttons until it is decided. A
// complete card has no components but one: while a call's run whose
// outcome is unknown is not marked checked, a row of "I checked — go on"
// (secondary style) buttons, one per such call.
//
// Every text from the model, a tool or a person is inert (see
// escape.go): it shows as written, with no markdown, links, mentions or
// emoji, and characters that would act unseen shown escaped. People are
// named as <@id> mentions, which never ping: every card goes out with
// empty allowed_mentions.
//
// A message holds at most 10 embeds and 5 action rows: a card that does
// not fit in one message is split (see RenderMessages), and Render
// returns its first message only. The adapter posts every message of
// RenderMessages.
func Render(cd card.Card) (content string, embeds []*discordgo.MessageEmbed, components []discordgo.MessageComponent) {
	m := RenderMessages(cd)[0]
	return m.Content, m.Embeds, m.Components
}

// RenderMessages renders a card as one message, or several when it does
// not fit in one: calls are split in order into messages of at most 10
// calls and 5 action rows, the first message keeping a row for Extend
// and each gated call (open or not, so the split never changes as calls
// are decided) counted for the rows its buttons may take (see callRows);
// messages after the first say they continue the card. Embed texts are
// cut within Discord's limits (description 4096, field 1024, 6000 over a
// message's embeds), the read-back before the arguments; cut arguments
// say how many characters are hidden.
func RenderMessages(cd card.Card) []CardMessage {
	pages := splitCalls(cd)
	out := make([]CardMessage, len(pages))
	first := 1
	for p, calls := range pages {
		m := CardMessage{Embeds: []*discordgo.MessageEmbed{}}
		if p == 0 {
			m.Content = header(cd)
		} else {
			m.Content = cd.PartNote(p+1, len(pages), first, first+len(calls)-1)
		}
		budget := embedsTotalQuota / max(1, len(calls))
		for _, c := range calls {
			cover := coverField(cd, c, budget)
			acts := previewButtons(cd.Actions(c, nil), c, budget-coverRunes(cover))
			embed, cut := callEmbed(c, budget-coverRunes(cover), card.Offers(acts, card.ActShowArgs))
			if cover != nil {
				embed.Fields = append(embed.Fields, cover)
			}
			m.Embeds = append(m.Embeds, embed)
			m.Components = append(m.Components, buttons(acts, c, len(cd.Calls) > 1, cut)...)
		}
		if row, ok := extendRow(cd); ok && p == 0 {
			m.Components = append(m.Components, row)
		}
		if cd.Complete() || m.Components == nil {
			m.Components = []discordgo.MessageComponent{}
		}
		if cd.Complete() {
			m.Components = append(m.Components, checkedRows(cd, calls)...)
		}
		if n := len(m.Embeds); n > 0 && !cd.Complete() && !cd.ExpiresAt.IsZero() {
			last := m.Embeds[n-1]
			last.Footer = &discordgo.MessageEmbedFooter{Text: card.Expires}
			last.Timestamp = cd.ExpiresAt.UTC().Format("2006-01-02T15:04:05Z07:00")
		}
		out[p] = m
		first += len(calls)
	}
	return out
}

// callRows is how many action rows each gated call of the card is
// counted for when the card is split, whatever the call's state, so the
// split never changes as calls are decided or edited: two when the card
// offers grants (Allow, "Allow for", Deny, "Deny with reason…", "Edit…"
// and "Show full arguments" are six buttons), else one.
func callRows(cd card.Card) int {
	if cd.GrantFor > 0 {
		return 2
	}
	return 1
}

// extendRows is the row the first message keeps for Extend, whether or
// not it is offered now (the split must not change when it goes).
const extendRows = 1

// splitCalls cuts the calls into messages of at most maxEmbeds calls and
// maxRows action rows (see callRows and extendRows).
func splitCalls(cd card.Card) [][]card.Call {
	per := callRows(cd)
	var pages [][]card.Call
	var cur []card.Call
	rows := extendRows
	for _, c := range cd.Calls {
		need := 0
		if c.Flagged {
			need = per
		}
		if len(cur) > 0 && (len(cur) == maxEmbeds || rows+need > maxRows) {
			pages = append(pages, cur)
			cur, rows = nil, 0
		}
		cur = append(cur, c)
		rows += need
	}
	if len(cur) > 0 || len(pages) == 0 {
		pages = append(pages, cur)
	}
	return pages
}

// Bounds of what a header lists.
const (
	maxEscalations     = 3 // escalation steps shown; the rest are counted
	maxEscalationNames = 5 // people and roles named per step
)

// header is the first message's content, the card's face: its title,
// on a copy where it stands and the link to the conversation, what is
// asked, the deadline's story (the extension, the escalation steps), the
// footer (who asked, who may approve, when it expires, the request), then
// the model's words, quoted and inert.
func header(cd card.Card) string {
	var b strings.Builder
	b.WriteString("**" + cd.Title() + "**")
	if l := cd.CopyNote(); len(l.Parts) > 0 {
		b.WriteString("\n" + faceLine(l, maxApprovers))
	}
	b.WriteString("\n" + parts(cd.Lead().Parts))
	for _, l := range cd.Schedule(maxEscalations) {
		b.WriteString("\n" + faceLine(l, maxEscalationNames))
	}
	var pieces []string
	for _, l := range cd.Footer() {
		pieces = append(pieces, parts(l.Parts))
	}
	b.WriteString("\n" + strings.Join(pieces, " · "))
	if label, said := cd.Said(); said != "" {
		b.WriteString("\n" + label + "\n")
		b.WriteString(quote(escapeClip(limitLines(said, maxIntroLines), maxIntroChars)))
	}
	return truncateMarkup(b.String(), maxContent)
}

// faceLine is a line of the card's face or a notice: its emoji, then its
// parts, naming at most perSet people of a set.
func faceLine(l card.Line, perSet int) string {
	out := partsMax(l.Parts, perSet)
	if e := emojis[l.Icon]; e != "" {
		out = e + " " + out
	}
	return out
}

// safeLink is u when it is a Discord jump URL (see Adapter.Link):
// https://discord.com/channels/ then a server id or @me, a channel id and
// optionally a message id; or a page of the web console (consolePage);
// else "". Nothing else goes in a card's links.
func safeLink(u string) string {
	if consolePage(u) {
		return u
	}
	rest, ok := strings.CutPrefix(u, JumpBase)
	if !ok {
		return ""
	}
	parts := strings.Split(rest, "/")
	if len(parts) < 2 || len(parts) > 3 || (parts[0] != "@me" && !isSnowflake(parts[0])) {
		return ""
	}
	for _, p := range parts[1:] {
		if !isSnowflake(p) {
			return ""
		}
	}
	return u
}

// consolePageRe is the path of a request's or a run's page on the web
// console (card.PageURL, card.Run.PageURL: web.base_url's, from the
// config, and an id of Airlock's).
var consolePageRe = regexp.MustCompile(`^(/[A-Za-z0-9._~-]+)*/ui/(approvals|runs)/[A-Za-z0-9_-]+$`)

// consolePage reports whether u is a web console page's URL: http or
// https, a host, no user, query or fragment, and the path of a page
// (under web.base_url's own path, if any). Nothing in it can close the
// markdown link it goes in.
func consolePage(u string) bool {
	p, err := url.Parse(u)
	return err == nil && (p.Scheme == "https" || p.Scheme == "http") && p.Host != "" && p.User == nil && p.RawQuery == "" &&
		p.Fragment == "" && p.RawPath == "" && !strings.ContainsAny(u, "<>()[] \n") && consolePageRe.MatchString(p.Path)
}

// approverListMax names at most n people, roles and groups of a set; the
// rest are counted.
func approverListMax(s confirm.Approvers, n int) string {
	var out []string
	for _, u := range s.Users {
		out = append(out, mention(u))
	}
	for _, r := range s.Roles {
		if isSnowflake(r) {
			out = append(out, "<@&"+r+">")
		} else {
			out = append(out, card.RoleWord+" "+escapeClip(r, maxWhoChars))
		}
	}
	for _, g := range s.Groups {
		out = append(out, card.GroupWord+" "+escapeClip(g, maxWhoChars))
	}
	if len(out) > n {
		rest := len(out) - n
		out = append(out[:n], card.AndMore(rest))
	}
	if len(out) == 0 {
		return card.Nobody
	}
	return strings.Join(out, ", ")
}

// mention writes a user id as a Discord mention when it is a snowflake,
// else as inert text. Mentions never ping: messages go out with empty
// allowed_mentions.
func mention(id string) string {
	if isSnowflake(id) {
		return "<@" + id + ">"
	}
	if name, ok := card.ActorName(id); ok {
		return name
	}
	return escapeClip(id, maxWhoChars)
}

// callEmbed renders one call within about budget characters and reports
// whether its arguments were cut. offer says whether the card offers
// "Show full arguments" for it.
func callEmbed(c card.Call, budget int, offer bool) (*discordgo.MessageEmbed, bool) {
	title := fmt.Sprintf("[%d] ", c.Number) + escapeClip(c.Tool, clamp(budget/6, 24, maxTitle-12))
	status := truncateMarkup(statusLine(c), clamp(budget/4, 100, maxFieldValue))
	why := truncateMarkup(whyLine(c), clamp(budget/6, 80, maxFieldValue))
	edited := truncateMarkup(editedLine(c), clamp(budget/4, 100, maxFieldValue))
	preview, _ := previewField(c, previewLimit(budget), offer)
	if preview != "" {
		budget -= runes(preview) + runes(previewFieldLabel)
	}
	rest := budget - runes(title) - runes(status) - runes(why) - runes(edited) -
		runes(argsFieldLabel) - runes(statusLabel) - runes(flagReasonLabel) - runes(editedLabel) - runes(card.Expires)
	full, _ := argsField(c.Args, 0, false)
	args, cut := argsField(c.Args, min(runes(full), clamp(rest*2/3, argsFieldMin, maxFieldValue)), offer)
	summary := strings.TrimSpace(c.Summary)
	if summary == "" {
		summary = c.Tool
	}
	desc := escapeClip(summary, clamp(rest-runes(args), descriptionMin, maxDescription))
	fields := []*discordgo.MessageEmbedField{}
	if why != "" {
		fields = append(fields, &discordgo.MessageEmbedField{Name: flagReasonLabel, Value: why})
	}
	if edited != "" {
		fields = append(fields, &discordgo.MessageEmbedField{Name: editedLabel, Value: edited})
	}
	fields = append(fields, &discordgo.MessageEmbedField{Name: argsFieldLabel, Value: args})
	if preview != "" {
		fields = append(fields, &discordgo.MessageEmbedField{Name: previewFieldLabel, Value: preview})
	}
	fields = append(fields, &discordgo.MessageEmbedField{Name: statusLabel, Value: status})
	return &discordgo.MessageEmbed{
		Type:        discordgo.EmbedTypeRich,
		Title:       title,
		Description: desc,
		Color:       colour(c),
		Fields:      fields,
	}, cut
}

// Bounds of an edit's description.
const (
	maxChanges     = 8   // changed keys listed; the rest are counted
	maxChangeKey   = 60  // characters of a key, escaped
	maxChangeValue = 150 // characters of a value before or after, escaped
)

// editedLine says, for a call an approver edited, who edited it and which
// top-level arguments changed (card.Edit.Line and card.Change.Parts,
// every value the approver's or the model's words, inert); the read-back
// and arguments shown are the edited call's. Empty for a call not
// edited.
func editedLine(c card.Call) string {
	e := c.Edited
	if e == nil {
		return ""
	}
	var b strings.Builder
	b.WriteString(faceLine(e.Line(min(len(e.Changes), maxChanges)), maxApprovers))
	for i, ch := range e.Changes {
		if i == maxChanges {
			b.WriteString("\n" + card.MoreChanges(len(e.Changes)-i))
			break
		}
		b.WriteString("\n")
		for j, p := range ch.Parts() {
			switch {
			case p.Kind != card.Code:
				b.WriteString(p.Text)
			case j == 0:
				b.WriteString(escapeClip(oneLine(p.Text), maxChangeKey))
			default:
				b.WriteString(escapeClip(oneLine(p.Text), maxChangeValue))
			}
		}
	}
	return b.String()
}

// whyLine says, for a call a person must decide, why and how many
// approvals it needs (card.Call.Gate: reasons name rules from the config,
// shown inert all the same) and, when rules narrowed who may decide it,
// who may (card.Call.Deciders). Empty for calls nobody is asked about.
func whyLine(c card.Call) string {
	if !c.Flagged {
		return ""
	}
	out := escapeClip(c.Gate(), maxReasonChars)
	if d := c.Deciders(); len(d.Parts) > 0 {
		out += "\n" + parts(d.Parts)
	}
	return out
}

// argsField puts the arguments in a ```json block of at most limit
// characters (0: no limit). Cut arguments end with a line saying how many
// characters are hidden (and, when offer, where to see them all).
func argsField(args string, limit int, offer bool) (string, bool) {
	args = strings.TrimSpace(args)
	if args == "" {
		args = "{}"
	}
	const open, closing = "```json\n", "\n```"
	full := open + codeText(args) + closing
	if limit <= 0 || runes(full) <= limit {
		return full, false
	}
	note := func(hidden int) string { return "\n" + parts(card.ArgsCut(hidden, offer, 0).Parts) }
	total := runes(args)
	room := limit - runes(open) - runes(closing) - runes(note(total))
	body, shown := codeSafePrefix(args, room)
	return open + body + closing + note(total-shown), true
}

// codeSafePrefix is text made safe for a code block (codeSafe), cut to at
// most room runes; shown is how many of text's runes it holds.
func codeSafePrefix(text string, room int) (body string, shown int) {
	var b strings.Builder
	n := 0
	for _, r := range text {
		p := codeSafe(r)
		if n+runes(p) > room {
			break
		}
		b.WriteString(p)
		n += runes(p)
		shown++
	}
	return b.String(), shown
}

// statusLine lays out where a call stands (card.Call.Status): its emoji
// (the run's once it ran), the decision, the run after "; ", each note
// on a line of its own; people as (non-pinging) mentions, every text a
// person, the model, a tool or a rule wrote inert.
func statusLine(c card.Call) string {
	s := c.Status()
	lead := s.Decision.Icon
	if len(s.Run.Parts) > 0 {
		lead = s.Run.Icon
	}
	out := parts(s.Decision.Parts)
	if e := emojis[lead]; e != "" {
		out = e + " " + out
	}
	if len(s.Run.Parts) > 0 {
		out += "; " + parts(s.Run.Parts)
	}
	return out + notes(s.Notes)
}

// emojis are the emoji of the card's icons; an icon not here has none.
var emojis = map[card.Icon]string{
	card.IconWaiting: "⏳", card.IconPolicy: "✅", card.IconAllowed: "✅", card.IconDenied: "❌",
	card.IconRefused: "⛔", card.IconExpired: "⌛", card.IconWarning: "⚠️", card.IconQuestion: "❔",
	card.IconRunning: "✅", card.IconSucceeded: "✅", card.IconFailed: "⚠️", card.IconUnknown: "⚠️",
	card.IconChecked: "☑️", card.IconExtended: "⏱️", card.IconEscalated: "⏫", card.IconEscalates: "⏫",
	card.IconGrant: "🔓", card.IconRevoked: "🔒", card.IconPointer: "⏳", card.IconEdited: "✏️",
}

// notes are lines of a status, each after a line break and its emoji.
func notes(ls []card.Line) string {
	var b strings.Builder
	for _, l := range ls {
		b.WriteString("\n")
		if e := emojis[l.Icon]; e != "" {
			b.WriteString(e + " ")
		}
		b.WriteString(parts(l.Parts))
	}
	return b.String()
}

// parts writes a status's parts as Discord markdown: Airlock's words as
// they are (stressed ones bold), people as mentions, times as Discord
// timestamps, and every text from outside Airlock escaped and clipped.
func parts(ps []card.Part) string { return partsMax(ps, maxApprovers) }

// partsMax is parts naming at most perSet people of a set.
func partsMax(ps []card.Part, perSet int) string {
	var b strings.Builder
	for _, p := range ps {
		switch p.Kind {
		case card.Words, card.Label:
			b.WriteString(p.Text)
		case card.Strong, card.Control:
			// Spaces outside the marks: "**Revoked by** ".
			t := strings.TrimRight(p.Text, " ")
			b.WriteString("**" + t + "**" + p.Text[len(t):])
		case card.Person:
			b.WriteString(mention(p.Text))
		case card.People:
			b.WriteString(approverListMax(p.Who, perSet))
		case card.Time, card.Deadline:
			fmt.Fprintf(&b, "<t:%d:f>", p.At.Unix())
		case card.Clock:
			if p.At.IsZero() {
				b.WriteString(card.UnknownTime)
			} else {
				fmt.Fprintf(&b, "<t:%d:t>", p.At.Unix())
			}
		case card.Channel:
			if isSnowflake(p.Text) {
				b.WriteString("<#" + p.Text + ">")
			} else {
				b.WriteString(card.SomeChannel)
			}
		case card.Link:
			if link := safeLink(p.URL); link != "" {
				b.WriteString(p.Lead + "[" + p.Text + "](<" + link + ">)")
			}
		case card.Code:
			b.WriteString(escapeClip(p.Text, maxWhoChars))
		case card.Quote:
			b.WriteString(escapeClip(p.Text, maxReasonChars))
		case card.Output:
			b.WriteString(escapeClip(oneLine(p.Text), maxResultChars))
		}
	}
	return b.String()
}

// checkedRows are the rows of "I checked — go on" buttons of calls whose
// run ended unknown and that nobody checked yet, maxButtons to a row and
// at most maxRows rows; on a card of several calls, each label names its
// call. The split keeps no rows for them: they show on a complete card,
// which has no other buttons.
func checkedRows(cd card.Card, calls []card.Call) []discordgo.MessageComponent {
	var btns []discordgo.MessageComponent
	for _, c := range calls {
		for _, a := range cd.Actions(c, nil) {
			if a.Kind != card.ActChecked {
				continue
			}
			if b, ok := button(a, len(cd.Calls) > 1); ok {
				btns = append(btns, b)
			}
		}
	}
	var rows []discordgo.MessageComponent
	for len(btns) > 0 && len(rows) < maxRows {
		n := min(len(btns), maxButtons)
		rows = append(rows, discordgo.ActionsRow{Components: btns[:n]})
		btns = btns[n:]
	}
	return rows
}

// RenderUnknownNotice renders the thread line of a call no card shows
// whose run ended unknown: which call (tool and read-back inert), that it
// may or may not have happened, and until a person marks it checked that
// every call of its tool needs a yes, with "I checked — go on"
// (secondary style) carrying only the checked reference; once checked,
// who checked it and when, without the button.
func RenderUnknownNotice(n card.UnknownNotice) CardMessage {
	nt := n.Notice()
	k := n.Check
	m := CardMessage{Embeds: []*discordgo.MessageEmbed{}, Components: []discordgo.MessageComponent{}}
	if !k.Done() && k.Ref != "" {
		if btn, ok := button(card.CheckAction(k.Ref, n.Number), false); ok {
			m.Components = append(m.Components, discordgo.ActionsRow{Components: []discordgo.MessageComponent{btn}})
		}
	}
	m.Content = truncateMarkup(noticeText(nt, len(m.Components) > 0), maxContent)
	return m
}

// noticeText lays out a notice: its lines, each after its emoji, the
// quote inert under the first, and the foot when the notice has its
// button.
func noticeText(nt card.Notice, button bool) string {
	var b strings.Builder
	for i, l := range nt.Lines {
		if i > 0 {
			b.WriteString("\n")
		}
		b.WriteString(faceLine(l, maxApprovers))
		if i == 0 && nt.Quote != "" {
			b.WriteString("\n" + quote(escapeClip(oneLine(nt.Quote), maxReasonChars)))
		}
	}
	if button && len(nt.Foot.Parts) > 0 {
		b.WriteString("\n" + parts(nt.Foot.Parts))
	}
	return b.String()
}

func colour(c card.Call) int {
	s := c.Status()
	switch {
	case c.Open() && c.RiskLabel() != "" && c.Risk != confirm.RiskLow:
		return colourWarning // high or critical: the words are in the reasons line
	case c.Open():
		return colourPending
	case s.Run.Icon == card.IconFailed || s.Run.Icon == card.IconUnknown || s.Decision.Icon == card.IconWarning:
		return colourWarning
	}
	switch s.Decision.Icon {
	case card.IconPolicy:
		return colourPolicy
	case card.IconAllowed:
		return colourAllowed
	case card.IconExpired:
		return colourExpired
	}
	return colourDenied
}

// buttons lays out a call's decisions (card.Card.Actions) as action
// rows: one, or two when they are more than maxButtons (the decisions,
// then Edit… and Show full arguments). Discord's limits filter them:
// "Edit…" only when the arguments fit the edit modal, "Show full
// arguments" only when showArgs (the card cut them), no button whose
// custom id would be too long; "I checked — go on" goes in checkedRows.
// With more than one call on the card, labels carry the call's number.
func buttons(acts []card.Action, c card.Call, numbered, showArgs bool) []discordgo.MessageComponent {
	var decide, more []discordgo.MessageComponent
	for _, a := range acts {
		switch {
		case a.Kind == card.ActChecked,
			a.Kind == card.ActShowArgs && !showArgs,
			a.Kind == card.ActEdit && runes(visible.Reveal(strings.TrimSpace(c.Args))) > MaxEditChars:
			continue
		}
		b, ok := button(a, numbered)
		if !ok {
			continue
		}
		if a.Row == card.RowDecide {
			decide = append(decide, b)
		} else {
			more = append(more, b)
		}
	}
	switch {
	case len(decide)+len(more) == 0:
		return nil
	case len(decide)+len(more) <= maxButtons:
		return []discordgo.MessageComponent{discordgo.ActionsRow{Components: append(decide, more...)}}
	}
	return []discordgo.MessageComponent{
		discordgo.ActionsRow{Components: decide},
		discordgo.ActionsRow{Components: more},
	}
}

// button is an action as a Discord button (Allow success style, Deny
// danger style, every other secondary); false when its reference is
// empty or its custom id too long.
func button(a card.Action, numbered bool) (discordgo.Button, bool) {
	id := customID(table.Action(a.Kind), a.Ref)
	if a.Ref == "" || len(id) > maxCustomID {
		return discordgo.Button{}, false
	}
	style := discordgo.SecondaryButton
	switch a.Emphasis {
	case card.Primary:
		style = discordgo.SuccessButton
	case card.Danger:
		style = discordgo.DangerButton
	}
	label := a.Label
	if numbered {
		label = a.NumberedLabel
	}
	return discordgo.Button{Label: label, Style: style, CustomID: id}, true
}

// extendRow is the card's own row (card.Card.CardActions: Allow all and
// Deny all, Extend).
func extendRow(cd card.Card) (discordgo.ActionsRow, bool) {
	var row []discordgo.MessageComponent
	for _, a := range cd.CardActions() {
		if b, ok := button(a, false); ok {
			row = append(row, b)
		}
	}
	return discordgo.ActionsRow{Components: row}, len(row) > 0
}

// ArgsReply is the ephemeral answer to "Show full arguments": the call's
// whole arguments in a ```json block, or attached as arguments.json when
// they do not fit in a message. Nothing in it can ping; characters that
// would act unseen are written as JSON escapes, which keep the JSON's
// meaning.
func ArgsReply(c card.Call) *discordgo.InteractionResponseData {
	args := strings.TrimSpace(c.Args)
	if args == "" {
		args = "{}"
	}
	head := viewHead(card.ArgsView(c))
	data := &discordgo.InteractionResponseData{Flags: discordgo.MessageFlagsEphemeral, AllowedMentions: noMentions()}
	if body := head + ":\n```json\n" + codeText(args) + "\n```"; runes(body) <= maxContent {
		data.Content = body
		return data
	}
	data.Content = head + ": " + card.Attached(ArgsFileName, runes(args))
	data.Files = []*discordgo.File{{Name: ArgsFileName, ContentType: "application/json", Reader: strings.NewReader(visible.Reveal(args))}}
	return data
}

// viewHead is a read-only view's first line: which call, the tool inert.
func viewHead(v card.View) string {
	var b strings.Builder
	for _, p := range v.Head.Parts {
		if p.Kind == card.Code {
			b.WriteString(escapeClip(p.Text, 100))
		} else {
			b.WriteString(p.Text)
		}
	}
	return b.String()
}

// RenderGrantNotice renders a grant's notice: who granted calls of which
// tool in this thread until when, and, while the grant is active at now,
// a Revoke button (danger style) carrying only the grant's opaque
// reference. A revoked (or lapsed) grant's notice says so and has no
// button. The tool name is inert; people are non-pinging mentions.
func RenderGrantNotice(n card.GrantNotice, now time.Time) CardMessage {
	nt := n.Notice(now)
	m := CardMessage{Embeds: []*discordgo.MessageEmbed{}, Components: []discordgo.MessageComponent{}}
	if id := customID(actionRevoke, n.Ref); len(nt.Foot.Parts) > 0 && n.Ref != "" && len(id) <= maxCustomID {
		m.Components = append(m.Components, discordgo.ActionsRow{Components: []discordgo.MessageComponent{
			discordgo.Button{Label: RevokeLabel, Style: discordgo.DangerButton, CustomID: id},
		}})
	}
	m.Content = truncateMarkup(noticeText(nt, len(m.Components) > 0), maxContent)
	return m
}

// RenderPointer renders the short message left in a conversation's
// thread when its card was posted in an approvals channel: while a call
// waits, "⏳ Waiting for approval in <#channel>" with a link to the card;
// once no call waits, where each call stands (as on the card: people as
// mentions, every text a person, the model, a tool or a rule wrote
// inert). It has no buttons, and a channel mention pings nobody.
func RenderPointer(p card.Pointer) CardMessage {
	var b strings.Builder
	b.WriteString(faceLine(p.Head(), maxApprovers))
	if p.Complete() {
		for _, c := range p.Calls {
			line := fmt.Sprintf("\n[%d] %s: %s", c.Number, escapeClip(c.Tool, 80), statusLine(c))
			b.WriteString(truncateMarkup(line, 600))
		}
	}
	return CardMessage{
		Content:    truncateMarkup(b.String(), maxContent),
		Embeds:     []*discordgo.MessageEmbed{},
		Components: []discordgo.MessageComponent{},
	}
}

// EditModal is the modal "Edit…" opens for the call of ref (number is
// the call's number on the card; card.EditForm): one paragraph input
// holding the call's arguments as pretty JSON (value, at most
// MaxEditChars characters, with characters that would act unseen written
// as JSON escapes, which mean the same characters).
func EditModal(ref string, number int, value string) *discordgo.InteractionResponseData {
	f := card.EditForm(number, "", "", value, false)
	in := f.Fields[0]
	return paragraphModal(customID(actionEditSubmit, ref), f.Title, discordgo.TextInput{
		CustomID:  EditInputID,
		Label:     truncate(in.Label, maxInputLabel),
		Value:     in.Value,
		MinLength: in.MinLen,
		MaxLength: MaxEditChars,
	})
}

// ReasonModal is the modal "Deny with reason…" opens for the call of ref
// (number is the call's number on the card, for the title;
// card.ReasonForm).
func ReasonModal(ref string, number int) *discordgo.InteractionResponseData {
	f := card.ReasonForm(card.Call{Number: number})
	in := f.Fields[0]
	return paragraphModal(customID(actionModal, ref), f.Title, discordgo.TextInput{
		CustomID:    ReasonInputID,
		Label:       truncate(in.Label, maxInputLabel),
		Placeholder: in.Placeholder,
		MinLength:   in.MinLen,
		MaxLength:   bot.MaxReasonLen,
	})
}

// paragraphModal is a modal (custom id id) of one required paragraph
// input.
func paragraphModal(id, title string, input discordgo.TextInput) *discordgo.InteractionResponseData {
	input.Style, input.Required = discordgo.TextInputParagraph, true
	return &discordgo.InteractionResponseData{
		CustomID:   id,
		Title:      truncate(title, maxModalTitle),
		Components: []discordgo.MessageComponent{discordgo.ActionsRow{Components: []discordgo.MessageComponent{input}}},
	}
}

// quote prefixes every line with Discord's quote marker; the text is
// already escaped, so only these markers quote.
func quote(s string) string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		lines[i] = "> " + l
	}
	return strings.Join(lines, "\n")
}

// limitLines keeps at most n lines of s, joining the rest into the last.
func limitLines(s string, n int) string {
	lines := strings.SplitN(s, "\n", n)
	if len(lines) == n {
		lines[n-1] = oneLine(lines[n-1])
	}
	return strings.Join(lines, "\n")
}

func clamp(v, lo, hi int) int { return max(lo, min(v, hi)) }

// isSnowflake reports whether s is a Discord id: 1 to 20 digits.
func isSnowflake(s string) bool {
	if s == "" || len(s) > 20 {
		return false
	}
	for _, r := range s {
		if r < '0' || r > '9' {
			return false
		}
	}
	_, err := strconv.ParseUint(s, 10, 64)
	return err == nil
}

func runes(s string) int { return utf8.RuneCountInString(s) }

// truncate cuts s to at most n characters, ending in "…" when cut.
func truncate(s string, n int) string { return visible.Clip(s, n) }

// truncateMarkup is truncate for text that mixes Airlock's markup with
// escaped text (a header, a status): it never cuts inside an escape, a
// <…> mention or timestamp, or a **bold** span, so a cut leaves nothing
// half-made for Discord to act on.
func truncateMarkup(s string, n int) string {
	if n <= 0 {
		return ""
	}
	if runes(s) <= n {
		return s
	}
	r := []rune(s)
	limit := n - 1 // room for "…"
	safe, angle, bold, escaped := 0, false, false, false
	for i := 0; i <= limit; i++ {
		if !escaped && !angle && !bold {
			safe = i
		}
		if i == limit {
			break
		}
		switch c := r[i]; {
		case escaped:
			escaped = false
		case c == '\\':
			escaped = true
		case c == '<':
			angle = true
		case c == '>':
			angle = false
		case c == '*' && i+1 < len(r) && r[i+1] == '*':
			bold = !bold
			i++ // never cut between the two marks
		}
	}
	return strings.TrimRight(string(r[:safe]), " \n") + "…"
}

// splitText cuts text into parts of at most n characters, at a line
// break when there is one in the second half of a part, and never right
// after a backslash, so an escape stays with the character it escapes.
func splitText(text string, n int) []string {
	text = strings.TrimRight(text, " \n")
	if strings.TrimSpace(text) == "" {
		return []string{"(empty)"}
	}
	var parts []string
	r := []rune(text)
	for len(r) > n {
		cut := n
		for i := n - 1; i > n/2; i-- {
			if r[i] == '\n' {
				cut = i + 1
				break
			}
		}
		for cut > 1 && r[cut-1] == '\\' {
			cut--
		}
		parts = append(parts, strings.TrimRight(string(r[:cut]), "\n"))
		r = r[cut:]
	}
	if len(r) > 0 {
		parts = append(parts, string(r))
	}
	return parts
}
