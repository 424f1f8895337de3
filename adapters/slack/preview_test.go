package slack

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	cardpkg "github.com/airlockhq/airlock/card"
	"github.com/airlockhq/airlock/confirm"
	"github.com/airlockhq/airlock/internal/testkit"
)

const diff = "diff -u -N /tmp/LIVE/apps.v1.Deployment.web /tmp/MERGED/apps.v1.Deployment.web\n@@ -6,7 +6,7 @@\n spec:\n-  replicas: 2\n+  replicas: 20\n"

// previewCard is the pending card with a preview on its gated call.
func previewCard(p cardpkg.Preview) cardpkg.Card {
	c := baseCard()
	c.Calls[1].Preview = &p
	return c
}

func recheckChangedCard() cardpkg.Card {
	c := previewCard(cardpkg.Preview{State: confirm.PreviewDone, Output: diff, Hash: confirm.PreviewHash(diff),
		Recheck: confirm.RecheckChanged, RecheckHash: confirm.PreviewHash(diff + "+  image: evil\n")})
	c.Status = confirm.BatchDone
	c.Calls[1].State = cardpkg.State{Kind: cardpkg.Allowed, By: "UALICE", At: &decided}
	c.Calls[1].Run, c.Calls[1].Result = confirm.RunFailed, confirm.PreviewChangedMessage(c.Calls[1].Preview.Hash, c.Calls[1].Preview.RecheckHash)
	c.Calls[0].Run, c.Calls[0].Result = confirm.RunSucceeded, "ok"
	return c
}

func longPreview() string {
	var b strings.Builder
	for i := range 60 {
		b.WriteString("+  line " + strings.Repeat("x", i%7) + "\n")
	}
	return b.String()
}

// hostilePreview is a preview's output trying to ping, break out of its
// code block and hide text.
const hostilePreview = "<!channel> @everyone <@UMALLORY> <!subteam^SOPS>\n```\n*bold* `tick` </pre> <https://evil|click>\n```\u202egnp.exe\u200b\n"

func previewCases() map[string]cardpkg.Card {
	return map[string]cardpkg.Card{
		"card_preview_running":         previewCard(cardpkg.Preview{State: confirm.PreviewRunning}),
		"card_preview_done":            previewCard(cardpkg.Preview{State: confirm.PreviewDone, Output: diff, Hash: confirm.PreviewHash(diff)}),
		"card_preview_failed":          previewCard(cardpkg.Preview{State: confirm.PreviewFailed, Output: "exit status 2: error: the server doesn't have a resource type \"deployments\" (token [redacted])"}),
		"card_preview_long":            previewCard(cardpkg.Preview{State: confirm.PreviewDone, Output: longPreview(), Hash: confirm.PreviewHash(longPreview())}),
		"card_preview_recheck_changed": recheckChangedCard(),
		"card_preview_cut": previewCard(cardpkg.Preview{State: confirm.PreviewDone, Output: longPreview(), Hash: confirm.PreviewHash(longPreview() + "rest"),
			Size: int64(len(longPreview())) + 3616}),
	}
}

func TestPreviewGolden(t *testing.T) {
	cases := map[string]any{}
	for name, c := range previewCases() {
		cases[name] = map[string]any{"text": FallbackText(c), "blocks": RenderWith(c, grantedBy)}
	}
	long := previewCases()["card_preview_long"]
	cases["modal_preview"] = PreviewModal(long.Calls[1])
	cases["modal_preview_cut"] = PreviewModal(previewCases()["card_preview_cut"].Calls[1])
	for name, v := range cases {
		t.Run(name, func(t *testing.T) {
			var buf bytes.Buffer
			enc := json.NewEncoder(&buf)
			enc.SetEscapeHTML(false)
			enc.SetIndent("", "  ")
			if err := enc.Encode(v); err != nil {
				t.Fatal(err)
			}
			path := filepath.Join("testdata", name+".json")
			if *update {
				if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run go test -update to create it)", err)
			}
			if !bytes.Equal(buf.Bytes(), want) {
				t.Errorf("%s differs from the golden file; run go test ./adapters/slack -run TestPreviewGolden -update\ngot:\n%s", path, buf.Bytes())
			}
		})
	}
}

// "Show full preview" (action_id airlock_preview, value the call's
// reference only) is offered only where the card cuts the preview.
func TestPreviewButtonOnlyWhenCut(t *testing.T) {
	count := func(c cardpkg.Card) (n int, value string) {
		for _, b := range buttons(RenderWith(c, nil)) {
			if b.ActionID == ActionPreview {
				n++
				value = b.Value
			}
		}
		return n, value
	}
	if n, _ := count(previewCases()["card_preview_done"]); n != 0 {
		t.Errorf("a short preview offers %d show-preview buttons", n)
	}
	long := previewCases()["card_preview_long"]
	if n, v := count(long); n != 1 || v != long.Calls[1].Ref {
		t.Errorf("a long preview: %d buttons, value %q; want 1 carrying %q", n, v, long.Calls[1].Ref)
	}
	if n, _ := count(previewCases()["card_preview_running"]); n != 0 {
		t.Error("a running preview offers its button")
	}
}

// A hostile preview renders inert: literal preformatted text, no mention,
// link or markup live, hidden characters shown.
func TestHostilePreviewIsInert(t *testing.T) {
	for _, c := range []cardpkg.Card{
		previewCard(cardpkg.Preview{State: confirm.PreviewDone, Output: hostilePreview, Hash: confirm.PreviewHash(hostilePreview)}),
		previewCard(cardpkg.Preview{State: confirm.PreviewFailed, Output: hostilePreview}),
	} {
		raw := mustJSON(RenderWith(c, nil))
		shown, live := readBlocks(t, raw)
		if bad := liveProblems(live, shown); len(bad) != 0 {
			t.Fatalf("live or hidden: %v\nlive:\n%s", bad, live)
		}
		if strings.Contains(live, "UMALLORY") || strings.Contains(live, "evil") {
			t.Errorf("the preview's text is live:\n%s", live)
		}
		testkit.ContainsAll(t, "the card", shown, "<!channel> @everyone <@UMALLORY>", "```", "\\u202egnp.exe\\u200b")
		modal := mustJSON(PreviewModal(c.Calls[1]).Blocks.BlockSet)
		mshown, mlive := readBlocks(t, modal)
		if bad := liveProblems(mlive, mshown); len(bad) != 0 {
			t.Fatalf("modal live or hidden: %v", bad)
		}
	}
}
