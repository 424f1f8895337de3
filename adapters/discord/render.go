package discord

import (
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/bwmarrin/discordgo"

	"github.com/airlockhq/airlock/bot"
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

// Custom ids: "al:<action>:<ref>", ref being bot.Ref's opaque reference.
const (
	customIDPrefix = "al:"
	actionAllow    = "a" // Allow button
	actionDeny     = "d" // Deny button
	actionReason   = "r" // "Deny with reason…" button: opens the modal
	actionModal    = "m" // the modal's submit
)

// ReasonInputID is the custom id of the modal's text input.
const ReasonInputID = "reason"

// Embed colours by where a call stands.
const (
	colourPending = 0xF1C40F
	colourAllowed = 0x2ECC71
	colourDenied  = 0xE74C3C
	colourPolicy  = 0x95A5A6
	colourExpired = 0x7F8C8D
	colourWarning = 0xE67E22
)

func customID(action, ref string) string { return customIDPrefix + action + ":" + ref }

// parseCustomID splits a custom id made by customID. The reference itself
// is checked by bot.Decide.
func parseCustomID(id string) (action, ref string, ok bool) {
	if len(id) > maxCustomID || !strings.HasPrefix(id, customIDPrefix) {
		return "", "", false
	}
	action, ref, ok = strings.Cut(strings.TrimPrefix(id, customIDPrefix), ":")
	if !ok || ref == "" {
		return "", "", false
	}
	switch action {
	case actionAllow, actionDeny, actionReason, actionModal:
		return action, ref, true
	}
	return "", "", false
}

// CardMessage is one Discord message of a rendered card.
type CardMessage struct {
	Content    string                       `json:"content"`
	Embeds     []*discordgo.MessageEmbed    `json:"embeds"`
	Components []discordgo.MessageComponent `json:"components"`
}

// Render renders a card as one Discord message: the content (the model's
// words, who asked, who may decide, when it expires), an embed per call
// (title "[n] tool", the read-back as description, the arguments in a
// ```json block, the call's outcome) and, per call still waiting for a
// decision, an action row: Allow (success style), Deny (danger style) and
// "Deny with reason…" (secondary style). No other button uses the success
// or danger style. A complete card has no components.
//
// A message holds at most 10 embeds and 5 action rows: a card with more
// than 10 calls or more than 5 gated calls does not fit, and Render
// returns its first message only. The adapter posts every message of
// RenderMessages.
func Render(card bot.Card) (content string, embeds []*discordgo.MessageEmbed, components []discordgo.MessageComponent) {
	m := RenderMessages(card)[0]
	return m.Content, m.Embeds, m.Components
}

// RenderMessages renders a card as one message, or several when it does
// not fit in one: calls are split in order into messages of at most 10
// calls and 5 gated calls (gated calls, open or not, so the split never
// changes as calls are decided); messages after the first say they
// continue the card. Embed texts are truncated within Discord's limits
// (description 4096, field 1024, 6000 over a message's embeds), the
// read-back before the arguments.
func RenderMessages(card bot.Card) []CardMessage {
	pages := splitCalls(card.Calls)
	out := make([]CardMessage, len(pages))
	for p, calls := range pages {
		m := CardMessage{Embeds: []*discordgo.MessageEmbed{}}
		if p == 0 {
			m.Content = header(card)
		} else {
			m.Content = fmt.Sprintf("(approval request %s, continued: part %d of %d)", card.BatchID, p+1, len(pages))
		}
		budget := embedsTotalQuota / max(1, len(calls))
		for _, c := range calls {
			m.Embeds = append(m.Embeds, callEmbed(card, c, budget))
			if c.Flagged && c.Open() {
				m.Components = append(m.Components, buttons(c, len(card.Calls) > 1))
			}
		}
		if card.Complete() || m.Components == nil {
			m.Components = []discordgo.MessageComponent{}
		}
		if n := len(m.Embeds); n > 0 && !card.Complete() && !card.ExpiresAt.IsZero() {
			last := m.Embeds[n-1]
			last.Footer = &discordgo.MessageEmbedFooter{Text: "Expires"}
			last.Timestamp = card.ExpiresAt.UTC().Format("2006-01-02T15:04:05Z07:00")
		}
		out[p] = m
	}
	return out
}

// splitCalls cuts the calls into messages of at most maxEmbeds calls and
// maxRows gated calls.
func splitCalls(calls []bot.CardCall) [][]bot.CardCall {
	var pages [][]bot.CardCall
	var cur []bot.CardCall
	gated := 0
	for _, c := range calls {
		if len(cur) == maxEmbeds || (c.Flagged && gated == maxRows) {
			pages = append(pages, cur)
			cur, gated = nil, 0
		}
		cur = append(cur, c)
		if c.Flagged {
			gated++
		}
	}
	if len(cur) > 0 || len(pages) == 0 {
		pages = append(pages, cur)
	}
	return pages
}

// header is the first message's content.
func header(card bot.Card) string {
	var b strings.Builder
	if intro := strings.TrimSpace(card.Intro); intro != "" {
		b.WriteString(truncate(intro, 1200))
		b.WriteString("\n\n")
	}
	who := mention(card.RequestedBy)
	if card.Complete() {
		fmt.Fprintf(&b, "**Approval request** from %s: every call is decided.", who)
		return truncate(b.String(), maxContent)
	}
	fmt.Fprintf(&b, "**Approval needed** for the calls below, requested by %s.", who)
	if card.Approvers.Empty() {
		b.WriteString("\nNobody may approve in this channel (config `channels[]`); the requester may withdraw their calls.")
	} else {
		b.WriteString("\nWho may decide: " + approverList(card.Approvers) + ".")
	}
	if !card.ExpiresAt.IsZero() {
		fmt.Fprintf(&b, " Expires <t:%d:R>.", card.ExpiresAt.Unix())
	}
	return truncate(b.String(), maxContent)
}

func approverList(s bot.ApproverSet) string {
	var out []string
	for _, u := range s.Users {
		out = append(out, mention(u))
	}
	for _, r := range s.Roles {
		if isSnowflake(r) {
			out = append(out, "<@&"+r+">")
		} else {
			out = append(out, "role "+r)
		}
	}
	for _, g := range s.Groups {
		out = append(out, "group "+g)
	}
	return strings.Join(out, ", ")
}

// mention writes a user id as a Discord mention when it is a snowflake.
func mention(id string) string {
	if isSnowflake(id) {
		return "<@" + id + ">"
	}
	if id == "" {
		return "someone"
	}
	return id
}

// callEmbed renders one call within budget characters.
func callEmbed(card bot.Card, c bot.CardCall, budget int) *discordgo.MessageEmbed {
	title := truncate(fmt.Sprintf("[%d] %s", c.Number, c.Tool), maxTitle)
	status := truncate(statusLine(c), min(maxFieldValue, max(120, budget/2)))
	left := budget - runes(title) - runes(status) - runes("Arguments") - runes("Status") - runes("Expires")
	args := fence(c.Args, 0)
	summary := strings.TrimSpace(c.Summary)
	if summary == "" {
		summary = c.Tool
	}
	argsCap := min(maxFieldValue, max(80, left/2))
	argsLen := min(runes(args), argsCap)
	summary = truncate(summary, min(maxDescription, max(80, left-argsLen)))
	args = fence(c.Args, min(maxFieldValue, max(80, left-runes(summary))))
	return &discordgo.MessageEmbed{
		Type:        discordgo.EmbedTypeRich,
		Title:       title,
		Description: summary,
		Color:       colour(c),
		Fields: []*discordgo.MessageEmbedField{
			{Name: "Arguments", Value: args},
			{Name: "Status", Value: status},
		},
	}
}

// fence puts JSON in a code block of at most limit characters (0: no
// limit); backtick runs that would close the block are broken up.
func fence(args string, limit int) string {
	args = strings.TrimSpace(args)
	if args == "" {
		args = "{}"
	}
	args = strings.ReplaceAll(args, "```", "`\u200b``")
	const open, closing = "```json\n", "\n```"
	if limit > 0 {
		args = truncate(args, limit-runes(open)-runes(closing))
	}
	return open + args + closing
}

// statusLine is the call's outcome, with the decider as a mention.
func statusLine(c bot.CardCall) string {
	out := c.Outcome()
	if isSnowflake(c.DecidedBy) {
		out = strings.Replace(out, "by "+c.DecidedBy, "by <@"+c.DecidedBy+">", 1)
	}
	if c.DecidedAt != nil && c.Decision != confirm.DecisionPending && isSnowflake(c.DecidedBy) {
		at := " at " + c.DecidedAt.UTC().Format("15:04:05 UTC")
		out = strings.Replace(out, at, fmt.Sprintf(" <t:%d:f>", c.DecidedAt.Unix()), 1)
	}
	prefix := "⏳ "
	switch {
	case c.Decision == confirm.DecisionPending:
	case c.Run == confirm.RunFailed || c.Run == confirm.RunUnknown || c.Decision == confirm.DecisionInvalid:
		prefix = "⚠️ "
	case c.Decision.Allowed():
		prefix = "✅ "
	case c.Decision == confirm.DecisionExpired:
		prefix = "⌛ "
	default:
		prefix = "❌ "
	}
	if c.Decision == confirm.DecisionPending && !c.Flagged {
		prefix = ""
	}
	return prefix + out
}

func colour(c bot.CardCall) int {
	switch {
	case c.Decision == confirm.DecisionPending:
		return colourPending
	case c.Run == confirm.RunFailed || c.Run == confirm.RunUnknown || c.Decision == confirm.DecisionInvalid:
		return colourWarning
	case c.Decision == confirm.DecisionAllowedByPolicy:
		return colourPolicy
	case c.Decision == confirm.DecisionAllowed:
		return colourAllowed
	case c.Decision == confirm.DecisionExpired:
		return colourExpired
	}
	return colourDenied
}

// buttons is the action row of a call waiting for a decision. With more
// than one call on the card, labels carry the call's number.
func buttons(c bot.CardCall, numbered bool) discordgo.ActionsRow {
	allow, deny, reason := "Allow", "Deny", "Deny with reason…"
	if numbered {
		n := strconv.Itoa(c.Number)
		allow, deny, reason = "Allow ["+n+"]", "Deny ["+n+"]", "Deny ["+n+"] with reason…"
	}
	return discordgo.ActionsRow{Components: []discordgo.MessageComponent{
		discordgo.Button{Label: allow, Style: discordgo.SuccessButton, CustomID: customID(actionAllow, c.Ref)},
		discordgo.Button{Label: deny, Style: discordgo.DangerButton, CustomID: customID(actionDeny, c.Ref)},
		discordgo.Button{Label: reason, Style: discordgo.SecondaryButton, CustomID: customID(actionReason, c.Ref)},
	}}
}

// ReasonModal is the modal "Deny with reason…" opens for the call of ref
// (number is the call's number on the card, for the title).
func ReasonModal(ref string, number int) *discordgo.InteractionResponseData {
	title := "Deny with a reason"
	if number > 0 {
		title = fmt.Sprintf("Deny call [%d] with a reason", number)
	}
	return &discordgo.InteractionResponseData{
		CustomID: customID(actionModal, ref),
		Title:    title,
		Components: []discordgo.MessageComponent{
			discordgo.ActionsRow{Components: []discordgo.MessageComponent{
				discordgo.TextInput{
					CustomID:    ReasonInputID,
					Label:       "Reason (the agent is told)",
					Style:       discordgo.TextInputParagraph,
					Placeholder: "Why not, or what to do instead",
					Required:    true,
					MinLength:   1,
					MaxLength:   bot.MaxReasonLen,
				},
			}},
		},
	}
}

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
func truncate(s string, n int) string {
	if n <= 0 {
		return ""
	}
	if runes(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}

// splitText cuts text into parts of at most n characters, at a line
// break when there is one in the second half of a part.
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
		parts = append(parts, strings.TrimRight(string(r[:cut]), "\n"))
		r = r[cut:]
	}
	if len(r) > 0 {
		parts = append(parts, string(r))
	}
	return parts
}
