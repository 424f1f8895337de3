package chaos

import (
	"encoding/json"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/airlockhq/airlock/adapters/slack/slacktest"
	"github.com/airlockhq/airlock/confirm"
)

// TestScheduleReplays: a seed draws the same faults and kills again, the
// stretches never overlap and stay inside the soak.
func TestScheduleReplays(t *testing.T) {
	start := time.Unix(1800000000, 0)
	draw := func(seed uint64) *schedule {
		return newSchedule(rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)), start, 5*time.Minute, 30*time.Second, true)
	}
	a, b := draw(42), draw(42)
	if !reflect.DeepEqual(a.faults, b.faults) || !reflect.DeepEqual(a.kills, b.kills) {
		t.Fatal("the same seed drew another schedule")
	}
	if reflect.DeepEqual(a.faults, draw(43).faults) {
		t.Fatal("another seed drew the same schedule")
	}
	if len(a.faults) < 10 || len(a.kills) < 7 {
		t.Fatalf("5 minutes got %d stretches and %d kills", len(a.faults), len(a.kills))
	}
	end := start.Add(5 * time.Minute)
	for i, f := range a.faults {
		if f.from.Before(start) || f.to.After(end) || !f.to.After(f.from) {
			t.Fatalf("stretch %d %v outside the soak", i, f)
		}
		if i > 0 && f.from.Before(a.faults[i-1].to) {
			t.Fatalf("stretches %d and %d overlap", i-1, i)
		}
		if got := a.at(f.from.Add(f.to.Sub(f.from) / 2)); got != f {
			t.Fatalf("at the middle of stretch %d: %v", i, got)
		}
	}
	if got := a.at(a.faults[0].from.Add(-time.Millisecond)); got.kind != faultNone {
		t.Fatalf("before the first stretch: %v", got.kind)
	}
	kinds := map[faultKind]bool{}
	for _, f := range a.faults {
		kinds[f.kind] = true
	}
	for _, k := range []faultKind{faultSlack429, faultSlack5xx, faultToolSlow, faultDBAway} {
		if !kinds[k] {
			t.Errorf("5 minutes drew no %s", k)
		}
	}
}

// checkWorld is a world with a fake Slack holding one card message.
func checkWorld(t *testing.T, blocks string) (*world, msgKey) {
	t.Helper()
	w := &world{slack: newFakeSlack(&schedule{}), tool: newToolServer(&schedule{}), report: &Report{}}
	k := msgKey{"C0SOAK00", "1800000000.000001"}
	w.slack.seen(slacktest.Call{Method: "chat.postMessage", TS: k.ts, Raw: map[string]json.RawMessage{
		"channel": []byte(`"C0SOAK00"`), "blocks": []byte(blocks)}})
	return w, k
}

func cardBlocks(icons ...string) string {
	var els []string
	for _, i := range icons {
		els = append(els, `{"type":"emoji","name":"`+i+`"}`)
	}
	return `[{"type":"rich_text","block_id":"call_1","elements":[{"type":"rich_text_section","elements":[{"type":"text","text":"1. "}]},` +
		`{"type":"rich_text_section","elements":[` + strings.Join(els, ",") + `]}]}]`
}

// TestCheckCard: a card still showing a waiting call, or not yet its run,
// is a violation; one showing the stored decision and run is not.
func TestCheckCard(t *testing.T) {
	b := &confirm.Batch{ID: "b1", Status: confirm.BatchDone, Calls: []confirm.Call{
		{Key: "call_0", Position: 0, Decision: confirm.DecisionAllowed, Run: confirm.RunSucceeded}}}
	for name, tc := range map[string]struct {
		blocks string
		bad    bool
	}{
		"converged":      {cardBlocks("white_check_mark", "heavy_check_mark"), false},
		"still waiting":  {cardBlocks("hourglass_flowing_sand"), true},
		"run not shown":  {cardBlocks("white_check_mark"), true},
		"wrong decision": {cardBlocks("no_entry_sign"), true},
		"offers Allow": {`[{"type":"rich_text","block_id":"call_1","elements":[{"type":"rich_text_section","elements":[{"type":"emoji","name":"white_check_mark"},{"type":"emoji","name":"heavy_check_mark"}]}]},` +
			`{"type":"actions","elements":[{"type":"button","action_id":"airlock_allow","value":"b1.0.0"}]}]`, true},
	} {
		t.Run(name, func(t *testing.T) {
			w, k := checkWorld(t, tc.blocks)
			w.checkCard(w.report, b, confirm.CardMain, k)
			if got := len(w.report.Violations) > 0; got != tc.bad {
				t.Fatalf("violations %q, want some: %v", w.report.Violations, tc.bad)
			}
		})
	}
}

