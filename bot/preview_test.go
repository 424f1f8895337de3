package bot_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/airlockhq/airlock/bot"
	"github.com/airlockhq/airlock/bot/bottest"
	cardpkg "github.com/airlockhq/airlock/card"
	"github.com/airlockhq/airlock/confirm"
	"github.com/airlockhq/airlock/internal/pgtest"
	"github.com/airlockhq/airlock/model"
	"github.com/airlockhq/airlock/runbook"
	"github.com/airlockhq/airlock/tools"
)

// previewing is a gated tool with a preview: out answers the n-th preview
// (from 1); with gate set, each preview waits for a value from it.
type previewing struct {
	*bottest.Tool
	recheck  bool
	out      func(n int64) (string, error)
	gate     chan struct{}
	previews atomic.Int64
}

func (p *previewing) Previews() (bool, bool) { return true, p.recheck }
func (p *previewing) Preview(ctx context.Context, _ json.RawMessage) (string, error) {
	n := p.previews.Add(1)
	if p.gate != nil {
		select {
		case <-p.gate:
		case <-ctx.Done():
			return "", ctx.Err()
		}
	}
	return p.out(n)
}

// withTools is a tool set of bottest's tools and others.
type withTools struct {
	bottest.Tools
	extra map[string]tools.Tool
}

func (w withTools) Get(name string) (tools.Tool, bool) {
	if t, ok := w.extra[name]; ok {
		return t, true
	}
	return w.Tools.Get(name)
}

func (w withTools) Specs() []model.ToolSpec {
	out := w.Tools.Specs()
	for _, t := range w.extra {
		out = append(out, t.Spec())
	}
	return out
}

func previewHarness(t *testing.T, path string, p *previewing) *harness {
	t.Helper()
	return newHarnessWith(t, path, func(cfg *bot.Config) {
		cfg.Tools = withTools{Tools: cfg.Tools.(bottest.Tools), extra: map[string]tools.Tool{"apply": p}}
		cfg.Redact = func(s string) string { return strings.ReplaceAll(s, "hunter2", "[redacted]") }
	})
}

func newPreviewing(out func(n int64) (string, error)) *previewing {
	return &previewing{Tool: &bottest.Tool{Name: "apply", Confirms: true, Mu: &sync.Mutex{}}, out: out}
}

