package bot_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/airlockhq/airlock/bot"
	"github.com/airlockhq/airlock/confirm"
	"github.com/airlockhq/airlock/model"
	"github.com/airlockhq/airlock/runbook"
)

// modelBooks is a harness whose channel offers the compiled runbooks as
// the model's tools.
func modelBooks(t *testing.T) *rbHarness {
	return newRBHarness(t, func(c *bot.Config) { c.Runbooks = compiledBooks(t) })
}

func specNamed(req model.Request, name string) *model.ToolSpec {
	for i := range req.Tools {
		if req.Tools[i].Name == name {
			return &req.Tools[i]
		}
	}
	return nil
}

// The model's runbook__restart call starts the run in the thread; the
// reply's other call runs as usual; the model is not asked again while
// the run's gated step waits (a message meanwhile is kept as context);
// once the run has ended the reply's results reach the model in its
// order, the runbook call's being the run's summary.
func TestRunbookToolSummaryReachesModelInOrder(t *testing.T) {
	h := modelBooks(t)
	h.push(calls(tc("c1", "runbook__restart", `{"service":"api"}`), tc("c2", "status", `{"svc":"api"}`)), text("Restarted."))
	h.turn("bob", "restart api")
	h.settle()
	first := h.lastRequest()
	spec := specNamed(first, "runbook__restart")
	if spec == nil || !strings.Contains(string(spec.Parameters), `"enum":["api","web"]`) || !strings.Contains(spec.Description, "summary") {
		t.Fatalf("the model's runbook tool: %+v", spec)
	}
	live := h.liveRuns()
	if len(live) != 1 || live[0].RequestedBy != "bob" || live[0].ParentKey != "c1" || live[0].ParentBatch == "" {
		t.Fatalf("runs: %+v", live)
	}
	_, steps := h.run(live[0].ID)
	if stepLine(steps) != "before/1:succeeded restart/1:waiting" {
		t.Fatalf("steps: %s", stepLine(steps))
	}
	if got := h.ranCalls(); len(got) != 1 || !strings.HasPrefix(got[0], "status:") {
		t.Fatalf("the reply's other call: %v", got)
	}
	if n := len(h.model.Requests()); n != 1 {
		t.Fatalf("the model was asked %d times before the run ended", n)
	}
	// The requester writes while the step waits: kept as context, the
	// step's card keeps waiting, the model is not asked.
	h.turn("bob", "how is it going?")
	if p := h.plat.LastPost(); !strings.Contains(p, "runbook the agent started is running") {
		t.Fatalf("answer while the run goes: %q", p)
	}
	if _, steps := h.run(live[0].ID); stepLine(steps) != "before/1:succeeded restart/1:waiting" || len(h.model.Requests()) != 1 {
		t.Fatalf("a message moved the run on: %s, %d requests", stepLine(steps), len(h.model.Requests()))
	}
	if err := h.clickLast("alice", true); err != nil {
		t.Fatal(err)
	}
	if r, _ := h.run(live[0].ID); r.Status != confirm.RunbookSucceeded {
		t.Fatalf("run: %s", r.Status)
	}
	if n := len(h.model.Requests()); n != 2 {
		t.Fatalf("the model was asked %d times, want 2", n)
	}
	res := lastToolResults(t, h.lastRequest())
	if len(res) != 2 || res[0].CallID != "c1" || res[0].Name != "runbook__restart" || res[1].CallID != "c2" || res[1].Name != "status" {
		t.Fatalf("results to the model, want the model's order: %+v", res)
	}
	sum := res[0].Content
	for _, want := range []string{"Runbook restart (run " + live[0].ID + ") succeeded", `Parameters: {"service":"api"}`,
		"- before (svc_status), attempt 1: succeeded: svc_status done", "- restart (restart), attempt 1: succeeded: restart done",
		"- after (svc_status), attempt 1: succeeded"} {
		if !strings.Contains(sum, want) {
			t.Fatalf("summary lacks %q:\n%s", want, sum)
		}
	}
	if res[0].IsError {
		t.Fatal("a succeeded run's summary is an error")
	}
	var aside bool
	for _, m := range h.lastRequest().Messages {
		if m.Role == model.RoleUser && strings.Contains(m.Text, "how is it going?") {
			aside = true
		}
		for _, r := range m.Results {
			if r.Name == "svc_status" || r.Name == "restart" {
				t.Fatalf("a step's result reached the model's history: %+v", r)
			}
		}
	}
	if !aside {
		t.Fatal("the message written meanwhile is not in the model's history")
	}
	if !posted(h.plat, "Restarted.") {
		t.Fatalf("no answer: %q", h.plat.Posts)
	}
	if got := h.extra["restart"].runs(); len(got) != 1 || got[0] != live[0].ID+"/restart/1" {
		t.Fatalf("restart ran %v", got)
	}
}

