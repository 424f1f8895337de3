package slack

import (
	"context"
	"unicode/utf8"

	"github.com/slack-go/slack"

	"github.com/airlockhq/airlock/bot"
)

var _ bot.RunMessenger = (*Adapter)(nil)

// maxRunText bounds the run message's text (a section's text is at most
// 3000 characters).
const maxRunText = 2900

// runBlocks is the run message: one section of plain text, so nothing a
// model, a tool or a person wrote in it (parameters, results) mentions,
// links or formats.
func runBlocks(text string) ([]slack.Block, string) {
	text = cutRunes(text, maxRunText)
	return []slack.Block{slack.NewSectionBlock(slack.NewTextBlockObject(slack.PlainTextType, text, false, false), nil, nil)}, postText(text)
}

func cutRunes(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}

// PostRun posts a runbook run's message in the thread.
func (a *Adapter) PostRun(ctx context.Context, th bot.Thread, text string) (string, error) {
	blocks, fallback := runBlocks(text)
	return a.postBlocks(ctx, th, "run", blocks, fallback)
}

// UpdateRun replaces a run message PostRun posted.
func (a *Adapter) UpdateRun(ctx context.Context, _ bot.Thread, ref, text string) error {
	blocks, fallback := runBlocks(text)
	return a.updateBlocks(ctx, ref, "run", blocks, fallback)
}
