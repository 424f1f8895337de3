package discord

import (
	"unicode/utf8"

	"github.com/bwmarrin/discordgo"

	"github.com/airlockhq/airlock/card"
)

// maxRunText bounds the run message's text in its code block, within a
// message's content.
const maxRunText = maxContent - 16

// RenderRun is the run message: its text in a code block, where Discord
// parses nothing (no markdown, no mentions), so nothing a model, a tool or
// a person wrote in it (parameters, results) formats or pings; then,
// while the run goes, its buttons (card.Run.Actions), each carrying the
// run's reference only; and the link to the run's page on the web
// console (card.Run.Footer).
func RenderRun(r card.Run) CardMessage {
	var foot string
	for _, l := range r.Footer() {
		foot += "\n" + parts(l.Parts)
	}
	text, limit := codeText(r.Text()), maxRunText-utf8.RuneCountInString(foot)
	if utf8.RuneCountInString(text) > limit {
		text = string([]rune(text)[:limit-1]) + "…"
	}
	m := CardMessage{Content: "```\n" + text + "\n```" + foot, Components: []discordgo.MessageComponent{}}
	var row []discordgo.MessageComponent
	for _, a := range r.Actions() {
		if b, ok := button(a, false); ok {
			row = append(row, b)
		}
	}
	if len(row) > 0 {
		m.Components = append(m.Components, discordgo.ActionsRow{Components: row})
	}
	return m
}
