package bot_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/airlockhq/airlock/bot"
	"github.com/airlockhq/airlock/telemetry"
	"github.com/airlockhq/airlock/tools"
)

// Text that must never reach a span: arguments, the user's words, the
// model's words, tool output.
const (
	traceArgSecret  = "argsecret-7f3a9c"
	traceUserText   = "usertext-please-deploy-4b1e"
	traceModelText  = "modeltext-deployed-9d2c"
	traceToolOutput = " done" // fakeTool answers "<name> done"
)

// tracedHarness is a harness whose bot and model record spans in memory.
func tracedHarness(t *testing.T, extra map[string]tools.Tool, edit func(*bot.Config)) (*harness, *tracetest.InMemoryExporter) {
	t.Helper()
	return tracedHarnessAt(t, "", extra, edit)
}

func tracedHarnessAt(t *testing.T, path string, extra map[string]tools.Tool, edit func(*bot.Config)) (*harness, *tracetest.InMemoryExporter) {
	t.Helper()
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	tracer := tp.Tracer(telemetry.TracerName)
	h := newHarnessWith(t, path, func(c *bot.Config) {
		if extra != nil {
			c.Tools = withExtra{c.Tools, extra}
		}
		c.Tracer = tracer
		c.Model = telemetry.Provider(c.Model, tracer, "scripted", "m-1")
		if edit != nil {
			edit(c)
		}
	})
	return h, exp
}

func spansNamed(exp *tracetest.InMemoryExporter, name string) tracetest.SpanStubs {
	var out tracetest.SpanStubs
	for _, s := range exp.GetSpans() {
		if s.Name == name {
			out = append(out, s)
		}
	}
	return out
}

func oneSpan(t *testing.T, exp *tracetest.InMemoryExporter, name string) tracetest.SpanStub {
	t.Helper()
	ss := spansNamed(exp, name)
	if len(ss) != 1 {
		t.Fatalf("%d spans %q, want 1 (all: %v)", len(ss), name, spanNames(exp))
	}
	return ss[0]
}

func spanNames(exp *tracetest.InMemoryExporter) []string {
	var out []string
	for _, s := range exp.GetSpans() {
		out = append(out, s.Name)
	}
	return out
}

func attrOf(s tracetest.SpanStub, key attribute.Key) (attribute.Value, bool) {
	for _, kv := range s.Attributes {
		if kv.Key == key {
			return kv.Value, true
		}
	}
	return attribute.Value{}, false
}

// wantAttrs checks string and int attributes of a span.
func wantAttrs(t *testing.T, s tracetest.SpanStub, want map[attribute.Key]any) {
	t.Helper()
	for k, w := range want {
		v, ok := attrOf(s, k)
		if !ok {
			t.Errorf("%s: no attribute %s", s.Name, k)
			continue
		}
		var got any
		switch v.Type() {
		case attribute.INT64:
			got = int(v.AsInt64())
		default:
			got = v.String()
		}
		if got != w {
			t.Errorf("%s: %s = %v, want %v", s.Name, k, got, w)
		}
	}
}

func childOf(t *testing.T, child, parent tracetest.SpanStub) {
	t.Helper()
	if child.Parent.SpanID() != parent.SpanContext.SpanID() || child.SpanContext.TraceID() != parent.SpanContext.TraceID() {
		t.Errorf("span %s is not a child of %s", child.Name, parent.Name)
	}
}

func linksTo(s tracetest.SpanStub, target tracetest.SpanStub) bool {
	for _, l := range s.Links {
		if l.SpanContext.SpanID() == target.SpanContext.SpanID() {
			return true
		}
	}
	return false
}

// noContentInSpans fails when any span's name, attribute, status, event or
// link attribute holds one of the texts.
func noContentInSpans(t *testing.T, exp *tracetest.InMemoryExporter, texts ...string) {
	t.Helper()
	for _, s := range exp.GetSpans() {
		var parts []string
		parts = append(parts, s.Name, s.Status.Description)
		for _, kv := range s.Attributes {
			parts = append(parts, string(kv.Key)+"="+kv.Value.String())
		}
		for _, e := range s.Events {
			parts = append(parts, e.Name)
			for _, kv := range e.Attributes {
				parts = append(parts, kv.Value.String())
			}
		}
		for _, l := range s.Links {
			for _, kv := range l.Attributes {
				parts = append(parts, kv.Value.String())
			}
		}
		all := strings.Join(parts, "\n")
		for _, x := range texts {
			if strings.Contains(all, x) {
				t.Errorf("span %s carries %q:\n%s", s.Name, x, all)
			}
		}
	}
}

