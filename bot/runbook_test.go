package bot_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/airlockhq/airlock/bot"
	"github.com/airlockhq/airlock/confirm"
	"github.com/airlockhq/airlock/model"
	"github.com/airlockhq/airlock/runbook"
	"github.com/airlockhq/airlock/tools"
)

// scriptTool answers its runs from a script (text, or an error), and
// records each run's idempotency key.
type scriptTool struct {
	name    string
	confirm bool
	risk    confirm.Risk // tools[].risk
	mu      sync.Mutex
	outs    []any // string or error, per run; the last repeats
	keys    []string
}

func (s *scriptTool) Spec() model.ToolSpec { return model.ToolSpec{Name: s.name} }
func (s *scriptTool) Confirm() bool        { return s.confirm }
func (s *scriptTool) Risk() confirm.Risk   { return s.risk }
func (s *scriptTool) Validate(args json.RawMessage) error {
	var m map[string]any
	if err := json.Unmarshal(args, &m); err != nil {
		return errors.New("invalid arguments: not a JSON object")
	}
	if _, bad := m["bad"]; bad {
		return errors.New("invalid arguments: /bad: not allowed")
	}
	return nil
}
func (s *scriptTool) Summary(args json.RawMessage) (string, error) {
	return s.name + " " + string(args), nil
}
func (s *scriptTool) Run(_ context.Context, _ json.RawMessage, key string) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.keys = append(s.keys, key)
	out := any(s.name + " done")
	if len(s.outs) > 0 {
		out = s.outs[0]
		if len(s.outs) > 1 {
			s.outs = s.outs[1:]
		}
	}
	if err, ok := out.(error); ok {
		return "", err
	}
	return out.(string), nil
}
func (s *scriptTool) runs() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.keys...)
}

type rbTools struct {
	base  bot.Tools
	extra map[string]*scriptTool
}

func (t rbTools) Get(name string) (tools.Tool, bool) {
	if s, ok := t.extra[name]; ok {
		return s, true
	}
	return t.base.Get(name)
}
func (t rbTools) Specs() []model.ToolSpec { return t.base.Specs() }

type rbHarness struct {
	*harness
	extra map[string]*scriptTool
}

func newRBHarness(t *testing.T, edit func(*bot.Config)) *rbHarness {
	return newRBHarnessOn(t, "", edit)
}

// newRBHarnessOn is newRBHarness on the database at path ("": a new
// SQLite file; a PostgreSQL DSN: that database).
func newRBHarnessOn(t *testing.T, path string, edit func(*bot.Config)) *rbHarness {
	extra := map[string]*scriptTool{
		"svc_status": {name: "svc_status"},
		"restart":    {name: "restart", confirm: true},
		"page":       {name: "page"},
	}
	h := newHarnessWith(t, path, func(c *bot.Config) {
		c.Tools = rbTools{base: c.Tools, extra: extra}
		c.Channels = bot.NewChannels([]bot.Channel{{Platform: "test", ID: "C1", Approvers: []string{"alice", "carol"}}})
		if edit != nil {
			edit(c)
		}
	})
	return &rbHarness{harness: h, extra: extra}
}

func restartBook() *runbook.Config {
	return &runbook.Config{
		Name: "restart",
		Steps: []runbook.StepConfig{
			{ID: "before", Tool: "svc_status", Args: map[string]any{"service": "{{ params.service }}"}},
			{ID: "restart", Tool: "restart", Args: map[string]any{"service": "{{ params.service }}"}},
			{ID: "after", Tool: "svc_status", Args: map[string]any{"service": "{{ params.service }}"}},
		},
		OnFailure: []runbook.StepConfig{{ID: "page", Tool: "page", Args: map[string]any{"text": "failed"}}},
	}
}

func (h *rbHarness) start(rb *runbook.Config, user string) string {
	h.t.Helper()
	id, err := h.bot.StartRunbook(context.Background(), bot.Thread{Platform: "test", Channel: "C1", Thread: "T1"}, user, rb, map[string]any{"service": "api"}, "", "")
	if err != nil {
		h.t.Fatalf("StartRunbook: %v", err)
	}
	h.settle()
	return id
}

