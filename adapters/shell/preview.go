package shell

import (
	"fmt"
	"strings"

	"github.com/airlockhq/airlock/adapters/internal/visible"
	cardpkg "github.com/airlockhq/airlock/card"
)

// A preview longer than these is cut on a card; /preview N prints it.
const (
	PreviewLines = 30
	PreviewChars = 2000
)

// previewLines writes a call's preview as card lines: its heading, the
// output indented (hidden characters shown escaped, so nothing in it can
// pass for a line of the card), cut with a note, what Airlock left out
// of a long one, and the recheck's outcome.
func previewLines(w *strings.Builder, call cardpkg.Call, prefix string) {
	p := call.Preview
	if p == nil {
		return
	}
	fmt.Fprintf(w, "%s    %s\n", prefix, p.Heading())
	if p.Shown() {
		text, hidden := visible.Preview(strings.TrimRight(p.Text(), "\n"), PreviewChars, PreviewLines)
		for _, l := range strings.Split(text, "\n") {
			fmt.Fprintf(w, "%s      %s\n", prefix, l)
		}
		if hidden > 0 {
			fmt.Fprintf(w, "%s      %s\n", prefix, line(cardpkg.PreviewCut(hidden, call.Open(), call.Number)))
		}
		if n := p.CutNote(); n != "" {
			fmt.Fprintf(w, "%s      %s\n", prefix, n)
		}
	}
	if n := p.RecheckNote(); n != "" {
		fmt.Fprintf(w, "%s    %s\n", prefix, n)
	}
}

// previewSig tells one preview state from another; "" for none.
func previewSig(c cardpkg.Call) string {
	if c.Preview == nil {
		return ""
	}
	return string(c.Preview.State) + "/" + c.Preview.Hash + "/" + string(c.Preview.Recheck)
}
