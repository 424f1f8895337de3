package bot_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/airlockhq/airlock/bot"
	"github.com/airlockhq/airlock/confirm"
	"github.com/airlockhq/airlock/runbook"
)

// onBothDatabases runs fn on a new SQLite file ("" for newHarnessWith)
// and, when AIRLOCK_TEST_POSTGRES_DSN is set, on a fresh PostgreSQL
// schema.
// Issue 34 item 16: a step whose `when` cannot be evaluated when the run
// gets to it (here a result of another shape than the condition reads)
// is not skipped: the run fails at that step, its on_failure steps run,
// and the run message says the condition could not be evaluated. A
// step whose `when` is false says which condition skipped it.
func TestRunbookWhenThatCannotBeEvaluatedFailsTheRun(t *testing.T) {
	onBothDatabases(t, func(t *testing.T, _, path string) {
		h := newRBHarnessOn(t, path, nil)
		rb := restartBook()
		// svc_status answers text, not JSON: .status selects nothing.
		rb.Steps[1].When = `steps.before.result.status == "up"`
		id := h.start(rb, "bob")
		r, steps := h.run(id)
		if r.Status != confirm.RunbookFailed || r.FailedStep != "restart" || stepLine(steps) != "before/1:succeeded restart/1:failed page/1:succeeded" {
			t.Fatalf("run: %s at %q: %s", r.Status, r.FailedStep, stepLine(steps))
		}
		if len(h.extra["restart"].runs()) != 0 || len(h.plat.Cards) != 0 {
			t.Fatal("the step ran or asked")
		}
		msg := h.plat.LastPost()
		if !strings.Contains(msg, ": failed") || !strings.Contains(msg, "- restart (restart): failed (Not run: its when could not be evaluated: ") {
			t.Fatalf("run message:\n%s", msg)
		}

		h2 := newRBHarnessOn(t, path, nil)
		rb = restartBook()
		rb.Steps[0].OnFailure = runbook.OnFailureContinue
		rb.Steps[1].When = `steps.before.outcome == "succeeded"`
		h2.extra["svc_status"].outs = []any{errors.New("down"), "up"}
		id = h2.start(rb, "bob")
		if r, steps := h2.run(id); r.Status != confirm.RunbookSucceeded || stepLine(steps) != "before/1:failed restart/1:skipped after/1:succeeded" {
			t.Fatalf("run: %s %s", r.Status, stepLine(steps))
		}
		if msg := h2.plat.LastPost(); !strings.Contains(msg, `- restart (restart): skipped: its when is false (steps.before.outcome == "succeeded")`) {
			t.Fatalf("run message:\n%s", msg)
		}
	})
}

// Issue 34 item 21: a step's time on the run message runs from its
// decision, not from when it began waiting for its approver; a run that
// ended lists the steps it never got to as "not run", not "waiting".
func TestRunMessageTimesAndUnrunSteps(t *testing.T) {
	onBothDatabases(t, func(t *testing.T, _, path string) {
		h := newRBHarnessOn(t, path, nil)
		id := h.start(restartBook(), "bob")
		h.now.Add(int64(7 * time.Minute)) // the approver takes a while
		if err := h.clickLast("alice", true); err != nil {
			t.Fatal(err)
		}
		if r, _ := h.run(id); r.Status != confirm.RunbookSucceeded {
			t.Fatalf("run: %s", r.Status)
		}
		msg := h.plat.LastPost()
		// "(7m": a duration as the run message writes it; a bare "7m" could
		// be part of the run's random id.
		if !strings.Contains(msg, "- restart (restart): succeeded (0s)") || strings.Contains(msg, "(7m") {
			t.Fatalf("run message:\n%s", msg)
		}

		h2 := newRBHarnessOn(t, path, nil)
		id = h2.start(restartBook(), "bob")
		if err := h2.clickLast("alice", false); err != nil {
			t.Fatal(err)
		}
		if r, _ := h2.run(id); r.Status != confirm.RunbookDenied {
			t.Fatalf("run: %s", r.Status)
		}
		msg = h2.plat.LastPost()
		for _, want := range []string{"- restart (restart): denied", "- after (svc_status): not run", "- page (page): not needed"} {
			if !strings.Contains(msg, want) {
				t.Fatalf("%q is not in the run message:\n%s", want, msg)
			}
		}
		if strings.Contains(msg, "waiting") {
			t.Fatalf("an ended run lists a step as waiting:\n%s", msg)
		}
	})
}

