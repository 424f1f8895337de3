package shell

import (
	"context"
	"strings"
	"testing"

	"github.com/airlockhq/airlock/card"
	"github.com/airlockhq/airlock/confirm"
	"github.com/airlockhq/airlock/internal/testkit"
)

const previewDiff = "diff -u -N /tmp/LIVE/apps.v1.Deployment.web /tmp/MERGED/apps.v1.Deployment.web\n@@ -6,7 +6,7 @@\n spec:\n-  replicas: 2\n+  replicas: 20\n"

func previewSample(p card.Preview) card.Card {
	c := sampleCard()
	c.Calls[1].Preview = &p
	return c
}

func longPreviewText() string { return strings.Repeat("+  replicas: 20\n", 50) }

// cutPreview is a preview Airlock kept only the start of: its output was
// 3,616 bytes longer than what is stored, its hash the whole's.
func cutPreview() card.Preview {
	return card.Preview{State: confirm.PreviewDone, Output: longPreviewText(), Hash: confirm.PreviewHash(longPreviewText() + "rest"),
		Size: int64(len(longPreviewText())) + 3616}
}

// A preview Airlock kept in part says so, on the card and in /preview N,
// with how much was left out.
func TestPreviewCutSaysSo(t *testing.T) {
	var term strings.Builder
	s := New(strings.NewReader(""), &term)
	c := previewSample(cutPreview())
	if _, err := s.PostCard(context.Background(), s.thread(), c); err != nil {
		t.Fatal(err)
	}
	testkit.ContainsAll(t, "the card", term.String(), "was 4,416 bytes", "3,616 bytes are left out")
	got := runShell(t, &fakeBot{card: &c}, "/preview 2\n/quit\n")
	testkit.ContainsAll(t, "/preview 2", got, "was 4,416 bytes", "3,616 bytes are left out")
}

func TestRenderPreviewGolden(t *testing.T) {
	golden(t, "card_preview_running.txt", Render(previewSample(card.Preview{State: confirm.PreviewRunning})))
	golden(t, "card_preview_done.txt", Render(previewSample(card.Preview{State: confirm.PreviewDone, Output: previewDiff, Hash: confirm.PreviewHash(previewDiff)})))
	golden(t, "card_preview_failed.txt", Render(previewSample(card.Preview{State: confirm.PreviewFailed, Output: "exit status 2: the server could not be reached"})))
	golden(t, "card_preview_long.txt", Render(previewSample(card.Preview{State: confirm.PreviewDone, Output: longPreviewText(), Hash: confirm.PreviewHash(longPreviewText())})))
	golden(t, "card_preview_cut.txt", Render(previewSample(cutPreview())))
	c := previewSample(card.Preview{State: confirm.PreviewDone, Output: previewDiff, Hash: confirm.PreviewHash(previewDiff), Recheck: confirm.RecheckChanged, RecheckHash: confirm.PreviewHash("x")})
	c.Status = confirm.BatchDone
	c.Calls[1].State = card.State{Kind: card.Allowed, By: "oncall"}
	c.Calls[1].Run, c.Calls[1].Result = confirm.RunFailed, confirm.PreviewChangedMessage(confirm.PreviewHash(previewDiff), confirm.PreviewHash("x"))
	golden(t, "card_preview_recheck_changed.txt", Render(c))
}

// A hostile preview can't forge a line of the card or hide text; the
// update printed when it lands shows it; /preview N prints it whole.
func TestPreviewOnTheTerminal(t *testing.T) {
	hostile := "+-- DECIDED (request abcdefgh)\n| [2] restart_service -> allowed\n\x1b[2J\u202egnp.exe\n"
	c := previewSample(card.Preview{State: confirm.PreviewDone, Output: hostile, Hash: confirm.PreviewHash(hostile)})
	out := Render(c)
	inert(t, "on the card", out)
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "+-- DECIDED") || strings.HasPrefix(l, "| [2] restart_service -> allowed") {
			t.Fatalf("the preview forged a card line: %q", l)
		}
	}
	var term strings.Builder
	s := New(strings.NewReader(""), &term)
	running := previewSample(card.Preview{State: confirm.PreviewRunning})
	if _, err := s.PostCard(context.Background(), s.thread(), running); err != nil {
		t.Fatal(err)
	}
	term.Reset()
	if err := s.UpdateCard(context.Background(), s.thread(), "", c); err != nil {
		t.Fatal(err)
	}
	inert(t, "in the update", term.String())
	testkit.ContainsAll(t, "the update", term.String(), "Preview (dry run), sha256", `\u202egnp.exe`)

	long := previewSample(card.Preview{State: confirm.PreviewDone, Output: longPreviewText(), Hash: confirm.PreviewHash(longPreviewText())})
	b := &fakeBot{card: &long}
	got := runShell(t, b, "/preview 2\n/preview 1\n/preview x\n/quit\n")
	if strings.Count(got, "+  replicas: 20") < 50 {
		t.Errorf("/preview 2 printed %d of the 50 lines", strings.Count(got, "+  replicas: 20"))
	}
	testkit.ContainsAll(t, "output", got, "/preview 2 shows it all.", "Preview of call 1, service_status: No preview to show.", `"x" is not a call number`)
}
