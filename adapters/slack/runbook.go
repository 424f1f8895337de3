package slack

import (
	"unicode/utf8"

	"github.com/slack-go/slack"

	cardpkg "github.com/airlockhq/airlock/card"
)

// maxRunText bounds the run message's text (a section's text is at most
// 3000 characters).
const maxRunText = 2900

// RenderRun is the run message: its text in one plain-text section, so
// nothing a model, a tool or a person wrote in it (parameters, results,
// names) mentions, links or formats; then, while the run goes, its
// buttons (card.Run.Actions), each carrying the run's reference only;
// and the link to the run's page on the web console (card.Run.Footer).
func RenderRun(r cardpkg.Run) ([]slack.Block, string) {
	text := cutRunes(r.Text(), maxRunText)
	blocks := []slack.Block{slack.NewSectionBlock(slack.NewTextBlockObject(slack.PlainTextType, text, false, false), nil, nil, slack.SectionBlockOptionBlockID("run"))}
	if acts := r.Actions(); len(acts) > 0 {
		blocks = append(blocks, actionsBlock("run_actions", acts))
	}
	for _, l := range r.Footer() {
		blocks = append(blocks, slack.NewContextBlock("run_footer", mrkdwn(clip(coverText(l.Parts), maxFooterText))))
	}
	return blocks, postText(text)
}

func cutRunes(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}