// settle waits for the engine's background advances (after clicks).
func (h *rbHarness) settle() { h.bot.Runbooks().Wait() }

func (h *rbHarness) run(id string) (*confirm.RunbookRun, []confirm.RunbookStep) {
	h.t.Helper()
	r, err := h.store.RunbookRun(context.Background(), id)
	if err != nil {
		h.t.Fatal(err)
	}
	s, err := h.store.RunbookSteps(context.Background(), id)
	if err != nil {
		h.t.Fatal(err)
	}
	return r, s
}

func stepLine(steps []confirm.RunbookStep) string {
	var out []string
	for _, s := range steps {
		out = append(out, fmt.Sprintf("%s/%d:%s", s.StepID, s.Attempt, s.Status))
	}
	return strings.Join(out, " ")
}

func (h *rbHarness) clickLast(user string, allow bool) error {
	h.t.Helper()
	err := h.click(user, 1, allow, "")
	h.settle()
	return err
}

// A run with a gated middle step: the read-only steps run, the gated one
// posts the usual card and waits; Allow runs it with the key
// <run>/<step>/<attempt> and the run goes on to succeed. The model is
// never asked, and the steps never enter its history.
func TestRunbookGatedStepSucceeds(t *testing.T) {
	h := newRBHarness(t, nil)
	id := h.start(restartBook(), "bob")
	r, steps := h.run(id)
	if r.Status != confirm.RunbookRunning || stepLine(steps) != "before/1:succeeded restart/1:waiting" {
		t.Fatalf("before the decision: %s %s", r.Status, stepLine(steps))
	}
	if got := h.extra["restart"].runs(); len(got) != 0 {
		t.Fatalf("the gated step ran before its decision: %v", got)
	}
	if len(h.plat.Cards) != 1 || h.plat.Cards[0].Calls[0].Tool != "restart" {
		t.Fatalf("cards: %+v", h.plat.Cards)
	}
	if err := h.clickLast("alice", true); err != nil {
		t.Fatal(err)
	}
	r, steps = h.run(id)
	if r.Status != confirm.RunbookSucceeded || stepLine(steps) != "before/1:succeeded restart/1:succeeded after/1:succeeded" {
		t.Fatalf("after Allow: %s %s", r.Status, stepLine(steps))
	}
	if got := h.extra["restart"].runs(); len(got) != 1 || got[0] != id+"/restart/1" {
		t.Fatalf("restart ran %v, want once with %s/restart/1", got, id)
	}
	if got := h.extra["svc_status"].runs(); len(got) != 2 || got[0] != id+"/before/1" || got[1] != id+"/after/1" {
		t.Fatalf("svc_status ran %v", got)
	}
	if n := len(h.model.Requests()); n != 0 {
		t.Fatalf("the model was asked %d times by a runbook", n)
	}
	// The next turn's history holds none of the steps' calls or results.
	h.push(text("hi"))
	h.turn("bob", "hello")
	for _, m := range h.lastRequest().Messages {
		if len(m.ToolCalls) > 0 || len(m.Results) > 0 {
			t.Fatalf("a runbook step reached the model's history: %+v", m)
		}
	}
	if !strings.Contains(h.plat.LastPost(), "hi") {
		t.Fatalf("answer: %q", h.plat.LastPost())
	}
	posts := strings.Join(h.plat.Posts, "\n")
	if !strings.Contains(posts, "Runbook restart") || !strings.Contains(posts, "succeeded") {
		t.Fatalf("run message: %s", posts)
	}
}

// A deny stops the run: nothing after runs, and on_failure does not run
// for a deny.
func TestRunbookDeniedStops(t *testing.T) {
	h := newRBHarness(t, nil)
	id := h.start(restartBook(), "bob")
	if err := h.clickLast("alice", false); err != nil {
		t.Fatal(err)
	}
	r, steps := h.run(id)
	if r.Status != confirm.RunbookDenied || r.FailedStep != "restart" || stepLine(steps) != "before/1:succeeded restart/1:denied" {
		t.Fatalf("after Deny: %s %q %s", r.Status, r.FailedStep, stepLine(steps))
	}
	if len(h.extra["restart"].runs()) != 0 || len(h.extra["page"].runs()) != 0 || len(h.extra["svc_status"].runs()) != 1 {
		t.Fatal("a step ran after the deny")
	}
}