// Issue 34 item 17: free text in a thread where a run's step card waits
// does not abandon that card ("the requester moved on"): only the model's
// own pause is abandoned by a turn that goes to the model. The step's
// card keeps waiting for its decision, and Allow then runs the step.
func TestTurnAbandonsOnlyTheModelsPause(t *testing.T) {
	onBothDatabases(t, func(t *testing.T, _, path string) {
		h := newRBHarnessOn(t, path, nil)
		id := h.start(restartBook(), "bob") // the restart step's card waits
		step := h.plat.LastCard()
		// The model pauses on a gated call in the same thread.
		h.push(calls(tc("c1", "deploy", `{"v":1}`)))
		h.turn("bob", "also deploy v1")
		if len(h.plat.Cards) != 2 {
			t.Fatalf("cards posted: %d", len(h.plat.Cards))
		}
		pause := h.plat.Cards[1]
		// Free text: the model's pause is abandoned, the step's card is not.
		h.push(text("ok, never mind"))
		h.turn("bob", "never mind the deploy")
		if b, err := h.store.Batch(context.Background(), pause.BatchID); err != nil || b.Calls[0].DenyMessage != confirm.MovedOnMessage {
			t.Fatalf("the model's pause: %+v %v", b, err)
		}
		b, err := h.store.Batch(context.Background(), step.BatchID)
		if err != nil || b.Status != confirm.BatchPending {
			t.Fatalf("the step's card after free text: %v %v", err, b.Calls[0].DenyMessage)
		}
		if err := h.bot.Decide(context.Background(), bot.Click{Platform: "test", Channel: "C1", User: "alice", Ref: step.Calls[0].Ref, Message: cardMsg(step.Calls[0].Ref), Allow: true}); err != nil {
			t.Fatal(err)
		}
		h.settle()
		if r, steps := h.run(id); r.Status != confirm.RunbookSucceeded {
			t.Fatalf("run: %s %s", r.Status, stepLine(steps))
		}
		if got := h.extra["restart"].runs(); len(got) != 1 {
			t.Fatalf("restart ran %v", got)
		}
	})
}

// Issue 34 item 18, in a chat thread: `run` while a run's card waits
// says what already waits; `stop` with two runs going asks which, listing
// them, and stops nothing; `stop RUN` (the start of its id) stops that
// run only; its end is posted once, even when the stopped step's batch
// comes back to the engine after the stop.
func TestStopNamesTheRun(t *testing.T) {
	onBothDatabases(t, func(t *testing.T, _, path string) {
		rbs, err := runbook.Compile("runbooks", []runbook.Config{*restartBook()}, nil)
		if err != nil {
			t.Fatal(err)
		}
		h := newRBHarnessOn(t, path, func(c *bot.Config) { c.Runbooks = rbs })
		ctx := context.Background()
		say := func(text string) string {
			t.Helper()
			n := len(h.plat.Posts)
			if err := h.bot.HandleTurn(ctx, bot.Turn{Platform: "test", Channel: "C1", Thread: "T1", User: "bob", Text: text}); err != nil {
				t.Fatal(err)
			}
			h.settle()
			return strings.Join(h.plat.Posts[n:], "\n")
		}
		say("run restart service=api")
		got := say("run restart service=web")
		live, err := h.store.LiveRunbookRuns(ctx)
		if err != nil || len(live) != 2 {
			t.Fatalf("%d live runs (%v):\n%s", len(live), err, got)
		}
		first, second := live[0], live[1]
		if first.CreatedAt.After(second.CreatedAt) || (first.CreatedAt.Equal(second.CreatedAt) && strings.Contains(string(first.Params), "web")) {
			first, second = second, first
		}
		if !strings.Contains(got, "Already waiting here: run "+first.ID+" of restart, at step restart, waiting for a decision (request ") ||
			!strings.Contains(got, "@airlock stop RUN stops a run.") {
			t.Fatalf("the second run said nothing of the first:\n%s", got)
		}
		got = say("stop")
		if !strings.Contains(got, "Several runs are going here; say which to stop:") ||
			!strings.Contains(got, "- @airlock stop "+first.ID+": restart, started by bob, at step restart") ||
			!strings.Contains(got, "- @airlock stop "+second.ID+": restart, started by bob, at step restart") {
			t.Fatalf("stop with two runs:\n%s", got)
		}
		if got := say("stop zzzz"); !strings.Contains(got, `No run going here starts with "zzzz".`) {
			t.Fatalf("stop of no such run:\n%s", got)
		}
		if live, _ := h.store.LiveRunbookRuns(ctx); len(live) != 2 {
			t.Fatalf("a stop that named no run stopped %d", 2-len(live))
		}
		say("stop " + first.ID[:6])
		// The stopped step's batch ends after the stop: a late advance
		// shows nothing new.
		if err := h.bot.Runbooks().Advance(ctx, first.ID); err != nil {
			t.Fatal(err)
		}
		h.settle()
		posts := strings.Join(h.plat.Posts, "\n")
		if n := strings.Count(posts, "Runbook restart (run "+first.ID+"), started by bob: stopped"); n != 1 {
			t.Fatalf("the stopped run's end was posted %d times:\n%s", n, posts)
		}
		r1, _ := h.store.RunbookRun(ctx, first.ID)
		r2, _ := h.store.RunbookRun(ctx, second.ID)
		if r1.Status != confirm.RunbookStopped || r2.Status != confirm.RunbookRunning {
			t.Fatalf("after stop %s: %s and %s", first.ID[:6], r1.Status, r2.Status)
		}
		// The only run left: stop needs no name.
		say("stop")
		if r2, _ := h.store.RunbookRun(ctx, second.ID); r2.Status != confirm.RunbookStopped {
			t.Fatalf("the last run: %s", r2.Status)
		}
	})
}