// TestCheckRuns: a key run twice, a run of a call nobody allowed, a call
// left pending and a decided batch not ended are each a violation.
func TestCheckRuns(t *testing.T) {
	ok := &confirm.Batch{ID: "b1", Status: confirm.BatchDone, Calls: []confirm.Call{
		{Key: "k", IdempotencyKey: "b1/k", Decision: confirm.DecisionAllowed, Run: confirm.RunSucceeded},
		{Key: "d", IdempotencyKey: "b1/d", Decision: confirm.DecisionDenied, Run: confirm.RunNotStarted}}}
	for name, tc := range map[string]struct {
		batch *confirm.Batch
		runs  map[string]int
		want  string
	}{
		"fine":        {ok, map[string]int{"b1/k": 1}, ""},
		"twice":       {ok, map[string]int{"b1/k": 2}, "ran 2 times"},
		"not allowed": {ok, map[string]int{"b1/k": 1, "b1/d": 1}, "no allowed call"},
		"pending": {&confirm.Batch{ID: "b2", Status: confirm.BatchPending, Calls: []confirm.Call{
			{Key: "p", Decision: confirm.DecisionPending}}}, nil, "still pending"},
		"not ended": {&confirm.Batch{ID: "b3", Status: confirm.BatchDecided, Calls: []confirm.Call{
			{Key: "a", IdempotencyKey: "b3/a", Decision: confirm.DecisionAllowed, Run: confirm.RunNotStarted}}}, nil, "its run is not_started"},
	} {
		t.Run(name, func(t *testing.T) {
			w := &world{tool: newToolServer(&schedule{}), report: &Report{}}
			w.tool.runs = tc.runs
			w.checkRuns(w.report, map[string]*confirm.Batch{tc.batch.ID: tc.batch})
			got := strings.Join(w.report.Violations, "\n")
			if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
				t.Fatalf("violations %q, want %q", got, tc.want)
			}
		})
	}
}

// TestCheckClicks: an approver's click answered with nothing private and
// missing from the audit is a violation; a stranger in the audit is one.
func TestCheckClicks(t *testing.T) {
	at := time.Now()
	c := click{user: approvers[0], action: actionAllow, batch: "b1", at: at, answered: at, status: 200, approver: true,
		where: msgKey{"C0SOAK00", "1800000000.000001"}, thread: "1700000000.000001"}
	w := &world{slack: newFakeSlack(&schedule{}), report: &Report{}, clicks: []click{c}}
	w.checkClicks(w.report, nil)
	if len(w.report.Violations) != 1 {
		t.Fatalf("a lost click: violations %q", w.report.Violations)
	}
	w.report = &Report{}
	w.checkClicks(w.report, []confirm.AuditEvent{{Kind: confirm.AuditDecision, Actor: approvers[0], BatchID: "b1"}})
	if len(w.report.Violations) != 0 || w.report.Checked != 1 {
		t.Fatalf("a recorded click: violations %q, checked %d", w.report.Violations, w.report.Checked)
	}
	w.report = &Report{}
	w.checkClicks(w.report, []confirm.AuditEvent{{Kind: confirm.AuditDecision, Actor: approvers[0], BatchID: "b1"},
		{Kind: confirm.AuditDecision, Actor: stranger, BatchID: "b1", CallKey: "k"}})
	if len(w.report.Violations) != 1 || !strings.Contains(w.report.Violations[0], "stranger") {
		t.Fatalf("a stranger's decision: violations %q", w.report.Violations)
	}
}

// TestFlagsNamed: bad flags are refused, naming the flag.
func TestFlagsNamed(t *testing.T) {
	good := Options{Driver: "sqlite", Conversations: 10, Duration: time.Minute, KillEvery: 30 * time.Second, Timeout: 45 * time.Second, Settle: time.Minute}
	for flag, o := range map[string]Options{
		"-driver":        func() Options { o := good; o.Driver = "mysql"; return o }(),
		"-dsn":           func() Options { o := good; o.Driver = "postgres"; return o }(),
		"-conversations": func() Options { o := good; o.Conversations = 0; return o }(),
		"-duration":      func() Options { o := good; o.Duration = time.Hour; return o }(),
		"-kill-every":    func() Options { o := good; o.KillEvery = time.Second; return o }(),
		"-settle":        func() Options { o := good; o.Settle = time.Second; return o }(),
	} {
		if err := o.validate(); err == nil || !strings.Contains(err.Error(), flag) {
			t.Errorf("%s: %v", flag, err)
		}
	}
	if err := good.validate(); err != nil {
		t.Fatal(err)
	}
}