// Nobody decides in time: the run ends expired, nothing more runs.
func TestRunbookExpired(t *testing.T) {
	h := newRBHarness(t, nil)
	id := h.start(restartBook(), "bob")
	h.now.Add(int64(11 * time.Minute))
	if err := h.bot.Sweep(context.Background()); err != nil {
		t.Fatal(err)
	}
	h.settle()
	r, steps := h.run(id)
	if r.Status != confirm.RunbookExpired || stepLine(steps) != "before/1:succeeded restart/1:expired" {
		t.Fatalf("after expiry: %s %s", r.Status, stepLine(steps))
	}
	if len(h.extra["restart"].runs()) != 0 || len(h.extra["page"].runs()) != 0 {
		t.Fatal("a step ran after the expiry")
	}
}

// A failed step stops the run: the on_failure steps run and the run
// fails at that step.
func TestRunbookFailedRunsOnFailure(t *testing.T) {
	h := newRBHarness(t, nil)
	h.extra["svc_status"].outs = []any{errors.New("status endpoint says 500")}
	id := h.start(restartBook(), "bob")
	r, steps := h.run(id)
	if r.Status != confirm.RunbookFailed || r.FailedStep != "before" || stepLine(steps) != "before/1:failed page/1:succeeded" {
		t.Fatalf("failed run: %s %q %s", r.Status, r.FailedStep, stepLine(steps))
	}
	if len(h.extra["restart"].runs()) != 0 || len(h.plat.Cards) != 0 {
		t.Fatal("the gated step was asked for after a failure")
	}
	if !strings.Contains(steps[0].Result, "500") {
		t.Fatalf("failed step result: %q", steps[0].Result)
	}
}

// A step whose `when` is false is skipped; on_failure: continue goes on
// after a failure.
func TestRunbookSkippedAndContinue(t *testing.T) {
	h := newRBHarness(t, nil)
	rb := restartBook()
	rb.Steps[0].OnFailure = runbook.OnFailureContinue
	rb.Steps[1].When = `steps.before.outcome == "succeeded"`
	h.extra["svc_status"].outs = []any{errors.New("down"), "up"}
	id := h.start(rb, "bob")
	r, steps := h.run(id)
	if r.Status != confirm.RunbookSucceeded || stepLine(steps) != "before/1:failed restart/1:skipped after/1:succeeded" {
		t.Fatalf("run: %s %s", r.Status, stepLine(steps))
	}
	if len(h.extra["restart"].runs()) != 0 || len(h.plat.Cards) != 0 {
		t.Fatal("a skipped step ran or asked")
	}
}

// Retry until: a step re-runs after failing (`until` not holding) with the
// delay between attempts, driven by the runbooks job; the approval of a
// gated step covers its attempts, and its card says "up to N attempts".
// A retry giving until only has runbook.DefaultAttempts (3).
func TestRunbookRetryUntil(t *testing.T) {
	for _, attempts := range []int{3, 0} {
		t.Run(fmt.Sprint(attempts), func(t *testing.T) { testRetryUntil(t, attempts) })
	}
}