// The whole reply pauses for its gated call: the run does not start
// before the reply is decided; the runbook call itself asks nobody.
func TestRunbookToolWaitsForTheReply(t *testing.T) {
	h := modelBooks(t)
	h.push(calls(tc("c1", "deploy", `{}`), tc("c2", "runbook__other", `{}`)), text("Done."))
	h.turn("bob", "deploy and page")
	h.settle()
	if len(h.liveRuns()) != 0 || len(h.extra["page"].runs()) != 0 {
		t.Fatal("the runbook started before the reply was decided")
	}
	card := h.plat.LastCard()
	if len(card.Calls) != 2 || !card.Calls[0].Flagged || card.Calls[1].Flagged || card.Calls[1].Summary != "run runbook other {}" {
		t.Fatalf("card: %+v", card.Calls)
	}
	if err := h.click("alice", 1, false, "no"); err != nil {
		t.Fatal(err)
	}
	h.settle()
	res := lastToolResults(t, h.lastRequest())
	if len(res) != 2 || !res[0].IsError || !strings.Contains(res[1].Content, "Runbook other") || !strings.Contains(res[1].Content, "- a (page), attempt 1: succeeded") {
		t.Fatalf("results: %+v", res)
	}
	if len(h.extra["page"].runs()) != 1 {
		t.Fatal("the allowed runbook call did not run its step once")
	}
}

// Parameters the schema refuses: the call's result is the validation
// error (naming the parameter and what is allowed), nothing runs, and the
// model goes on at once.
func TestRunbookToolBadParams(t *testing.T) {
	h := modelBooks(t)
	h.push(calls(tc("c1", "runbook__restart", `{"service":"db"}`), tc("c2", "runbook__restart", `{"service":"api","extra":1}`)), text("Sorry."))
	h.turn("bob", "restart db")
	h.settle()
	res := lastToolResults(t, h.lastRequest())
	if len(res) != 2 || !res[0].IsError || !strings.Contains(res[0].Content, "service") || !strings.Contains(res[0].Content, "api") ||
		!res[1].IsError || !strings.Contains(res[1].Content, "extra") {
		t.Fatalf("results: %+v", res)
	}
	runs, err := h.store.LiveRunbookRuns(context.Background())
	if err != nil || len(runs) != 0 || len(h.extra["svc_status"].runs()) != 0 {
		t.Fatalf("something ran: %v %v", runs, h.extra["svc_status"].runs())
	}
	if h.plat.LastPost() != "Sorry." {
		t.Fatalf("answer: %q", h.plat.LastPost())
	}
}

// A deny inside the run stops it, and the summary the model gets says
// so: the denied step with the reason, the steps not run.
func TestRunbookToolDenyInSummary(t *testing.T) {
	h := modelBooks(t)
	h.push(calls(tc("c1", "runbook__restart", `{"service":"web"}`)), text("It was denied."))
	h.turn("bob", "restart web")
	h.settle()
	if err := h.click("alice", 1, false, "not during the sale"); err != nil {
		t.Fatal(err)
	}
	h.settle()
	res := lastToolResults(t, h.lastRequest())
	if len(res) != 1 || !res[0].IsError {
		t.Fatalf("results: %+v", res)
	}
	sum := res[0].Content
	for _, want := range []string{"denied at step restart", "- restart (restart), attempt 1: denied", "not during the sale", "- after (svc_status): not run"} {
		if !strings.Contains(sum, want) {
			t.Fatalf("summary lacks %q:\n%s", want, sum)
		}
	}
	if len(h.extra["restart"].runs()) != 0 || len(h.extra["page"].runs()) != 0 {
		t.Fatal("a denied step ran, or on_failure ran for a deny")
	}
}

