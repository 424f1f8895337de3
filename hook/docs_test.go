package hook

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

var jsonBlock = regexp.MustCompile("(?s)```json\n(.*?)```")

// Each agent's page (docs/hooks/AGENT.md) shows a settings snippet that
// is JSON and runs `airlock-hook AGENT`, and the page of every agent the
// hook speaks for exists.
func TestEachAgentsPageShowsItsSettings(t *testing.T) {
	for name := range agents {
		page, err := os.ReadFile(filepath.Join("..", "docs", "hooks", name+".md"))
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		blocks := jsonBlock.FindAllSubmatch(page, -1)
		if len(blocks) == 0 {
			t.Errorf("%s: no settings snippet", name)
		}
		for _, b := range blocks {
			var v any
			if err := json.Unmarshal(b[1], &v); err != nil {
				t.Errorf("%s: the snippet is not JSON: %v\n%s", name, err, b[1])
			}
			if !strings.Contains(string(b[1]), `"airlock-hook `+name) {
				t.Errorf("%s: the snippet does not run airlock-hook %s", name, name)
			}
		}
	}
}