func testRetryUntil(t *testing.T, attempts int) {
	h := newRBHarness(t, nil)
	rb := &runbook.Config{Name: "wait", Steps: []runbook.StepConfig{{
		ID: "after", Tool: "restart", Args: map[string]any{}, Confirm: true,
		Retry: &runbook.RetryConfig{Attempts: attempts, Delay: 10 * time.Second, Until: `steps.after.result == "up"`},
	}}}
	h.extra["restart"].outs = []any{"down", "down", "up"}
	id := h.start(rb, "bob")
	if len(h.plat.Cards) != 1 || h.plat.Cards[0].Step == nil || !strings.Contains(h.plat.Cards[0].Step.Title(), "up to 3 attempts") {
		t.Fatalf("card: %+v", h.plat.Cards)
	}
	if err := h.clickLast("alice", true); err != nil {
		t.Fatal(err)
	}
	r, steps := h.run(id)
	if r.Status != confirm.RunbookRunning || stepLine(steps) != "after/1:failed" || r.DueAt == nil {
		t.Fatalf("after attempt 1: %s %s due %v", r.Status, stepLine(steps), r.DueAt)
	}
	job := func() {
		for _, j := range h.bot.Jobs(time.Second) {
			if j.Name == bot.JobRunbooks {
				if err := j.Run(context.Background()); err != nil {
					t.Fatal(err)
				}
			}
		}
		h.settle()
	}
	job() // not due yet: nothing runs
	if n := len(h.extra["restart"].runs()); n != 1 {
		t.Fatalf("attempt 2 ran before its delay (%d runs)", n)
	}
	h.now.Add(int64(10 * time.Second))
	job()
	h.now.Add(int64(10 * time.Second))
	job()
	r, steps = h.run(id)
	if r.Status != confirm.RunbookSucceeded || stepLine(steps) != "after/1:failed after/2:failed after/3:succeeded" {
		t.Fatalf("after the retries: %s %s", r.Status, stepLine(steps))
	}
	if got := h.extra["restart"].runs(); strings.Join(got, " ") != id+"/after/1 "+id+"/after/2 "+id+"/after/3" {
		t.Fatalf("runs: %v", got)
	}
	if len(h.plat.Cards) != 1 {
		t.Fatalf("%d cards: the approval did not cover the attempts", len(h.plat.Cards))
	}
}

// An unknown outcome halts the run; Mark done goes on as if it had
// succeeded. Only an approver may mark it; a second Mark done changes
// nothing.
func TestRunbookUnknownMarkDone(t *testing.T) {
	h := newRBHarness(t, nil)
	h.extra["svc_status"].outs = []any{fmt.Errorf("reset: %w", tools.ErrOutcomeUnknown), "up"}
	id := h.start(restartBook(), "bob")
	r, steps := h.run(id)
	if r.Status != confirm.RunbookHalted || r.FailedStep != "before" || stepLine(steps) != "before/1:unknown" {
		t.Fatalf("halted: %s %s", r.Status, stepLine(steps))
	}
	ctx := context.Background()
	if err := h.bot.MarkRunbookDone(ctx, id, "bob", nil); !errors.Is(err, bot.ErrNotAllowedToStop) {
		t.Fatalf("the requester marked it done: %v", err)
	}
	if err := h.bot.MarkRunbookDone(ctx, id, "alice", nil); err != nil {
		t.Fatal(err)
	}
	if err := h.bot.MarkRunbookDone(ctx, id, "alice", nil); !errors.Is(err, runbook.ErrRunEnded) {
		t.Fatalf("second Mark done: %v", err)
	}
	r, steps = h.run(id)
	if r.Status != confirm.RunbookRunning || stepLine(steps) != "before/1:succeeded restart/1:waiting" || steps[0].MarkedBy != "alice" {
		t.Fatalf("after Mark done: %s %s", r.Status, stepLine(steps))
	}
	if len(h.extra["svc_status"].runs()) != 1 {
		t.Fatal("the unknown step ran again")
	}
	if err := h.bot.MarkRunbookDone(ctx, "no-such-run", "alice", nil); !errors.Is(err, runbook.ErrNoSuchRun) {
		t.Fatalf("unknown run: %v", err)
	}
}

// Retry after an unknown outcome is a new attempt that needs approval as
// a new call (even of a tool the policy lets through).
func TestRunbookUnknownRetry(t *testing.T) {
	h := newRBHarness(t, nil)
	h.extra["svc_status"].outs = []any{fmt.Errorf("reset: %w", tools.ErrOutcomeUnknown), "up"}
	id := h.start(restartBook(), "bob")
	if err := h.bot.RetryRunbook(context.Background(), id, "alice", nil); err != nil {
		t.Fatal(err)
	}
	r, steps := h.run(id)
	if r.Status != confirm.RunbookRunning || stepLine(steps) != "before/1:unknown before/2:waiting" || len(h.plat.Cards) != 1 {
		t.Fatalf("after Retry: %s %s, %d cards", r.Status, stepLine(steps), len(h.plat.Cards))
	}
	if len(h.extra["svc_status"].runs()) != 1 {
		t.Fatal("the retry ran before its approval")
	}
	if err := h.clickLast("alice", true); err != nil {
		t.Fatal(err)
	}
	_, steps = h.run(id)
	if got := h.extra["svc_status"].runs(); len(got) != 2 || got[1] != id+"/before/2" {
		t.Fatalf("runs: %v (%s)", got, stepLine(steps))
	}
}