func TestTracesOfAGatedTurnClickAndRun(t *testing.T) {
	h, exp := tracedHarness(t, nil, nil)
	h.push(calls(tc("c1", "status", `{"svc":"`+traceArgSecret+`"}`), tc("c2", "deploy", `{"token":"`+traceArgSecret+`"}`)),
		text(traceModelText))
	h.turn("bob", traceUserText)

	turn := oneSpan(t, exp, bot.SpanTurn)
	conv := conversationOf(t, h)
	wantAttrs(t, turn, map[attribute.Key]any{
		bot.AttrPlatform: "test", bot.AttrChannel: "C1", bot.AttrRequester: "bob", bot.AttrConversationID: int(conv.ID),
	})
	if turn.Status.Code == codes.Error {
		t.Errorf("turn status %+v", turn.Status)
	}
	chat := oneSpan(t, exp, "chat m-1")
	childOf(t, chat, turn)
	if chat.SpanKind != trace.SpanKindClient {
		t.Errorf("chat span kind %v", chat.SpanKind)
	}
	wantAttrs(t, chat, map[attribute.Key]any{
		telemetry.AttrGenAIOperation: "chat", telemetry.AttrGenAISystem: "scripted", telemetry.AttrGenAIRequestModel: "m-1",
	})
	if n := len(spansNamed(exp, bot.SpanToolRun)) + len(spansNamed(exp, bot.SpanApprovalWait)); n != 0 {
		t.Fatalf("runs or waits recorded before any decision: %v", spanNames(exp))
	}

	batchID := h.plat.LastCard().BatchID
	paused := time.Unix(0, h.now.Load()).UTC()
	h.now.Add(int64(90 * time.Second))
	exp.Reset()
	if err := h.click("alice", 2, true, ""); err != nil {
		t.Fatal(err)
	}

	wait := oneSpan(t, exp, bot.SpanApprovalWait)
	wantAttrs(t, wait, map[attribute.Key]any{
		bot.AttrBatchID: batchID, bot.AttrCallKey: "c2", bot.AttrTool: "deploy", bot.AttrDecisionOutcome: "allowed",
		bot.AttrDecidedBy: "alice", bot.AttrDecisionID: batchID + "/c2", bot.AttrRequester: "bob",
		bot.AttrApprovalsRequired: 1, bot.AttrApprovalsVotes: 1,
	})
	if !wait.StartTime.Equal(paused) || wait.EndTime.Sub(wait.StartTime) != 90*time.Second {
		t.Errorf("wait from %v to %v, want the pause %v and 90s", wait.StartTime, wait.EndTime, paused)
	}

	resume := oneSpan(t, exp, bot.SpanResume)
	wantAttrs(t, resume, map[attribute.Key]any{
		bot.AttrResumeTrigger: "click", bot.AttrBatchID: batchID, bot.AttrPlatform: "test", bot.AttrChannel: "C1",
		bot.AttrConversationID: int(conv.ID),
	})
	if !linksTo(resume, wait) {
		t.Errorf("resume does not link to the approval wait: %+v", resume.Links)
	}

	runs := spansNamed(exp, bot.SpanToolRun)
	if len(runs) != 2 {
		t.Fatalf("tool runs %v", spanNames(exp))
	}
	for i, want := range []struct{ tool, key, by string }{{"status", "c1", bot.PolicyActor}, {"deploy", "c2", "alice"}} {
		r := runs[i]
		childOf(t, r, resume)
		wantAttrs(t, r, map[attribute.Key]any{
			bot.AttrTool: want.tool, bot.AttrBatchID: batchID, bot.AttrCallKey: want.key,
			bot.AttrDecisionID: batchID + "/" + want.key, bot.AttrDecidedBy: want.by, bot.AttrRunStatus: "succeeded",
		})
		if r.Status.Code == codes.Error {
			t.Errorf("%s run status %+v", want.tool, r.Status)
		}
	}
	childOf(t, oneSpan(t, exp, "chat m-1"), resume)
	noContentInSpans(t, exp, traceArgSecret, traceUserText, traceModelText, traceToolOutput, "svc", "token")
}

