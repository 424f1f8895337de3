package slack

import (
	"strings"
	"testing"

	"github.com/slack-go/slack"
)

// The run message is plain text: parameters and results on it cannot
// mention, link or format; the fallback is escaped like any post; a long
// message is cut to fit one section.
func TestRunBlocksInert(t *testing.T) {
	blocks, fallback := runBlocks("Runbook restart\nParameters: {\"service\":\"<!channel> <https://evil|x> *hi*\"}")
	if len(blocks) != 1 {
		t.Fatalf("blocks: %+v", blocks)
	}
	sec, ok := blocks[0].(*slack.SectionBlock)
	if !ok || sec.Text.Type != slack.PlainTextType {
		t.Fatalf("not a plain text section: %+v", blocks[0])
	}
	if strings.Contains(fallback, "<!channel>") || strings.Contains(fallback, "<https://") {
		t.Fatalf("fallback not escaped: %q", fallback)
	}
	long, _ := runBlocks(strings.Repeat("x", 5000))
	if n := len([]rune(long[0].(*slack.SectionBlock).Text.Text)); n > 3000 {
		t.Fatalf("section text of %d characters", n)
	}
}