// Stop of a halted run ends it; nothing more runs.
func TestRunbookUnknownStop(t *testing.T) {
	h := newRBHarness(t, nil)
	h.extra["svc_status"].outs = []any{fmt.Errorf("reset: %w", tools.ErrOutcomeUnknown)}
	id := h.start(restartBook(), "bob")
	if err := h.bot.StopRunbook(context.Background(), id, "alice", nil); err != nil {
		t.Fatal(err)
	}
	r, _ := h.run(id)
	if r.Status != confirm.RunbookStopped || r.StoppedBy != "alice" {
		t.Fatalf("stopped: %+v", r)
	}
	if err := h.bot.RetryRunbook(context.Background(), id, "alice", nil); !errors.Is(err, runbook.ErrRunEnded) {
		t.Fatalf("Retry after Stop: %v", err)
	}
}

// The requester stops a run while its step waits: the step's call is
// denied, the card can no longer allow it, and nothing more runs. A
// stranger cannot stop it.
func TestRunbookStoppedByRequester(t *testing.T) {
	h := newRBHarness(t, nil)
	id := h.start(restartBook(), "bob")
	ctx := context.Background()
	if err := h.bot.StopRunbook(ctx, id, "mallory", nil); !errors.Is(err, bot.ErrNotAllowedToStop) {
		t.Fatalf("a stranger stopped the run: %v", err)
	}
	if err := h.bot.StopRunbook(ctx, id, "bob", nil); err != nil {
		t.Fatal(err)
	}
	h.settle()
	r, steps := h.run(id)
	if r.Status != confirm.RunbookStopped || stepLine(steps) != "before/1:succeeded restart/1:denied" {
		t.Fatalf("stopped: %s %s", r.Status, stepLine(steps))
	}
	_ = h.clickLast("alice", true) // too late: the call was decided by the stop
	if len(h.extra["restart"].runs()) != 0 || len(h.extra["svc_status"].runs()) != 1 {
		t.Fatal("a step ran after the stop")
	}
	if r, _ := h.run(id); r.Status != confirm.RunbookStopped {
		t.Fatalf("run after a late click: %s", r.Status)
	}
}

// A step's approvals raise the quorum: one allow does not run it, the
// second distinct approver's does.
func TestRunbookStepQuorum(t *testing.T) {
	h := newRBHarness(t, nil)
	rb := restartBook()
	rb.Steps[1].Approvals = 2
	id := h.start(rb, "bob")
	if err := h.clickLast("alice", true); err != nil {
		t.Fatal(err)
	}
	if len(h.extra["restart"].runs()) != 0 {
		t.Fatal("ran after one of two approvals")
	}
	if err := h.clickLast("carol", true); err != nil {
		t.Fatal(err)
	}
	r, _ := h.run(id)
	if r.Status != confirm.RunbookSucceeded || len(h.extra["restart"].runs()) != 1 {
		t.Fatalf("after two approvals: %s, runs %v", r.Status, h.extra["restart"].runs())
	}
}

// A step's confirm only adds: a tool the policy lets through waits for a
// person when the step says so.
func TestRunbookStepConfirmAdds(t *testing.T) {
	h := newRBHarness(t, nil)
	rb := restartBook()
	rb.Steps[0].Confirm = true
	id := h.start(rb, "bob")
	r, steps := h.run(id)
	if stepLine(steps) != "before/1:waiting" || len(h.extra["svc_status"].runs()) != 0 || len(h.plat.Cards) != 1 {
		t.Fatalf("a confirm step ran without a person: %s %s", r.Status, stepLine(steps))
	}
}