func TestTracesOfFailedAndUnknownRuns(t *testing.T) {
	failing := &scriptedTool{fakeTool: fakeTool{Name: "flaky"}, outcomes: []func() (string, error){
		func() (string, error) { return "", errorString("exit status 1: " + traceArgSecret) },
		unknownErr,
	}}
	h, exp := tracedHarness(t, map[string]tools.Tool{"flaky": failing}, nil)
	h.push(calls(tc("a", "flaky", `{"n":1}`), tc("b", "flaky", `{"n":2}`)), text("hm"))
	h.turn("bob", "flaky twice")

	turn := oneSpan(t, exp, bot.SpanTurn)
	runs := spansNamed(exp, bot.SpanToolRun)
	if len(runs) != 2 {
		t.Fatalf("runs: %v", spanNames(exp))
	}
	for i, want := range []string{"failed", "unknown"} {
		childOf(t, runs[i], turn)
		wantAttrs(t, runs[i], map[attribute.Key]any{bot.AttrRunStatus: want, bot.AttrDecidedBy: bot.PolicyActor})
		if runs[i].Status.Code != codes.Error {
			t.Errorf("%s run: status %+v, want error", want, runs[i].Status)
		}
	}
	noContentInSpans(t, exp, traceArgSecret, "connection reset")
}

type errorString string

func (e errorString) Error() string { return string(e) }

func TestTracesOfExpiryAndAbandon(t *testing.T) {
	h, exp := tracedHarness(t, nil, nil)
	ctx := context.Background()

	// Expiry: the sweep records the wait and continues under a resume span.
	h.push(calls(tc("x", "deploy", `{}`)), text("expired, ok"))
	h.turn("bob", "deploy")
	expired := h.plat.LastCard().BatchID
	h.now.Add(int64(11 * time.Minute))
	exp.Reset()
	if err := h.bot.Sweep(ctx); err != nil {
		t.Fatal(err)
	}
	wait := oneSpan(t, exp, bot.SpanApprovalWait)
	wantAttrs(t, wait, map[attribute.Key]any{
		bot.AttrBatchID: expired, bot.AttrCallKey: "x", bot.AttrTool: "deploy", bot.AttrDecisionOutcome: "expired",
		bot.AttrDecidedBy: bot.SystemActor, bot.AttrApprovalsVotes: 0, bot.AttrApprovalsRequired: 1,
	})
	if d := wait.EndTime.Sub(wait.StartTime); d != 11*time.Minute {
		t.Errorf("expired wait lasted %v", d)
	}
	resume := oneSpan(t, exp, bot.SpanResume)
	wantAttrs(t, resume, map[attribute.Key]any{bot.AttrResumeTrigger: "expiry", bot.AttrBatchID: expired})
	if !linksTo(resume, wait) {
		t.Error("the expiry's resume does not link to the wait")
	}
	childOf(t, oneSpan(t, exp, "chat m-1"), resume)

	// Abandon: a new message resolves the waiting card; the wait links to
	// the turn that abandoned it.
	exp.Reset()
	h.push(calls(tc("y", "deploy", `{}`), tc("z", "deploy", `{}`)), text("moving on"))
	h.turn("bob", "deploy twice")
	posted := h.plat.Cards[len(h.plat.Cards)-1] // lastCard prefers the expired card's update
	abandoned := posted.BatchID
	if err := h.bot.Decide(ctx, bot.Click{Platform: "test", Channel: "C1", User: "alice", Ref: posted.Calls[0].Ref, Message: cardMsg(posted.Calls[0].Ref), Allow: true}); err != nil {
		t.Fatal(err) // y allowed; z still waits
	}
	if w := spansNamed(exp, bot.SpanApprovalWait); len(w) != 1 {
		t.Fatalf("waits after one click: %d", len(w))
	}
	exp.Reset()
	h.turn("bob", "never mind")
	wait = oneSpan(t, exp, bot.SpanApprovalWait) // z only: y was decided by its click
	wantAttrs(t, wait, map[attribute.Key]any{
		bot.AttrBatchID: abandoned, bot.AttrCallKey: "z", bot.AttrDecisionOutcome: "abandoned", bot.AttrDecidedBy: bot.SystemActor,
	})
	turn := oneSpan(t, exp, bot.SpanTurn)
	if !linksTo(wait, turn) {
		t.Error("the abandoned wait does not link to the turn that abandoned it")
	}
	if wait.Parent.IsValid() {
		t.Error("an approval wait has a parent; it is its own trace")
	}
}

