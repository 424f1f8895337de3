package shell

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The card README.md and docs/terminal.md show is the terminal's output
// for the sample card (testdata/card_pending.txt), in a code block: a
// change of the card's words or layout changes the picture a newcomer
// sees first, or fails here.
func TestReadmeShowsTheTerminalsCard(t *testing.T) {
	block := "```\n" + Render(sampleCard()) + "```\n"
	for _, doc := range []string{"README.md", "docs/terminal.md"} {
		data, err := os.ReadFile(filepath.Join("..", "..", filepath.FromSlash(doc)))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(data), block) {
			t.Errorf("%s does not show the terminal's card as Render prints it:\n%s", doc, block)
		}
	}
}