// Arguments the tool's schema refuses stop the run at that step, saying
// why; nothing runs.
func TestRunbookInvalidArgsStop(t *testing.T) {
	h := newRBHarness(t, nil)
	rb := restartBook()
	rb.Steps[0].Args = map[string]any{"bad": true}
	id := h.start(rb, "bob")
	r, steps := h.run(id)
	if r.Status != confirm.RunbookFailed || r.FailedStep != "before" || !strings.Contains(steps[0].Result, "/bad: not allowed") {
		t.Fatalf("invalid args: %s %q %+v", r.Status, r.FailedStep, steps)
	}
	if len(h.extra["svc_status"].runs()) != 0 {
		t.Fatal("a step with invalid arguments ran")
	}
}

func compiledBooks(t *testing.T) []*runbook.Runbook {
	t.Helper()
	rb := restartBook()
	rb.Parameters = map[string]any{
		"type": "object",
		"properties": map[string]any{
			"service": map[string]any{"type": "string", "enum": []any{"api", "web"}},
		},
		"required":             []any{"service"},
		"additionalProperties": false,
	}
	other := runbook.Config{Name: "other", Steps: []runbook.StepConfig{{ID: "a", Tool: "page", Args: map[string]any{"text": "x"}}}}
	rbs, err := runbook.Compile("runbooks", []runbook.Config{*rb, other}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return rbs
}

func (h *rbHarness) liveRuns() []confirm.RunbookRun {
	h.t.Helper()
	live, err := h.store.LiveRunbookRuns(context.Background())
	if err != nil {
		h.t.Fatal(err)
	}
	return live
}

// `run NAME k=v` in a mention starts the run without the model; a bad
// parameter answers one message naming it and what is allowed, an unknown
// name lists the runbooks offered, and nothing starts or runs.
func TestRunbookChatCommands(t *testing.T) {
	h := newRBHarness(t, func(c *bot.Config) { c.Runbooks = compiledBooks(t) })
	h.turn("bob", "run restart service=db")
	if !strings.Contains(h.plat.LastPost(), "service") || !strings.Contains(h.plat.LastPost(), "api") || len(h.liveRuns()) != 0 {
		t.Fatalf("bad parameter: %q, runs %v", h.plat.LastPost(), h.liveRuns())
	}
	h.turn("bob", "run restart")
	if !strings.Contains(h.plat.LastPost(), "service") || len(h.liveRuns()) != 0 {
		t.Fatalf("missing parameter: %q", h.plat.LastPost())
	}
	h.turn("bob", "run nosuch service=api")
	if p := h.plat.LastPost(); !strings.Contains(p, `"nosuch"`) || !strings.Contains(p, "- restart service=api|web") || !strings.Contains(p, "- other") {
		t.Fatalf("unknown runbook: %q", p)
	}
	h.turn("bob", "runbooks")
	if p := h.plat.LastPost(); !strings.Contains(p, "restart service=api|web") {
		t.Fatalf("list: %q", p)
	}
	if len(h.extra["svc_status"].runs()) != 0 || len(h.model.Requests()) != 0 {
		t.Fatal("a refused command ran a step or asked the model")
	}
	h.turn("bob", `run restart service="api"`)
	h.settle()
	live := h.liveRuns()
	if len(live) != 1 || string(live[0].Params) != `{"service":"api"}` || live[0].RequestedBy != "bob" {
		t.Fatalf("started: %+v", live)
	}
	if len(h.model.Requests()) != 0 || len(h.plat.Cards) != 1 {
		t.Fatalf("model asked %d times, %d cards", len(h.model.Requests()), len(h.plat.Cards))
	}
	h.turn("mallory", "stop")
	if !strings.Contains(h.plat.LastPost(), "Only the person who started") {
		t.Fatalf("stranger's stop: %q", h.plat.LastPost())
	}
	h.turn("bob", "stop")
	h.settle()
	if r, _ := h.run(live[0].ID); r.Status != confirm.RunbookStopped {
		t.Fatalf("after stop: %s", r.Status)
	}
	if len(h.extra["restart"].runs()) != 0 || len(h.model.Requests()) != 0 {
		t.Fatal("the stopped step ran, or the model was asked")
	}
}

// rbHarnessIn is a runbook harness with the compiled runbooks and the one
// channel ch.
func rbHarnessIn(t *testing.T, ch bot.Channel) *rbHarness {
	return newRBHarness(t, func(c *bot.Config) {
		c.Runbooks = compiledBooks(t)
		c.Channels = bot.NewChannels([]bot.Channel{ch})
	})
}

// channels[].runbooks limits what is offered: a runbook not offered there
// is unknown there.
func TestRunbookOfferedPerChannel(t *testing.T) {
	h := rbHarnessIn(t, bot.Channel{Platform: "test", ID: "C1", Approvers: []string{"alice"}, Runbooks: []string{"other"}})
	h.turn("bob", "run restart service=api")
	if p := h.plat.LastPost(); !strings.Contains(p, `no runbook "restart"`) || strings.Contains(p, "- restart") || !strings.Contains(p, "- other") {
		t.Fatalf("not offered: %q", p)
	}
	if len(h.liveRuns()) != 0 || len(h.extra["svc_status"].runs()) != 0 {
		t.Fatal("a runbook not offered here started")
	}
}

// A person who may not ask in the channel cannot start a run.
func TestRunbookNeedsAdmission(t *testing.T) {
	h := rbHarnessIn(t, bot.Channel{Platform: "test", ID: "C1", Approvers: []string{"alice"}, Requesters: []string{"alice"}})
	h.turn("bob", "run restart service=api")
	if len(h.liveRuns()) != 0 || len(h.extra["svc_status"].runs()) != 0 {
		t.Fatal("someone who may not ask started a run")
	}
}

// restartTools are the tools of the restart runbook, counting runs.
func restartTools() map[string]*scriptTool {
	return map[string]*scriptTool{"svc_status": {name: "svc_status"}, "restart": {name: "restart", confirm: true}, "page": {name: "page"}}
}

// rbProcess is one process of a test that restarts the bot on the
// database at path: the tools in extra, one channel, and the compiled
// runbooks when books.
func rbProcess(t *testing.T, path string, extra map[string]*scriptTool, books bool) *rbHarness {
	return &rbHarness{harness: newHarnessWith(t, path, func(c *bot.Config) {
		c.Tools = rbTools{base: c.Tools, extra: extra}
		c.Channels = bot.NewChannels([]bot.Channel{{Platform: "test", ID: "C1", Approvers: []string{"alice"}}})
		if books {
			c.Runbooks = compiledBooks(t)
		}
	}), extra: extra}
}

// A restart while a step's card waits: a new process on the same
// database finds the run where it was; the card still works, the run
// finishes, and each step's tool ran once.
func TestRunbookResumesAfterRestart(t *testing.T) {
	path := t.TempDir() + "/airlock.db"
	extra := restartTools()
	first := rbProcess(t, path, extra, false)
	id := first.start(restartBook(), "bob")
	cardRef := first.plat.Cards[0].Calls[0].Ref
	// The first process is gone (nothing of it is used again).
	second := rbProcess(t, path, extra, false)
	if err := second.bot.Recover(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, j := range second.bot.Jobs(time.Second) {
		if j.Name == bot.JobRunbooks {
			if err := j.Run(context.Background()); err != nil {
				t.Fatal(err)
			}
		}
	}
	if r, steps := second.run(id); r.Status != confirm.RunbookRunning || stepLine(steps) != "before/1:succeeded restart/1:waiting" {
		t.Fatalf("after the restart: %s %s", r.Status, stepLine(steps))
	}
	if err := second.bot.Decide(context.Background(), bot.Click{Platform: "test", Channel: "C1", User: "alice", Ref: cardRef, Message: cardMsg(cardRef), Allow: true}); err != nil {
		t.Fatal(err)
	}
	second.settle()
	r, steps := second.run(id)
	if r.Status != confirm.RunbookSucceeded || stepLine(steps) != "before/1:succeeded restart/1:succeeded after/1:succeeded" {
		t.Fatalf("after Allow: %s %s", r.Status, stepLine(steps))
	}
	if got := extra["restart"].runs(); len(got) != 1 {
		t.Fatalf("restart ran %v", got)
	}
	if got := extra["svc_status"].runs(); len(got) != 2 {
		t.Fatalf("svc_status ran %v", got)
	}
}

// A step that was running when the process died is unknown after the
// restart, and the run halts there: it is never run again on its own.
func TestRunbookRunningStepUnknownAfterRestart(t *testing.T) {
	path := t.TempDir() + "/airlock.db"
	extra := restartTools()
	first := rbProcess(t, path, extra, false)
	id := first.start(restartBook(), "bob")
	// The approved call's run started, and the process died during it.
	_, steps := first.run(id)
	ctx := context.Background()
	if _, err := first.store.Decide(ctx, confirm.Decide{BatchID: steps[1].BatchID, Key: steps[1].StepKey.IdempotencyKey(), Status: confirm.DecisionAllowed, By: "alice"}); err != nil {
		t.Fatal(err)
	}
	if ok, err := first.store.ClaimBatch(ctx, steps[1].BatchID, "dead"); err != nil || !ok {
		t.Fatalf("claim: %v %v", ok, err)
	}
	if ok, err := first.store.StartRun(ctx, steps[1].BatchID, steps[1].StepKey.IdempotencyKey()); err != nil || !ok {
		t.Fatalf("start run: %v %v", ok, err)
	}
	second := rbProcess(t, path, extra, false)
	if err := second.bot.Recover(ctx); err != nil {
		t.Fatal(err)
	}
	second.settle()
	r, steps := second.run(id)
	if r.Status != confirm.RunbookHalted || stepLine(steps) != "before/1:succeeded restart/1:unknown" {
		t.Fatalf("after the restart: %s %s", r.Status, stepLine(steps))
	}
	if len(extra["restart"].runs()) != 0 {
		t.Fatal("the step that was running ran again")
	}
}

// Step arguments see the run: its id, requester, platform, channel and,
// in on_failure steps, the step it failed at.
func TestRunbookRunVariables(t *testing.T) {
	h := newRBHarness(t, nil)
	h.extra["svc_status"].outs = []any{errors.New("down")}
	rb := restartBook()
	rb.OnFailure[0].Args = map[string]any{"text": "{{ run.name }} by {{ run.requester }} in {{ run.platform }}/{{ run.channel }} failed at {{ run.failed_step }}"}
	id := h.start(rb, "bob")
	r, _ := h.run(id)
	if r.Status != confirm.RunbookFailed {
		t.Fatalf("run: %s", r.Status)
	}
	ev, _ := h.store.AuditEvents(context.Background(), confirm.AuditFilter{})
	found := false
	for _, e := range ev {
		if e.Kind == confirm.AuditToolCall && e.Tool == "page" && strings.Contains(e.Detail, "restart by bob in test/C1 failed at before") {
			found = true
		}
	}
	if !found {
		t.Fatal("the on_failure step's arguments lack the run's variables")
	}
}

// An "Allow for" grant made on one step's card covers a later step of the
// same tool in that thread: it runs without a card.
func TestRunbookGrantCoversLaterStep(t *testing.T) {
	h := newRBHarness(t, func(c *bot.Config) { c.GrantFor = time.Hour })
	rb := &runbook.Config{Name: "twice", Steps: []runbook.StepConfig{
		{ID: "first", Tool: "restart", Args: map[string]any{"n": 1}},
		{ID: "second", Tool: "restart", Args: map[string]any{"n": 2}},
	}}
	id := h.start(rb, "bob")
	card := h.plat.LastCard()
	if err := h.bot.Decide(context.Background(), bot.Click{Platform: "test", Channel: "C1", User: "alice", Ref: card.Calls[0].Ref, Message: cardMsg(card.Calls[0].Ref), Allow: true, Grant: true}); err != nil {
		t.Fatal(err)
	}
	h.settle()
	r, steps := h.run(id)
	if r.Status != confirm.RunbookSucceeded || stepLine(steps) != "first/1:succeeded second/1:succeeded" {
		t.Fatalf("run: %s %s", r.Status, stepLine(steps))
	}
	if len(h.plat.Cards) != 1 || len(h.extra["restart"].runs()) != 2 {
		t.Fatalf("%d cards, runs %v: the grant did not cover the later step", len(h.plat.Cards), h.extra["restart"].runs())
	}
}
