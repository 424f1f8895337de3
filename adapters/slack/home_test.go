package slack

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/airlockhq/airlock/adapters/slack/slacktest"
	cardpkg "github.com/airlockhq/airlock/card"
)

// homeGolden compares the home view's blocks with testdata/name.
func homeGolden(t *testing.T, name string, h cardpkg.Home) []byte {
	t.Helper()
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(RenderHome(h)); err != nil {
		t.Fatal(err)
	}
	got := buf.Bytes()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return got
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from the golden file; run go test ./adapters/slack -run TestHomeGolden -update\ngot:\n%s", path, got)
	}
	return got
}

// The Home tab: what waits on the person, with links to the cards and
// the console's pages, and their own requests; a tool's name from a
// model (untrusted) is literal, never formatted; empty lists say so.
func TestHomeGolden(t *testing.T) {
	at := time.Date(2026, 12, 7, 14, 0, 0, 0, time.UTC)
	h := cardpkg.Home{
		Waiting: []cardpkg.HomeItem{{BatchID: "b1", Tools: []string{"deploy", "<!channel>"}, Waiting: 2, Channel: "C0OPS", Requester: "U0BOB",
			ExpiresAt: at, CardURL: "https://example.slack.com/archives/C0OPS/p1800000000000100",
			PageURL: "https://airlock.example.com/ui/approvals/b1"}},
		Mine: []cardpkg.HomeItem{{BatchID: "b2", Channel: "C0OPS", Requester: "U0ALICE", ExpiresAt: at}},
	}
	got := homeGolden(t, "home.json", h)
	var blocks []any
	_ = json.Unmarshal(got, &blocks)
	raw, _ := json.Marshal(blocks)
	_, md, err := slacktest.Formatted(raw)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range md {
		if strings.Contains(s, "<!channel>") {
			t.Fatalf("a tool's name is formatted: %q", s)
		}
	}
	if !strings.Contains(string(got), "View the card") || !strings.Contains(string(got), cardpkg.PageLinkWords) {
		t.Fatalf("no links:\n%s", got)
	}
	homeGolden(t, "home_empty.json", cardpkg.Home{})
}
