package discord

import (
	"strings"

	"github.com/bwmarrin/discordgo"

	"github.com/airlockhq/airlock/adapters/internal/visible"
	"github.com/airlockhq/airlock/card"
)

// PreviewFileName names the file a long preview is attached as.
const PreviewFileName = "preview.txt"

// previewFieldLabel names the embed field of a call's preview.
const previewFieldLabel = card.PreviewLabel

// previewLimit is the most characters the preview's field takes of a
// call's embed budget.
func previewLimit(budget int) int { return clamp(budget/4, 200, maxFieldValue) }

// previewField is a call's preview as an embed field's value: the heading,
// the output in a code block (backticks and hidden characters escaped, so
// nothing breaks out of it, pings or hides text), cut to limit with a
// note, what Airlock left out of a long one, and the recheck's outcome. "" when the call has no preview; cut
// reports a cut output.
func previewField(c card.Call, limit int, offer bool) (value string, cut bool) {
	p := c.Preview
	if p == nil {
		return "", false
	}
	head := p.Heading()
	tail := ""
	if n := p.CutNote(); n != "" {
		tail = "\n*" + n + "*"
	}
	if n := p.RecheckNote(); n != "" {
		mark := "🔁 "
		if p.RecheckRefused() {
			mark = "🚫 "
		}
		tail += "\n" + mark + "**" + n + "**"
	}
	if !p.Shown() {
		return head + tail, false
	}
	const open, closing = "\n```text\n", "\n```"
	text := strings.TrimRight(p.Text(), "\n")
	full := head + open + codeText(text) + closing + tail
	if runes(full) <= limit {
		return full, false
	}
	note := func(hidden int) string { // Actions offers Show full preview while a person may decide
		return "\n" + parts(card.PreviewCut(hidden, c.Flagged && c.Open(), c.Number).Parts)
	}
	total := runes(text)
	room := limit - runes(head) - runes(open) - runes(closing) - runes(tail) - runes(note(total))
	body, shown := codeSafePrefix(text, room)
	return head + open + body + closing + note(total-shown) + tail, true
}

// previewButtons drops "Show full preview" where the card shows the
// preview whole.
func previewButtons(acts []card.Action, c card.Call, budget int) []card.Action {
	if _, cut := previewField(c, previewLimit(budget), true); cut {
		return acts
	}
	return card.Without(acts, card.ActShowPreview)
}

// PreviewReply is the ephemeral answer to "Show full preview": the whole
// preview in a code block (nothing in it pings), or attached as
// PreviewFileName when it is longer than a message holds.
func PreviewReply(c card.Call) *discordgo.InteractionResponseData {
	data := &discordgo.InteractionResponseData{Flags: discordgo.MessageFlagsEphemeral, AllowedMentions: noMentions()}
	v := card.PreviewView(c)
	head := viewHead(v)
	p := c.Preview
	if p == nil || !p.Shown() {
		data.Content = head + ": " + v.Empty
		return data
	}
	text := p.Text()
	cut := ""
	if n := p.CutNote(); n != "" {
		cut = "\n*" + n + "*"
	}
	if body := head + " (" + p.Heading() + ")\n```text\n" + codeText(strings.TrimRight(text, "\n")) + "\n```" + cut; runes(body) <= maxContent {
		data.Content = body
		return data
	}
	data.Content = head + ": " + card.Attached(PreviewFileName, runes(text)) + cut
	data.Files = []*discordgo.File{{Name: PreviewFileName, ContentType: "text/plain", Reader: strings.NewReader(visible.Reveal(text))}}
	return data
}