func TestApprovalWaitWithSeveralApprovals(t *testing.T) {
	h, exp := tracedHarness(t, nil, func(c *bot.Config) {
		c.DefaultApprovals = 2
		c.Channels = bot.NewChannels([]bot.Channel{{Platform: "test", ID: "C1", Approvers: []string{"alice", "carol"}}})
	})
	h.push(calls(tc("d", "deploy", `{}`)), text("deployed"))
	h.turn("bob", "deploy")
	if err := h.click("alice", 1, true, ""); err != nil {
		t.Fatal(err)
	}
	if w := spansNamed(exp, bot.SpanApprovalWait); len(w) != 0 {
		t.Fatal("a wait was recorded at the first of two approvals")
	}
	if err := h.click("carol", 1, true, ""); err != nil {
		t.Fatal(err)
	}
	wait := oneSpan(t, exp, bot.SpanApprovalWait)
	wantAttrs(t, wait, map[attribute.Key]any{
		bot.AttrDecidedBy: "carol", bot.AttrApprovalsVotes: 2, bot.AttrApprovalsRequired: 2, bot.AttrDecisionOutcome: "allowed",
	})
	run := oneSpan(t, exp, bot.SpanToolRun)
	childOf(t, run, oneSpan(t, exp, bot.SpanResume))
}

func TestNoTracerRecordsNothing(t *testing.T) {
	h := newHarness(t, "") // Config.Tracer nil
	h.push(calls(tc("c", "deploy", `{}`)), text("done"))
	h.turn("bob", "deploy")
	if err := h.click("alice", 1, true, ""); err != nil {
		t.Fatal(err)
	}
	if h.tools["deploy"].Runs.Load() != 1 {
		t.Fatal("the run did not happen without a tracer")
	}
}

func TestTracesOfRecovery(t *testing.T) {
	path := filepath.Join(t.TempDir(), "airlock.db")
	type crash struct{}
	h := newHarnessWith(t, path, func(c *bot.Config) {
		c.Trace = func(point string) {
			if point == "decided" {
				panic(crash{})
			}
		}
	})
	h.push(calls(tc("r1", "deploy", `{}`), tc("r2", "deploy", `{}`)))
	h.turn("bob", "deploy twice")
	batchID := h.plat.LastCard().BatchID
	if err := h.click("alice", 1, true, ""); err != nil {
		t.Fatal(err)
	}
	func() {
		defer func() {
			if r := recover(); r != (crash{}) {
				t.Fatalf("recovered %v", r)
			}
		}()
		// Decided, then the process "dies".
		_ = h.click("alice", 2, true, "")
	}()
	// As a process dies that had claimed the batch and started r1's run.
	ctx := context.Background()
	if ok, err := h.store.ClaimBatch(ctx, batchID, "dead"); err != nil || !ok {
		t.Fatalf("claim: %v %v", ok, err)
	}
	if ok, err := h.store.StartRun(ctx, batchID, "r1"); err != nil || !ok {
		t.Fatalf("start r1: %v %v", ok, err)
	}

	h2, exp := tracedHarnessAt(t, path, nil, nil)
	h2.now.Add(int64(bot.LeaseTTL + time.Second)) // the dead worker's lease lapsed
	h2.push(text("deployed after recovery"))
	if err := h2.bot.Recover(ctx); err != nil {
		t.Fatal(err)
	}
	resume := oneSpan(t, exp, bot.SpanResume)
	wantAttrs(t, resume, map[attribute.Key]any{bot.AttrResumeTrigger: "recovery", bot.AttrBatchID: batchID})
	// r1 is unknown (never run again); r2 runs.
	run := oneSpan(t, exp, bot.SpanToolRun)
	childOf(t, run, resume)
	wantAttrs(t, run, map[attribute.Key]any{bot.AttrDecidedBy: "alice", bot.AttrRunStatus: "succeeded", bot.AttrDecisionID: batchID + "/r2"})
	childOf(t, oneSpan(t, exp, "chat m-1"), resume)
	if n := h2.tools["deploy"].Runs.Load(); n != 1 {
		t.Fatalf("recovery ran %d calls, want 1 (r2)", n)
	}
}
