package bot_test

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/airlockhq/airlock/bot"
	"github.com/airlockhq/airlock/confirm"
	"github.com/airlockhq/airlock/internal/pgtest"
	"github.com/airlockhq/airlock/runbook"
)

// onBothDatabases runs fn on a new SQLite file ("" for newHarnessWith)
// and, when AIRLOCK_TEST_POSTGRES_DSN is set, on a fresh PostgreSQL
// schema.
func onBothDatabases(t *testing.T, fn func(t *testing.T, path string)) {
	t.Run("sqlite", func(t *testing.T) { fn(t, "") })
	t.Run("postgres", func(t *testing.T) {
		pg := os.Getenv("AIRLOCK_TEST_POSTGRES_DSN")
		if pg == "" {
			t.Skip("set AIRLOCK_TEST_POSTGRES_DSN (CI does) to run on PostgreSQL")
		}
		fn(t, pgtest.FreshSchema(t, pg, "botux"))
	})
}

// Issue 34 item 16: a step whose `when` cannot be evaluated when the run
// gets to it (here a result of another shape than the condition reads)
// is not skipped: the run fails at that step, its on_failure steps run,
// and the run message says the condition could not be evaluated. A
// step whose `when` is false says which condition skipped it.
func TestRunbookWhenThatCannotBeEvaluatedFailsTheRun(t *testing.T) {
	onBothDatabases(t, func(t *testing.T, path string) {
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
	onBothDatabases(t, func(t *testing.T, path string) {
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
		if !strings.Contains(msg, "- restart (restart): succeeded (0s)") || strings.Contains(msg, "7m") {
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
	onBothDatabases(t, func(t *testing.T, path string) {
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