// waitPreview waits until the batch's call k's preview is no longer running.
func waitPreview(t *testing.T, h *harness, k int) confirm.Call {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		b, err := h.store.PendingBatch(context.Background(), convID(t, h))
		if err == nil && b != nil && b.Calls[k].Preview.State != confirm.PreviewRunning {
			return b.Calls[k]
		}
		if time.Now().After(deadline) {
			t.Fatal("the preview never ended")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// settledCard is the card as last rendered once no message of it is
// behind: a preview's own pass may still hold the card's message when a
// click lands, and then renders the click's state after its own.
func settledCard(t *testing.T, h *harness) cardpkg.Card {
	t.Helper()
	eventually(t, "no card message is behind", func() bool {
		n, err := h.store.CardsBehind(context.Background())
		return err == nil && n == 0
	})
	return h.plat.LastCard()
}

func convID(t *testing.T, h *harness) int64 {
	t.Helper()
	c, err := h.store.Conversation(context.Background(), "test", "C1", "T1", false)
	if err != nil {
		t.Fatal(err)
	}
	return c.ID
}

func (h *harness) clickRef(user, ref string, allow bool) error {
	return h.bot.Decide(context.Background(), bot.Click{Platform: "test", Channel: "C1", User: user, Ref: ref, Message: cardMsg(ref), Allow: allow})
}

// The card is posted at once saying "preview running"; an Allow then is
// refused; the preview lands on the card (scrubbed) and a click carrying
// the reference rendered before it changes nothing; one from the updated
// card runs the tool.
func TestPreviewOnTheCardAndAYesBindsToIt(t *testing.T) {
	p := newPreviewing(func(int64) (string, error) { return "- replicas: 2\n+ replicas: 20\ntoken hunter2\n", nil })
	p.gate = make(chan struct{})
	h := previewHarness(t, "", p)
	h.push(calls(tc("c1", "status", `{}`), tc("c2", "apply", `{"path":"web.yaml"}`)), text("Applied."))
	h.turn("bob", "apply web")

	first := h.plat.LastCard()
	pv := first.Calls[1].Preview
	if pv == nil || pv.State != confirm.PreviewRunning || pv.Heading() != "Preview running…" {
		t.Fatalf("card posted with preview %+v, want running", pv)
	}
	if first.Calls[0].Preview != nil {
		t.Fatal("the policy-allowed call shows a preview")
	}
	oldRef := first.Calls[1].Ref
	if err := h.clickRef("alice", oldRef, true); !errors.Is(err, bot.ErrPreviewRunning) {
		t.Fatalf("Allow while the preview runs = %v, want ErrPreviewRunning", err)
	}
	p.gate <- struct{}{}
	c := waitPreview(t, h, 1)
	if c.Preview.State != confirm.PreviewDone || strings.Contains(c.Preview.Output, "hunter2") || c.Preview.Hash != confirm.PreviewHash(c.Preview.Output) {
		t.Fatalf("stored preview %+v", c.Preview)
	}
	deadline := time.Now().Add(5 * time.Second)
	for h.plat.LastCard().Calls[1].Preview.State != confirm.PreviewDone && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	shown := h.plat.LastCard().Calls[1]
	if shown.Preview.State != confirm.PreviewDone || !strings.Contains(shown.Preview.Output, "+ replicas: 20") || strings.Contains(shown.Preview.Output, "hunter2") {
		t.Fatalf("updated card's preview %+v", shown.Preview)
	}
	if shown.Ref == oldRef {
		t.Fatal("the preview's landing kept the call's reference")
	}
	err := h.clickRef("alice", oldRef, true)
	if !errors.Is(err, bot.ErrStalePreview) || !errors.Is(err, bot.ErrStaleRevision) {
		t.Fatalf("click on the pre-preview card = %v, want stale", err)
	}
	if !strings.Contains(bot.UserMessage(err), "preview arrived") {
		t.Errorf("stale click told %q", bot.UserMessage(err))
	}
	if p.Runs.Load() != 0 {
		t.Fatal("a stale click ran the tool")
	}
	if err := h.clickRef("alice", shown.Ref, true); err != nil {
		t.Fatal(err)
	}
	if p.Runs.Load() != 1 {
		t.Fatalf("runs %d, want 1", p.Runs.Load())
	}
	if n := p.previews.Load(); n != 1 {
		t.Fatalf("previews %d, want 1 (no recheck)", n)
	}
}

// A failed preview shows on the card with its scrubbed error; the call
// can still be decided.
func TestPreviewFailedCanStillBeDecided(t *testing.T) {
	p := newPreviewing(func(int64) (string, error) {
		return "", errors.New("exit status 2: cannot reach the cluster with hunter2")
	})
	h := previewHarness(t, "", p)
	h.push(calls(tc("c1", "apply", `{}`)), text("Applied."))
	h.turn("bob", "apply")
	c := waitPreview(t, h, 0)
	if c.Preview.State != confirm.PreviewFailed || !strings.Contains(c.Preview.Output, "cannot reach") || strings.Contains(c.Preview.Output, "hunter2") || c.Preview.Hash != "" {
		t.Fatalf("preview %+v", c.Preview)
	}
	b, _ := h.store.PendingBatch(context.Background(), convID(t, h))
	if err := h.clickRef("alice", confirm.RefAt(b.ID, 0, c.Revision), true); err != nil {
		t.Fatal(err)
	}
	if p.Runs.Load() != 1 {
		t.Fatalf("runs %d, want 1", p.Runs.Load())
	}
}

// With recheck, a preview whose output changed between the card and the
// run refuses the run: the tool runs 0 times, the outcome is failed, the
// card says so with both hashes and the model is told.
func TestPreviewRecheckChangedRefusesTheRun(t *testing.T) {
	p := newPreviewing(func(n int64) (string, error) {
		if n == 1 {
			return "+ replicas: 20\n", nil
		}
		return "+ replicas: 20\n+ image: evil:latest\n", nil
	})
	p.recheck = true
	h := previewHarness(t, "", p)
	h.push(calls(tc("c1", "apply", `{}`)), text("The preview changed; I stopped."))
	h.turn("bob", "apply")
	c := waitPreview(t, h, 0)
	b, _ := h.store.PendingBatch(context.Background(), convID(t, h))
	if err := h.clickRef("alice", confirm.RefAt(b.ID, 0, c.Revision), true); err != nil {
		t.Fatal(err)
	}
	if p.Runs.Load() != 0 {
		t.Fatalf("the tool ran %d times after its preview changed", p.Runs.Load())
	}
	res := lastToolResults(t, h.lastRequest())
	if len(res) != 1 || !res[0].IsError || !strings.Contains(res[0].Content, "the preview changed since it was approved") {
		t.Fatalf("model told %+v", res)
	}
	final := settledCard(t, h).Calls[0]
	if final.Run != confirm.RunFailed || final.Preview == nil || final.Preview.Recheck != confirm.RecheckChanged {
		t.Fatalf("final card call: run %s preview %+v", final.Run, final.Preview)
	}
	note := final.Preview.RecheckNote()
	if !strings.Contains(note, confirm.ShortHash(final.Preview.Hash)) || !strings.Contains(note, confirm.ShortHash(final.Preview.RecheckHash)) || final.Preview.Hash == final.Preview.RecheckHash {
		t.Fatalf("recheck note %q, want both hashes", note)
	}
}

// A recheck that gives the approved output lets the tool run; one that
// fails refuses it.
func TestPreviewRecheckMatchedRunsAndFailedRefuses(t *testing.T) {
	for _, tc2 := range []struct {
		name   string
		second error
		runs   int64
		want   confirm.RecheckState
	}{
		{"matched", nil, 1, confirm.RecheckMatched},
		{"failed", errors.New("timed out after 30s"), 0, confirm.RecheckFailed},
	} {
		t.Run(tc2.name, func(t *testing.T) {
			p := newPreviewing(func(n int64) (string, error) {
				if n > 1 && tc2.second != nil {
					return "", tc2.second
				}
				return "same diff\n", nil
			})
			p.recheck = true
			h := previewHarness(t, "", p)
			h.push(calls(tc("c1", "apply", `{}`)), text("Done."))
			h.turn("bob", "apply")
			c := waitPreview(t, h, 0)
			b, _ := h.store.PendingBatch(context.Background(), convID(t, h))
			if err := h.clickRef("alice", confirm.RefAt(b.ID, 0, c.Revision), true); err != nil {
				t.Fatal(err)
			}
			if p.Runs.Load() != tc2.runs {
				t.Fatalf("runs %d, want %d", p.Runs.Load(), tc2.runs)
			}
			if got := settledCard(t, h).Calls[0].Preview.Recheck; got != tc2.want {
				t.Fatalf("recheck %q, want %q", got, tc2.want)
			}
			if tc2.runs == 0 {
				res := lastToolResults(t, h.lastRequest())
				if !strings.Contains(res[0].Content, "could not be checked again") {
					t.Fatalf("model told %q", res[0].Content)
				}
			}
		})
	}
}

// A call no person is asked about gets no preview: policy-allowed calls
// and calls allowed by rule are never previewed.
func TestPreviewOnlyForCallsWaitingOnAPerson(t *testing.T) {
	p := newPreviewing(func(int64) (string, error) { return "diff", nil })
	h := newHarnessWith(t, "", func(cfg *bot.Config) {
		cfg.Tools = withTools{Tools: cfg.Tools.(bottest.Tools), extra: map[string]tools.Tool{"apply": p}}
		cfg.Policy = confirm.NewPolicy(false, nil) // nothing gated
	})
	h.push(calls(tc("c1", "apply", `{}`)), text("Done."))
	h.turn("bob", "apply")
	if p.Runs.Load() != 1 || p.previews.Load() != 0 {
		t.Fatalf("runs %d previews %d, want 1 and 0", p.Runs.Load(), p.previews.Load())
	}
}

// A restart while a preview runs: at recovery the preview of the call,
// still waiting, runs again and lands on the card.
func TestPreviewRunsAgainAfterARestart(t *testing.T) {
	path := t.TempDir() + "/airlock.db"
	stuck := newPreviewing(func(int64) (string, error) { return "first process", nil })
	stuck.gate = make(chan struct{})
	h := previewHarness(t, path, stuck)
	h.push(calls(tc("c1", "apply", `{}`)))
	h.turn("bob", "apply")
	defer close(stuck.gate)

	fresh := newPreviewing(func(int64) (string, error) { return "after the restart", nil })
	h2 := previewHarness(t, path, fresh)
	if err := h2.bot.Recover(context.Background()); err != nil {
		t.Fatal(err)
	}
	c := waitPreview(t, h2, 0)
	if c.Preview.State != confirm.PreviewDone || c.Preview.Output != "after the restart" || fresh.previews.Load() != 1 {
		t.Fatalf("preview after recovery %+v (ran %d)", c.Preview, fresh.previews.Load())
	}
}

// Allow all leaves a call whose preview runs waiting, named; the other
// call is allowed. Edit… is refused on a call with a preview.
func TestPreviewRunningLeftByAllowAllAndNotEditable(t *testing.T) {
	p := newPreviewing(func(int64) (string, error) { return "diff", nil })
	p.gate = make(chan struct{})
	defer close(p.gate)
	h := previewHarness(t, "", p)
	h.push(calls(tc("c1", "deploy", `{}`), tc("c2", "apply", `{}`)))
	h.turn("bob", "deploy and apply")
	card := h.plat.LastCard()
	if card.AllRef == "" {
		t.Fatal("no Allow all")
	}
	res, err := h.bot.DecideAll(context.Background(), bot.Click{Platform: "test", Channel: "C1", User: "alice", Ref: card.AllRef, Message: cardMsg(card.Calls[0].Ref), Allow: true})
	if err != nil {
		t.Fatal(err)
	}
	if res.Decided != 1 || len(res.Left) != 1 || res.Left[0].Number != 2 || !strings.Contains(res.Left[0].Why, "preview is still running") {
		t.Fatalf("Allow all = %+v", res)
	}
	if p.Runs.Load() != 0 {
		t.Fatal("the previewed call ran")
	}
	_, err = h.bot.EditForm(context.Background(), bot.Click{Platform: "test", Channel: "C1", User: "alice", Ref: card.Calls[1].Ref, Message: cardMsg(card.Calls[1].Ref)})
	if !errors.Is(err, bot.ErrPreviewNotEditable) || !errors.Is(err, bot.ErrNotEditable) {
		t.Fatalf("Edit… on a call with a preview = %v", err)
	}
	if card.Calls[1].Editable {
		t.Error("the card offers Edit… on a call with a preview")
	}
}

// A runbook step calling a tool with a preview: the step's card shows the
// preview (it runs once the card is posted), and Allow on the updated card
// runs the step.
func TestPreviewOfARunbookStep(t *testing.T) {
	p := newPreviewing(func(int64) (string, error) { return "+  replicas: 20\n", nil })
	h := previewHarness(t, "", p)
	rb := &runbook.Config{Name: "scale", Steps: []runbook.StepConfig{{ID: "apply", Tool: "apply", Args: map[string]any{"path": "web.yaml"}}}}
	id, err := h.bot.StartRunbook(context.Background(), bot.Thread{Platform: "test", Channel: "C1", Thread: "T1"}, "bob", rb, map[string]any{}, "", "")
	if err != nil {
		t.Fatal(err)
	}
	h.bot.Runbooks().Wait()
	c := waitPreview(t, h, 0)
	if c.Preview.State != confirm.PreviewDone || c.Preview.Output != "+  replicas: 20\n" {
		t.Fatalf("step preview %+v", c.Preview)
	}
	b, _ := h.store.PendingBatch(context.Background(), convID(t, h))
	if err := h.clickRef("alice", confirm.RefAt(b.ID, 0, c.Revision), true); err != nil {
		t.Fatal(err)
	}
	h.bot.Runbooks().Wait()
	if p.Runs.Load() != 1 {
		t.Fatalf("the step ran %d times (run %s)", p.Runs.Load(), id)
	}
}

// A preview landing on a denied call while its batch runs shows on the
// final card: the run's completion renders the batch it had loaded only
// when no other change of the card came meanwhile.
func TestPreviewLandingWhileTheBatchRuns(t *testing.T) {
	ctx := context.Background()
	p := newPreviewing(func(int64) (string, error) { return "late diff\n", nil })
	p.gate = make(chan struct{})
	h := newHarnessWith(t, "", func(cfg *bot.Config) {
		cfg.Tools = withTools{Tools: cfg.Tools.(bottest.Tools), extra: map[string]tools.Tool{"apply": p}}
		cfg.RunningCardDelay = time.Hour // no "running" card: only the preview's change comes between
	})
	h.tools["deploy"].Block = make(chan struct{})
	h.push(calls(tc("c1", "deploy", `{}`), tc("c2", "apply", `{}`)), text("Deployed; apply denied."))
	h.turn("bob", "deploy and apply")
	card := h.plat.LastCard()
	if err := h.clickRef("alice", card.Calls[1].Ref, false); err != nil { // a deny does not wait for the preview
		t.Fatal(err)
	}
	done := h.allowInBackground(ctx, card.Calls[0].Ref)
	batchID := card.BatchID
	eventually(t, "the batch runs", func() bool {
		b, err := h.store.Batch(ctx, batchID)
		return err == nil && b.Status == confirm.BatchRunning
	})
	p.gate <- struct{}{}
	eventually(t, "the preview landed", func() bool {
		b, err := h.store.Batch(ctx, batchID)
		return err == nil && b.Calls[1].Preview.State == confirm.PreviewDone
	})
	close(h.tools["deploy"].Block)
	<-done
	final := settledCard(t, h)
	if final.Calls[0].Run != confirm.RunSucceeded || final.Calls[1].Preview == nil || final.Calls[1].Preview.State != confirm.PreviewDone {
		t.Fatalf("final card: deploy %s, apply's preview %+v; want the preview that landed during the run", final.Calls[0].Run, final.Calls[1].Preview)
	}
}

// onBothDatabases runs fn on a new SQLite file and, when
// AIRLOCK_TEST_POSTGRES_DSN is set (CI sets it), on a new PostgreSQL
// schema.
func onBothDatabases(t *testing.T, fn func(t *testing.T, driver, dsn string)) {
	t.Run("sqlite", func(t *testing.T) { fn(t, "sqlite", filepath.Join(t.TempDir(), "airlock.db")) })
	t.Run("postgres", func(t *testing.T) {
		pg := os.Getenv("AIRLOCK_TEST_POSTGRES_DSN")
		if pg == "" {
			t.Skip("set AIRLOCK_TEST_POSTGRES_DSN (CI does) to run on PostgreSQL")
		}
		fn(t, "postgres", pgtest.FreshSchema(t, pg, "preview"))
	})
}

// catPreview is a configured tool "apply" (exec, gated) whose preview,
// rechecked, prints the file at path: what a diff of a manifest an
// attacker can change between the card and the run would print.
func catPreview(t *testing.T, path string) tools.Tool {
	t.Helper()
	set, err := tools.New([]tools.Config{{Name: "apply", Confirm: true, Exec: &tools.ExecConfig{Command: []string{"true"}},
		Preview: &tools.PreviewConfig{Exec: &tools.ExecConfig{Command: []string{"cat", path}}, Recheck: true}}}, tools.Options{})
	if err != nil {
		t.Fatal(err)
	}
	tool, _ := set.Get("apply")
	return tool
}

// A preview longer than the card keeps (16 KiB) is bound whole: its
// output changed past the cut, keeping its length, between the card and
// the run, and the recheck refuses the run. The card says how much of the
// preview it left out.
func TestPreviewRecheckSeesPastTheCut(t *testing.T) {
	onBothDatabases(t, func(t *testing.T, driver, dsn string) {
		file := filepath.Join(t.TempDir(), "diff.txt")
		approved := strings.Repeat("+  replicas: 20\n", 1250) // 20,000 bytes
		if err := os.WriteFile(file, []byte(approved), 0o600); err != nil {
			t.Fatal(err)
		}
		h := newHarnessOn(t, driver, dsn, func(cfg *bot.Config) {
			cfg.Tools = withTools{Tools: cfg.Tools.(bottest.Tools), extra: map[string]tools.Tool{"apply": catPreview(t, file)}}
		})
		h.push(calls(tc("c1", "apply", `{}`)), text("Stopped."))
		h.turn("bob", "apply")
		c := waitPreview(t, h, 0)
		if c.Preview.State != confirm.PreviewDone || c.Preview.Hash != confirm.PreviewHash(approved) {
			t.Fatalf("stored preview %s, hash %s; want done with the sha256 of the whole output", c.Preview.State, c.Preview.Hash)
		}
		if len(c.Preview.Output) > tools.DefaultMaxOutput || !strings.HasPrefix(approved, c.Preview.Output) || c.Preview.Size != int64(len(approved)) {
			t.Fatalf("stored %d bytes of the preview (size %d), want at most %d of its %d", len(c.Preview.Output), c.Preview.Size, tools.DefaultMaxOutput, len(approved))
		}
		eventually(t, "the preview on the card", func() bool {
			p := h.plat.LastCard().Calls[0].Preview
			return p != nil && p.State == confirm.PreviewDone
		})
		shown := h.plat.LastCard().Calls[0].Preview
		if note := shown.CutNote(); !strings.Contains(note, "20,000 bytes") || !strings.Contains(note, cardpkg.Bytes(len(approved)-len(c.Preview.Output))+" are left out") {
			t.Fatalf("card's cut note %q: want the whole size and what was left out", note)
		}

		// The same length, one line changed past the cut.
		changed := approved[:18000] + "+  image: evil\n" + approved[18000+len("+  image: evil\n"):]
		if len(changed) != len(approved) {
			t.Fatal("test bug: lengths differ")
		}
		if err := os.WriteFile(file, []byte(changed), 0o600); err != nil {
			t.Fatal(err)
		}
		b, _ := h.store.PendingBatch(context.Background(), convID(t, h))
		if err := h.clickRef("alice", confirm.RefAt(b.ID, 0, c.Revision), true); err != nil {
			t.Fatal(err)
		}
		final := settledCard(t, h).Calls[0]
		if final.Run != confirm.RunFailed || final.Preview.Recheck != confirm.RecheckChanged {
			t.Fatalf("after a change past the cut: run %s, recheck %q; want the run refused", final.Run, final.Preview.Recheck)
		}
		res := lastToolResults(t, h.lastRequest())
		if len(res) != 1 || !strings.Contains(res[0].Content, "the preview changed since it was approved") {
			t.Fatalf("model told %+v", res)
		}
		// The audit's preview_hash is the whole output's, as on the card.
		evs, err := h.store.AuditEvents(context.Background(), confirm.AuditFilter{})
		if err != nil {
			t.Fatal(err)
		}
		var detail string
		for _, e := range evs {
			if e.Kind == confirm.AuditToolResult {
				detail = e.Detail
			}
		}
		if !strings.Contains(detail, `"preview_hash":"`+confirm.PreviewHash(approved)+`"`) || !strings.Contains(detail, `"recheck_hash":"`+confirm.PreviewHash(changed)+`"`) {
			t.Fatalf("tool_result audit detail %s: want the whole outputs' hashes", detail)
		}
	})
}