// A runbook the channel does not offer is no tool of the model there: not
// in its tools, and a call of it is refused as an unknown tool.
func TestRunbookToolOnlyWhereOffered(t *testing.T) {
	h := newRBHarness(t, func(c *bot.Config) {
		c.Runbooks = compiledBooks(t)
		c.Channels = bot.NewChannels([]bot.Channel{{Platform: "test", ID: "C1", Approvers: []string{"alice"}, Runbooks: []string{"other"}}})
	})
	h.push(calls(tc("c1", "runbook__restart", `{"service":"api"}`)), text("No."))
	h.turn("bob", "restart api")
	h.settle()
	req := h.model.Requests()[0]
	if specNamed(req, "runbook__restart") != nil || specNamed(req, "runbook__other") == nil {
		t.Fatalf("tools offered: %+v", req.Tools)
	}
	res := lastToolResults(t, h.lastRequest())
	if len(res) != 1 || !res[0].IsError || !strings.Contains(res[0].Content, "unknown tool") {
		t.Fatalf("results: %+v", res)
	}
	if len(h.liveRuns()) != 0 || len(h.extra["svc_status"].runs()) != 0 {
		t.Fatal("a runbook not offered here started")
	}
}

// A restart while the run's gated step waits: the new process finds the
// batch waiting on the run; the card still works; the run finishes, the
// model gets the summary, and each tool ran once.
func TestRunbookToolAcrossRestart(t *testing.T) {
	path := t.TempDir() + "/airlock.db"
	extra := restartTools()
	first := rbProcess(t, path, extra, true)
	first.push(calls(tc("c1", "status", `{}`), tc("c2", "runbook__restart", `{"service":"api"}`)))
	first.turn("bob", "restart api")
	first.settle()
	cardRef := first.plat.LastCard().Calls[0].Ref
	second := rbProcess(t, path, extra, true)
	second.push(text("Restarted after all."))
	ctx := context.Background()
	if err := second.bot.Recover(ctx); err != nil {
		t.Fatal(err)
	}
	for _, j := range second.bot.Jobs(time.Second) {
		if j.Name == bot.JobRunbooks {
			if err := j.Run(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	second.settle()
	if n := len(second.model.Requests()); n != 0 {
		t.Fatalf("the model was asked %d times while the run waits", n)
	}
	if err := second.bot.Decide(ctx, bot.Click{Platform: "test", Channel: "C1", User: "alice", Ref: cardRef, Message: cardMsg(cardRef), Allow: true}); err != nil {
		t.Fatal(err)
	}
	second.settle()
	res := lastToolResults(t, second.lastRequest())
	if len(res) != 2 || res[0].CallID != "c1" || res[1].CallID != "c2" || !strings.Contains(res[1].Content, "succeeded") {
		t.Fatalf("results: %+v", res)
	}
	if !posted(second.plat, "Restarted after all.") {
		t.Fatalf("no answer: %q", second.plat.Posts)
	}
	if len(extra["restart"].runs()) != 1 || len(extra["svc_status"].runs()) != 2 || first.tools["status"].Runs.Load() != 1 {
		t.Fatalf("runs: restart %v, svc_status %v, status %d", extra["restart"].runs(), extra["svc_status"].runs(), first.tools["status"].Runs.Load())
	}
}

// A step's card is Airlock's: it names the step, the runbook and who
// started the run, and says nothing in the agent's name, also when it is
// rendered again from the database (an edit after a click).
func TestRunbookStepCardNamesTheStep(t *testing.T) {
	h := newRBHarness(t, nil)
	h.start(restartBook(), "bob")
	c := h.plat.LastCard()
	if c.Intro != "" || c.Step == nil || c.Step.Runbook != "restart" || c.Step.ID != "restart" || c.Step.StartedBy != "bob" || c.Step.Attempt != 1 {
		t.Fatalf("card: intro %q, step %+v", c.Intro, c.Step)
	}
	if err := h.clickLast("alice", true); err != nil {
		t.Fatal(err)
	}
	if c := h.plat.LastCard(); c.Intro != "" || c.Step == nil || c.Step.Title() != "step restart of runbook restart" {
		t.Fatalf("card after the click: intro %q, step %+v", c.Intro, c.Step)
	}
}

// Stop in the thread of a run the model started: the waiting step is
// denied, nothing more runs, and the model gets the stopped run's summary.
func TestRunbookToolStoppedInThread(t *testing.T) {
	h := modelBooks(t)
	h.push(calls(tc("c1", "runbook__restart", `{"service":"api"}`)), text("Stopped, as asked."))
	h.turn("bob", "restart api")
	h.settle()
	h.turn("mallory", "stop")
	if n := len(h.model.Requests()); n != 1 || len(h.liveRuns()) != 1 {
		t.Fatalf("a stranger's stop: %d requests, %d live runs", n, len(h.liveRuns()))
	}
	h.turn("bob", "stop")
	h.settle()
	res := lastToolResults(t, h.lastRequest())
	if len(res) != 1 || !res[0].IsError || !strings.Contains(res[0].Content, "was stopped by bob at step restart") ||
		!strings.Contains(res[0].Content, "- restart (restart), attempt 1: denied") {
		t.Fatalf("results: %+v", res)
	}
	answered := posted(h.plat, "Stopped, as asked.")
	if len(h.extra["restart"].runs()) != 0 || !answered {
		t.Fatalf("restart ran %v; answered %v", h.extra["restart"].runs(), answered)
	}
}

// The summary the model gets is scrubbed like any result: a secret in a
// parameter or a step's result does not reach the model.
func TestRunbookToolSummaryScrubbed(t *testing.T) {
	const secret = "hunter2-s3cr3t"
	rbs, err := runbook.Compile("runbooks", []runbook.Config{{
		Name: "note",
		Parameters: map[string]any{"type": "object", "properties": map[string]any{"text": map[string]any{"type": "string"}},
			"required": []any{"text"}},
		Steps: []runbook.StepConfig{{ID: "a", Tool: "page", Args: map[string]any{"text": "{{ params.text }}"}}},
	}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	h := newRBHarness(t, func(c *bot.Config) {
		c.Runbooks = rbs
		c.Redact = func(s string) string { return strings.ReplaceAll(s, secret, "[REDACTED]") }
	})
	h.extra["page"].outs = []any{"paged with " + secret}
	h.push(calls(tc("c1", "runbook__note", `{"text":"`+secret+`"}`)), text("ok"))
	h.turn("bob", "note it")
	h.settle()
	res := lastToolResults(t, h.lastRequest())
	if len(res) != 1 || strings.Contains(res[0].Content, secret) || !strings.Contains(res[0].Content, "[REDACTED]") {
		t.Fatalf("results: %+v", res)
	}
}

// The recover job leaves a batch that waits on its live run alone: it is
// not taken up again (no card edit, no model request), and the run's end
// still completes it.
func TestRunbookToolRecoverLeavesWaitingBatch(t *testing.T) {
	h := modelBooks(t)
	h.push(calls(tc("c1", "deploy", `{}`), tc("c2", "runbook__restart", `{"service":"api"}`)), text("All done."))
	h.turn("bob", "deploy, then restart api")
	if err := h.click("alice", 1, true, ""); err != nil {
		t.Fatal(err)
	}
	h.settle()
	if len(h.liveRuns()) != 1 || len(h.plat.Cards) != 2 {
		t.Fatalf("runs %v, %d cards", h.liveRuns(), len(h.plat.Cards))
	}
	h.plat.Mu.Lock()
	updates := len(h.plat.Updates)
	h.plat.Mu.Unlock()
	for _, j := range h.bot.Jobs(time.Second) {
		if j.Name == bot.JobRecover {
			for range 3 {
				if err := j.Run(context.Background()); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	h.settle()
	h.plat.Mu.Lock()
	after := len(h.plat.Updates)
	h.plat.Mu.Unlock()
	if after != updates || len(h.model.Requests()) != 1 {
		t.Fatalf("the recover job took the waiting batch up: %d card updates, %d model requests", after-updates, len(h.model.Requests()))
	}
	step := h.plat.Cards[1].Calls[0].Ref // the run's step's card
	if err := h.bot.Decide(context.Background(), bot.Click{Platform: "test", Channel: "C1", User: "alice", Ref: step, Message: cardMsg(step), Allow: true}); err != nil {
		t.Fatal(err)
	}
	h.settle()
	res := lastToolResults(t, h.lastRequest())
	if len(res) != 2 || res[0].Content != "deploy done" || !strings.Contains(res[1].Content, "succeeded") || !posted(h.plat, "All done.") {
		t.Fatalf("results: %+v; answer %q", res, h.plat.LastPost())
	}
}

// posted reports whether the platform was sent text as a post (the run
// message's last rendering may come after the model's answer).
func posted(p *platform, text string) bool {
	p.Mu.Lock()
	defer p.Mu.Unlock()
	return slices.Contains(p.Posts, text)
}
