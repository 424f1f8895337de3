package slack

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/airlockhq/airlock/adapters/internal/adaptertest"
)

// Issue 34 item 19: a runbook step's arguments and the run's parameters
// hold &, < and > as written (never \u0026, \u003c, \u003e): the card
// and the run message show exactly what runs. The card's rich_text and
// the run message's plain_text show them literally; the fallback text is
// mrkdwn, where they are entities Slack shows as the characters.
func TestRunbookArgumentsShowAsWrittenGolden(t *testing.T) {
	c, r := adaptertest.RunbookStepCard(t, "slack", "C1", "UBOB")
	blocks, fallback := RenderRun(r)
	for name, msg := range map[string]any{
		"card_runbook_args_html": map[string]any{"text": FallbackText(c), "blocks": RenderWith(c, nil)},
		"run_params_html":        map[string]any{"text": fallback, "blocks": blocks},
	} {
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false) // the golden files show what Slack gets
		enc.SetIndent("", "  ")
		if err := enc.Encode(msg); err != nil {
			t.Fatal(err)
		}
		path := filepath.Join("testdata", name+".json")
		if *update {
			if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		want, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("%v (run go test -update to create it)", err)
		}
		if !bytes.Equal(buf.Bytes(), want) {
			t.Errorf("%s differs from the golden file; run go test ./adapters/slack -run TestRunbookArgumentsShowAsWrittenGolden -update\ngot:\n%s", path, buf.Bytes())
		}
		// What Slack shows is the decoded text: no \u0026 in it.
		var decoded any
		if err := json.Unmarshal(buf.Bytes(), &decoded); err != nil {
			t.Fatal(err)
		}
		if s := fmt.Sprint(decoded); strings.Contains(s, `\u00`) || !strings.Contains(s, `a&b <c>`) && !strings.Contains(s, `a&amp;b &lt;c&gt;`) {
			t.Errorf("%s does not show the arguments as written:\n%s", name, s)
		}
	}
}
