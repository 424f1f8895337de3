package shell

import (
	"context"
	"strings"
	"testing"

	"github.com/airlockhq/airlock/adapters/internal/adaptertest"
	"github.com/airlockhq/airlock/bot"
	"github.com/airlockhq/airlock/confirm"
	"github.com/airlockhq/airlock/internal/testkit"
	"github.com/airlockhq/airlock/model/modeltest"
	"github.com/airlockhq/airlock/runbook"
)

// Issue 34 item 19: a runbook step's arguments and the run's parameters
// hold &, < and > as written (never \u0026, \u003c, \u003e): the card
// and the run message show exactly what runs.
func TestRunbookArgumentsShowAsWrittenGolden(t *testing.T) {
	c, r := adaptertest.RunbookStepCard(t, Platform, DefaultChannel, DefaultUser)
	var out strings.Builder
	s := New(strings.NewReader(""), &out)
	s.printRun(r.Text())
	golden(t, "card_runbook_args_html.txt", Render(c)+out.String())
	if strings.Contains(out.String()+Render(c), `\u00`) {
		t.Fatalf("an escape instead of the character:\n%s%s", Render(c), out.String())
	}
}

// restartBook is a runbook of one gated step.
func restartBook(t *testing.T) []*runbook.Runbook {
	t.Helper()
	rbs, err := runbook.Compile("runbooks", []runbook.Config{{
		Name: "restart", Description: "Restart a service.",
		Parameters: map[string]any{"type": "object", "properties": map[string]any{
			"service": map[string]any{"type": "string", "enum": []any{"api", "web"}}}, "required": []any{"service"}},
		Steps: []runbook.StepConfig{{ID: "restart", Tool: "restart_service", Args: map[string]any{"service": "{{ params.service }}"}}},
	}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return rbs
}

// Issue 34 item 18: a second /run while a card waits says what already
// waits; /card shows every waiting card; /stop with two runs going asks
// which, listing them; /stop RUN stops that one, whose final status
// prints once, and the other keeps waiting.
func TestShellSeveralRuns(t *testing.T) {
	tool := &restartTool{}
	b, db := realBot(t, bot.Config{Model: modeltest.NewScripted(), Tools: oneTool{tool}, Runbooks: restartBook(t), SelfApproval: true})
	got := runRegistered(t, b, "/run restart service=api\n/run restart service=web\n/card\n/stop\n").String()
	b.Runbooks().Wait()
	live, err := db.LiveRunbookRuns(context.Background())
	if err != nil || len(live) != 2 {
		t.Fatalf("%d live runs (%v); want both:\n%s", len(live), err, got)
	}
	first, second := live[0].ID, live[1].ID
	if live[0].CreatedAt.After(live[1].CreatedAt) {
		first, second = second, first
	}
	beforeSecond, afterSecond, _ := strings.Cut(got, "Runbook restart (run "+second)
	// Before the second run's message: a word about the first.
	if !strings.Contains(beforeSecond, "airlock: Already waiting here: run "+first+" of restart, at step restart, waiting for a decision (request ") {
		t.Fatalf("the second /run said nothing of the first:\n%s", got)
	}
	// /card: both cards, oldest first; /stop: which run?
	_, cardOut, ok := strings.Cut(afterSecond, "2 cards are waiting, oldest first")
	if !ok || strings.Count(cardOut, "APPROVAL NEEDED") < 2 {
		t.Fatalf("/card did not show every waiting card:\n%s", got)
	}
	testkit.ContainsAll(t, "/stop", afterSecond,
		"Several runs are going here; say which to stop:",
		"/stop "+first+": restart, started by local",
		"/stop "+second+": restart, started by local",
	)
	if n := tool.runs.Load(); n != 0 {
		t.Fatalf("a step ran: %d", n)
	}
	// /stop RUN (a prefix is enough) stops that run only.
	var out strings.Builder
	sh := New(strings.NewReader("/stop "+first[:8]+"\n"), &out)
	b.Register(Platform, sh)
	if err := sh.Run(context.Background(), b); err != nil {
		t.Fatal(err)
	}
	b.Runbooks().Wait()
	// The stopped step's batch ending comes back to the engine too (a
	// background advance, in any order with the stop's own): the run,
	// already shown ended, is not printed again.
	if err := b.Runbooks().Advance(context.Background(), first); err != nil {
		t.Fatal(err)
	}
	got = out.String()
	if n := strings.Count(got, "Runbook restart (run "+first+"), started by local: stopped"); n != 1 {
		t.Fatalf("the stopped run's final status printed %d times:\n%s", n, got)
	}
	r1, _ := db.RunbookRun(context.Background(), first)
	r2, _ := db.RunbookRun(context.Background(), second)
	if r1.Status != confirm.RunbookStopped || r2.Status != confirm.RunbookRunning {
		t.Fatalf("after /stop %s: %s and %s", first[:8], r1.Status, r2.Status)
	}
}
