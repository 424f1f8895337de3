package storage

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/airlockhq/airlock/confirm"
)

// runbookTests are the confirm.RunbookStore contract, run by
// runConformance against each database.
var runbookTests = []struct {
	name string
	fn   func(t *testing.T, db *DB)
}{
	{"RunbookRunRoundTrip", testRunbookRunRoundTrip},
	{"RunbookRunRefusesBadInput", testRunbookRunBadInput},
	{"RunbookStepLifecycle", testRunbookStepLifecycle},
	{"RunbookOneActiveStep", testRunbookOneActiveStep},
	{"RunbookAttemptOnce", testRunbookAttemptOnce},
	{"RunbookDueAt", testRunbookDueAt},
	{"RunbookHaltMarkDone", testRunbookHaltMarkDone},
	{"RunbookStopWhileWaiting", testRunbookStopWhileWaiting},
	{"RunbookFinishOnce", testRunbookFinishOnce},
	{"RunbookParent", testRunbookParent},
	{"RunbookAudit", testRunbookAudit},
	{"RunbookAuditScrubbed", testRunbookAuditScrubbed},
	{"RunbookStoreClock", testRunbookStoreClock},
	{"RaceRunbookStartStep", testRaceRunbookStartStep},
	{"RaceRunbookFinishStep", testRaceRunbookFinishStep},
}

func newRunbookRun(t *testing.T, db *DB) *confirm.RunbookRun {
	t.Helper()
	conv := newConversation(t, db)
	r := &confirm.RunbookRun{
		Runbook: "restart", Snapshot: json.RawMessage(`{"name":"restart","steps":[{"id":"before","tool":"status"}]}`),
		Params: json.RawMessage(`{"service":"api"}`), RequestedBy: "U-alice", ConversationID: conv.ID,
	}
	if err := db.CreateRunbookRun(t.Context(), r); err != nil {
		t.Fatalf("CreateRunbookRun: %v", err)
	}
	return r
}

func loadRunbookRun(t *testing.T, db *DB, id string) *confirm.RunbookRun {
	t.Helper()
	return load(t, "RunbookRun", db.RunbookRun, id)
}

func loadRunbookSteps(t *testing.T, db *DB, id string) []confirm.RunbookStep {
	t.Helper()
	return load(t, "RunbookSteps", db.RunbookSteps, id)
}

// startStep starts attempt k of tool (not skipped), failing the test
// unless the start wins.
func startStep(t *testing.T, db *DB, k confirm.StepKey, tool string) {
	t.Helper()
	if ok, err := db.StartRunbookStep(t.Context(), k, tool, false); err != nil || !ok {
		t.Fatalf("StartRunbookStep(%s) = %v, %v", k.Active(), ok, err)
	}
}

// startedRun is a new run with attempt 1 of its main step id (tool)
// started.
func startedRun(t *testing.T, db *DB, id, tool string) (*confirm.RunbookRun, confirm.StepKey) {
	t.Helper()
	r := newRunbookRun(t, db)
	k := mainStep(r.ID, id, 1)
	startStep(t, db, k, tool)
	return r, k
}

// finishStep records the outcome of attempt k, failing the test unless
// it wins.
func finishStep(t *testing.T, db *DB, k confirm.StepKey, status confirm.StepStatus, result string) {
	t.Helper()
	if ok, err := db.FinishRunbookStep(t.Context(), k, status, result, nil); err != nil || !ok {
		t.Fatalf("FinishRunbookStep(%s, %s) = %v, %v", k.Active(), status, ok, err)
	}
}

func mainStep(runID, id string, attempt int) confirm.StepKey {
	return confirm.StepKey{RunID: runID, Phase: confirm.PhaseMain, StepID: id, Attempt: attempt}
}

// A run reads back as stored: its snapshot and parameters byte for byte,
// status running, no active step.
func testRunbookRunRoundTrip(t *testing.T, db *DB) {
	r := newRunbookRun(t, db)
	if r.ID == "" || r.Status != confirm.RunbookRunning {
		t.Fatalf("created run = %+v", r)
	}
	got := loadRunbookRun(t, db, r.ID)
	if got.Runbook != "restart" || string(got.Snapshot) != string(r.Snapshot) || string(got.Params) != `{"service":"api"}` ||
		got.RequestedBy != "U-alice" || got.ConversationID != r.ConversationID || got.Status != confirm.RunbookRunning ||
		got.ActiveStep != "" || got.DueAt != nil || got.FinishedAt != nil || !got.CreatedAt.Equal(r.CreatedAt) {
		t.Fatalf("run read back = %+v, want %+v", got, r)
	}
	if _, err := db.RunbookRun(t.Context(), "no-such-run"); !errors.Is(err, confirm.ErrNotFound) {
		t.Fatalf("missing run: %v, want ErrNotFound", err)
	}
	if err := db.SetRunbookMessageRef(t.Context(), r.ID, "C1/123.456"); err != nil {
		t.Fatal(err)
	}
	if got := loadRunbookRun(t, db, r.ID); got.MessageRef != "C1/123.456" {
		t.Fatalf("message ref = %q", got.MessageRef)
	}
	if err := db.SetRunbookMessageRef(t.Context(), "no-such-run", "x"); !errors.Is(err, confirm.ErrNotFound) {
		t.Fatalf("message ref of a missing run: %v", err)
	}
}

// Bad input is refused with nothing written.
func testRunbookRunBadInput(t *testing.T, db *DB) {
	ctx := t.Context()
	conv := newConversation(t, db)
	for _, r := range []*confirm.RunbookRun{
		{Runbook: "", Snapshot: json.RawMessage(`{}`), Params: json.RawMessage(`{}`), ConversationID: conv.ID},
		{Runbook: "x", Snapshot: json.RawMessage(`{`), Params: json.RawMessage(`{}`), ConversationID: conv.ID},
		{Runbook: "x", Snapshot: json.RawMessage(`{}`), Params: nil, ConversationID: conv.ID},
		{Runbook: "x", Snapshot: json.RawMessage(`{}`), Params: json.RawMessage(`{}`)},
	} {
		if err := db.CreateRunbookRun(ctx, r); err == nil {
			t.Errorf("CreateRunbookRun(%+v) succeeded", r)
		}
	}
	if live, err := db.LiveRunbookRuns(ctx); err != nil || len(live) != 0 {
		t.Fatalf("after refused runs: %v, %v", live, err)
	}
	run := newRunbookRun(t, db)
	for _, k := range []confirm.StepKey{
		{RunID: run.ID, Phase: "other", StepID: "a", Attempt: 1},
		{RunID: run.ID, Phase: confirm.PhaseMain, StepID: "", Attempt: 1},
		{RunID: run.ID, Phase: confirm.PhaseMain, StepID: "a", Attempt: 0},
	} {
		if ok, err := db.StartRunbookStep(ctx, k, "status", false); err == nil || ok {
			t.Errorf("StartRunbookStep(%+v) = %v, %v; want an error", k, ok, err)
		}
	}
	if ok, err := db.FinishRunbookStep(ctx, mainStep(run.ID, "a", 1), confirm.StepWaiting, "", nil); err == nil || ok {
		t.Errorf("FinishRunbookStep with a non-final status = %v, %v", ok, err)
	}
	if ok, err := db.FinishRunbookRun(ctx, run.ID, confirm.RunbookHalted, "", ""); err == nil || ok {
		t.Errorf("FinishRunbookRun as halted = %v, %v", ok, err)
	}
	if got := loadRunbookRun(t, db, run.ID); got.Status != confirm.RunbookRunning || got.ActiveStep != "" || len(loadRunbookSteps(t, db, run.ID)) != 0 {
		t.Fatalf("bad input changed the run: %+v", got)
	}
}

// A step goes started -> waiting (its batch) -> outcome; the run's active
// step is set and cleared with it; the step is found by its batch.
func testRunbookStepLifecycle(t *testing.T, db *DB) {
	ctx := t.Context()
	r, k := startedRun(t, db, "before", "status")
	if got := loadRunbookRun(t, db, r.ID); got.ActiveStep != "main/before/1" {
		t.Fatalf("active step = %q", got.ActiveStep)
	}
	b := batchIn(t, db, r.ConversationID, later(), confirm.DecisionPending)
	if ok, err := db.SetRunbookStepBatch(ctx, k, b.ID); err != nil || !ok {
		t.Fatalf("SetRunbookStepBatch = %v, %v", ok, err)
	}
	if ok, err := db.SetRunbookStepBatch(ctx, k, "other"); err != nil || ok {
		t.Fatalf("second SetRunbookStepBatch = %v, %v; want lost", ok, err)
	}
	s, err := db.RunbookStepByBatch(ctx, b.ID)
	if err != nil || s.StepKey != k || s.Status != confirm.StepWaiting || s.Tool != "status" || s.Seq != 1 {
		t.Fatalf("RunbookStepByBatch = %+v, %v", s, err)
	}
	if _, err := db.RunbookStepByBatch(ctx, "not-a-step-batch"); !errors.Is(err, confirm.ErrNotFound) {
		t.Fatalf("step of another batch: %v", err)
	}
	finishStep(t, db, k, confirm.StepSucceeded, `{"status":"up"}`)
	if ok, err := db.FinishRunbookStep(ctx, k, confirm.StepFailed, "again", nil); err != nil || ok {
		t.Fatalf("second FinishRunbookStep = %v, %v; want lost", ok, err)
	}
	steps := loadRunbookSteps(t, db, r.ID)
	if len(steps) != 1 || steps[0].Status != confirm.StepSucceeded || steps[0].Result != `{"status":"up"}` || steps[0].FinishedAt == nil || steps[0].BatchID != b.ID {
		t.Fatalf("steps = %+v", steps)
	}
	if got := loadRunbookRun(t, db, r.ID); got.ActiveStep != "" || got.Status != confirm.RunbookRunning {
		t.Fatalf("run after its step = %+v", got)
	}
	// A skipped step is stored with its outcome; the run stays free.
	if ok, err := db.StartRunbookStep(ctx, mainStep(r.ID, "restart", 1), "restart_service", true); err != nil || !ok {
		t.Fatalf("skipped StartRunbookStep = %v, %v", ok, err)
	}
	steps = loadRunbookSteps(t, db, r.ID)
	if len(steps) != 2 || steps[1].Status != confirm.StepSkipped || steps[1].Seq != 2 || loadRunbookRun(t, db, r.ID).ActiveStep != "" {
		t.Fatalf("after a skip: %+v", steps)
	}
}

// A run runs one step at a time: a second step does not start while one
// is active, nor does any step of an ended or halted run.
func testRunbookOneActiveStep(t *testing.T, db *DB) {
	ctx := t.Context()
	r := newRunbookRun(t, db)
	startStep(t, db, mainStep(r.ID, "a", 1), "status")
	for _, skipped := range []bool{false, true} {
		if ok, err := db.StartRunbookStep(ctx, mainStep(r.ID, "b", 1), "status", skipped); err != nil || ok {
			t.Fatalf("a second step started while one is active (skipped %v): %v, %v", skipped, ok, err)
		}
	}
	if ok, err := db.HaltRunbookRun(ctx, r.ID, "a"); err != nil || ok {
		t.Fatalf("halted with an active step: %v, %v", ok, err)
	}
	finishStep(t, db, mainStep(r.ID, "a", 1), confirm.StepUnknown, "")
	if ok, err := db.HaltRunbookRun(ctx, r.ID, "a"); err != nil || !ok {
		t.Fatalf("HaltRunbookRun = %v, %v", ok, err)
	}
	if ok, err := db.StartRunbookStep(ctx, mainStep(r.ID, "b", 1), "status", false); err != nil || ok {
		t.Fatalf("a step of a halted run started: %v, %v", ok, err)
	}
	if ok, err := db.FinishRunbookRun(ctx, r.ID, confirm.RunbookFailed, "a", ""); err != nil || !ok {
		t.Fatal(ok, err)
	}
	if ok, err := db.StartRunbookStep(ctx, mainStep(r.ID, "b", 1), "status", false); err != nil || ok {
		t.Fatalf("a step of an ended run started: %v, %v", ok, err)
	}
	if n := len(loadRunbookSteps(t, db, r.ID)); n != 1 {
		t.Fatalf("%d steps stored, want 1", n)
	}
}

// An attempt that ran starts no second time (a replica's late start), and
// the lost start leaves the run free.
func testRunbookAttemptOnce(t *testing.T, db *DB) {
	ctx := t.Context()
	r, k := startedRun(t, db, "a", "status")
	finishStep(t, db, k, confirm.StepFailed, "boom")
	if ok, err := db.StartRunbookStep(ctx, k, "status", false); err != nil || ok {
		t.Fatalf("attempt 1 started twice: %v, %v", ok, err)
	}
	if got := loadRunbookRun(t, db, r.ID); got.ActiveStep != "" {
		t.Fatalf("a lost start left the run busy: %q", got.ActiveStep)
	}
	startStep(t, db, mainStep(r.ID, "a", 2), "status")
}

// A retry's delay: the run is not due, and no step starts, until DueAt
// by the store's clock.
func testRunbookDueAt(t *testing.T, db *DB) {
	ctx := t.Context()
	r := newRunbookRun(t, db)
	now := time.Date(2031, 1, 1, 10, 0, 0, 0, time.UTC)
	k := mainStep(r.ID, "a", 1)
	startStep(t, clockAt(db, now), k, "status")
	if ids, _ := db.DueRunbookRuns(ctx, now); containsID(ids, r.ID) {
		t.Fatal("a run with an active step is listed due")
	}
	due := now.Add(10 * time.Second)
	if ok, err := db.FinishRunbookStep(ctx, k, confirm.StepFailed, "down", &due); err != nil || !ok {
		t.Fatal(ok, err)
	}
	if got := loadRunbookRun(t, db, r.ID); got.DueAt == nil || !got.DueAt.Equal(due) {
		t.Fatalf("due at = %v, want %v", got.DueAt, due)
	}
	if ids, _ := db.DueRunbookRuns(ctx, now.Add(9*time.Second)); containsID(ids, r.ID) {
		t.Fatal("listed due before its delay")
	}
	if ok, err := clockAt(db, now.Add(9*time.Second)).StartRunbookStep(ctx, mainStep(r.ID, "a", 2), "status", false); err != nil || ok {
		t.Fatalf("attempt 2 started before the delay: %v, %v", ok, err)
	}
	if ids, _ := db.DueRunbookRuns(ctx, due); !containsID(ids, r.ID) {
		t.Fatal("not listed due at its time")
	}
	startStep(t, clockAt(db, due), mainStep(r.ID, "a", 2), "status")
	if got := loadRunbookRun(t, db, r.ID); got.DueAt != nil {
		t.Fatalf("due at kept after the start: %v", got.DueAt)
	}
}

func containsID(ids []string, id string) bool {
	for _, x := range ids {
		if x == id {
			return true
		}
	}
	return false
}

// An unknown step halts the run; Mark done takes it to succeeded and the
// run back to running, once; only an unknown step of a halted run.
func testRunbookHaltMarkDone(t *testing.T, db *DB) {
	ctx := t.Context()
	r := newRunbookRun(t, db)
	k := mainStep(r.ID, "a", 1)
	if ok, err := db.MarkRunbookStepDone(ctx, k, "U-bob"); err != nil || ok {
		t.Fatalf("marked a missing step done: %v, %v", ok, err)
	}
	startStep(t, db, k, "restart")
	finishStep(t, db, k, confirm.StepUnknown, "connection reset")
	if ok, err := db.MarkRunbookStepDone(ctx, k, "U-bob"); err != nil || ok {
		t.Fatalf("marked done while the run is not halted: %v, %v", ok, err)
	}
	if ok, err := db.HaltRunbookRun(ctx, r.ID, "a"); err != nil || !ok {
		t.Fatal(ok, err)
	}
	if got := loadRunbookRun(t, db, r.ID); got.Status != confirm.RunbookHalted || got.FailedStep != "a" {
		t.Fatalf("halted run = %+v", got)
	}
	if ids, _ := db.DueRunbookRuns(ctx, time.Time{}); containsID(ids, r.ID) {
		t.Fatal("a halted run is listed due")
	}
	if n := raceWins(t, 4, func(int) (bool, error) { return db.MarkRunbookStepDone(ctx, k, "U-bob") }); n != 1 {
		t.Fatalf("%d Mark done clicks won, want 1", n)
	}
	s := loadRunbookSteps(t, db, r.ID)[0]
	if s.Status != confirm.StepSucceeded || s.MarkedBy != "U-bob" || s.Result != "connection reset" {
		t.Fatalf("marked step = %+v", s)
	}
	if got := loadRunbookRun(t, db, r.ID); got.Status != confirm.RunbookRunning || got.FailedStep != "" {
		t.Fatalf("run after Mark done = %+v", got)
	}
	// Retry instead: halt on a new unknown, resume once.
	k2 := mainStep(r.ID, "b", 1)
	startStep(t, db, k2, "restart")
	finishStep(t, db, k2, confirm.StepUnknown, "")
	if ok, err := db.HaltRunbookRun(ctx, r.ID, "b"); err != nil || !ok {
		t.Fatal(ok, err)
	}
	if ok, err := db.ResumeRunbookRun(ctx, r.ID); err != nil || !ok {
		t.Fatal(ok, err)
	}
	if ok, err := db.ResumeRunbookRun(ctx, r.ID); err != nil || ok {
		t.Fatalf("resumed twice: %v, %v", ok, err)
	}
	if ok, err := db.MarkRunbookStepDone(ctx, k2, "U-bob"); err != nil || ok {
		t.Fatalf("Mark done after Retry won: %v, %v", ok, err)
	}
}

// Stop ends a run even while a step waits; the step's later outcome is
// still recorded but the run stays stopped and no step starts.
func testRunbookStopWhileWaiting(t *testing.T, db *DB) {
	ctx := t.Context()
	r, k := startedRun(t, db, "a", "restart")
	if ok, err := db.FinishRunbookRun(ctx, r.ID, confirm.RunbookFailed, "a", ""); err != nil || ok {
		t.Fatalf("failed with an active step: %v, %v", ok, err)
	}
	if ok, err := db.FinishRunbookRun(ctx, r.ID, confirm.RunbookStopped, "a", "U-alice"); err != nil || !ok {
		t.Fatalf("stop: %v, %v", ok, err)
	}
	finishStep(t, db, k, confirm.StepDenied, "stopped") // the waiting step's outcome
	got := loadRunbookRun(t, db, r.ID)
	if got.Status != confirm.RunbookStopped || got.StoppedBy != "U-alice" || got.FinishedAt == nil {
		t.Fatalf("stopped run = %+v", got)
	}
	if ok, _ := db.StartRunbookStep(ctx, mainStep(r.ID, "b", 1), "status", false); ok {
		t.Fatal("a step of a stopped run started")
	}
	if live, _ := db.LiveRunbookRuns(ctx); len(live) != 0 {
		t.Fatalf("live runs after stop: %+v", live)
	}
}

// A run ends once: a second ending (another replica, a late Stop) changes
// nothing.
func testRunbookFinishOnce(t *testing.T, db *DB) {
	ctx := t.Context()
	r := newRunbookRun(t, db)
	if ok, err := db.FinishRunbookRun(ctx, r.ID, confirm.RunbookSucceeded, "", ""); err != nil || !ok {
		t.Fatal(ok, err)
	}
	for _, st := range []confirm.RunbookStatus{confirm.RunbookSucceeded, confirm.RunbookStopped, confirm.RunbookFailed} {
		if ok, err := db.FinishRunbookRun(ctx, r.ID, st, "x", "U-mallory"); err != nil || ok {
			t.Fatalf("ended twice as %s: %v, %v", st, ok, err)
		}
	}
	if ok, _ := db.ResumeRunbookRun(ctx, r.ID); ok {
		t.Fatal("resumed an ended run")
	}
	if got := loadRunbookRun(t, db, r.ID); got.Status != confirm.RunbookSucceeded || got.StoppedBy != "" {
		t.Fatalf("run = %+v", got)
	}
	if ok, _ := db.FinishRunbookRun(ctx, "no-such-run", confirm.RunbookStopped, "", "U"); ok {
		t.Fatal("ended a missing run")
	}
}

// A run a model's call started is found by that call while it lives.
func testRunbookParent(t *testing.T, db *DB) {
	ctx := t.Context()
	conv := newConversation(t, db)
	b := batchIn(t, db, conv.ID, later(), confirm.DecisionAllowedByPolicy)
	r := &confirm.RunbookRun{Runbook: "restart", Snapshot: json.RawMessage(`{}`), Params: json.RawMessage(`{}`),
		ConversationID: conv.ID, ParentBatch: b.ID, ParentKey: "k0"}
	if err := db.CreateRunbookRun(ctx, r); err != nil {
		t.Fatal(err)
	}
	got, err := db.RunbookRunByParent(ctx, b.ID, "k0")
	if err != nil || got.ID != r.ID {
		t.Fatalf("RunbookRunByParent = %+v, %v", got, err)
	}
	if _, err := db.RunbookRunByParent(ctx, b.ID, "k1"); !errors.Is(err, confirm.ErrNotFound) {
		t.Fatalf("another call: %v", err)
	}
	if _, err := db.RunbookRunByParent(ctx, "", ""); !errors.Is(err, confirm.ErrNotFound) {
		t.Fatalf("no parent: %v", err)
	}
	live, err := db.LiveRunbookRuns(ctx)
	if err != nil || len(live) != 1 || live[0].ID != r.ID {
		t.Fatalf("LiveRunbookRuns = %+v, %v", live, err)
	}
}

// Each transition that matters is audited once: runbook_started with the
// parameters, runbook_step with the outcome and the scrubbed result,
// runbook_finished with the outcome.
func testRunbookAudit(t *testing.T, db *DB) {
	ctx := t.Context()
	r, k := startedRun(t, db, "a", "status")
	finishStep(t, db, k, confirm.StepFailed, strings.Repeat("x", 3000))
	db.FinishRunbookStep(ctx, k, confirm.StepFailed, "again", nil) // lost: not audited
	if ok, err := db.StartRunbookStep(ctx, mainStep(r.ID, "b", 1), "status", true); err != nil || !ok {
		t.Fatal(ok, err)
	}
	if ok, err := db.FinishRunbookRun(ctx, r.ID, confirm.RunbookFailed, "a", ""); err != nil || !ok {
		t.Fatal(ok, err)
	}
	db.FinishRunbookRun(ctx, r.ID, confirm.RunbookStopped, "a", "U") // lost: not audited
	evs, err := db.AuditEvents(ctx, confirm.AuditFilter{ConversationID: r.ConversationID})
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, e := range evs {
		kinds = append(kinds, string(e.Kind))
	}
	if strings.Join(kinds, " ") != "runbook_started runbook_step runbook_step runbook_finished" {
		t.Fatalf("audit kinds = %v", kinds)
	}
	var started struct {
		Params map[string]string `json:"params"`
		RunID  string            `json:"run_id"`
	}
	if err := json.Unmarshal([]byte(evs[0].Detail), &started); err != nil || started.Params["service"] != "api" || started.RunID != r.ID || evs[0].Actor != "U-alice" {
		t.Fatalf("runbook_started = %+v (%s)", evs[0], evs[0].Detail)
	}
	var step struct {
		Step, Outcome, Result string
		Truncated             bool `json:"result_truncated"`
	}
	if err := json.Unmarshal([]byte(evs[1].Detail), &step); err != nil || step.Step != "a" || step.Outcome != "failed" || !step.Truncated || len(step.Result) > 2100 || evs[1].Tool != "status" {
		t.Fatalf("runbook_step = %s", evs[1].Detail)
	}
	if !strings.Contains(evs[2].Detail, `"outcome":"skipped"`) {
		t.Fatalf("skipped step audit = %s", evs[2].Detail)
	}
	if !strings.Contains(evs[3].Detail, `"outcome":"failed"`) || !strings.Contains(evs[3].Detail, `"failed_step":"a"`) {
		t.Fatalf("runbook_finished = %s", evs[3].Detail)
	}
}

// Every runbook transition stamps its times, and its audit event's, from
// the store's clock: a time the caller puts in (a run's CreatedAt) is not
// taken.
func testRunbookStoreClock(t *testing.T, db *DB) {
	ctx := t.Context()
	at := func(i int) time.Time { return time.Date(2032, 2, 3, 4, 5, i, 0, time.UTC) }
	conv := newConversation(t, db)
	r := &confirm.RunbookRun{Runbook: "restart", Snapshot: json.RawMessage(`{}`), Params: json.RawMessage(`{}`),
		ConversationID: conv.ID, CreatedAt: time.Date(1999, 1, 1, 0, 0, 0, 0, time.UTC)}
	if err := clockAt(db, at(0)).CreateRunbookRun(ctx, r); err != nil {
		t.Fatal(err)
	}
	if got := loadRunbookRun(t, db, r.ID); !got.CreatedAt.Equal(at(0)) || !r.CreatedAt.Equal(at(0)) {
		t.Fatalf("run created at %v (returned %v), want the store's %v", got.CreatedAt, r.CreatedAt, at(0))
	}
	a, b := mainStep(r.ID, "a", 1), mainStep(r.ID, "b", 1)
	for i, step := range []struct {
		what string
		do   func() (bool, error)
	}{
		{"start a", func() (bool, error) { return db.StartRunbookStep(ctx, a, "restart", false) }},
		{"finish a", func() (bool, error) { return db.FinishRunbookStep(ctx, a, confirm.StepUnknown, "", nil) }},
		{"halt", func() (bool, error) { return db.HaltRunbookRun(ctx, r.ID, "a") }},
		{"mark a done", func() (bool, error) { return db.MarkRunbookStepDone(ctx, a, "U-bob") }},
		{"start b", func() (bool, error) { return db.StartRunbookStep(ctx, b, "restart", false) }},
		{"finish b", func() (bool, error) { return db.FinishRunbookStep(ctx, b, confirm.StepUnknown, "", nil) }},
		{"halt again", func() (bool, error) { return db.HaltRunbookRun(ctx, r.ID, "b") }},
		{"resume", func() (bool, error) { return db.ResumeRunbookRun(ctx, r.ID) }},
		{"finish the run", func() (bool, error) { return db.FinishRunbookRun(ctx, r.ID, confirm.RunbookSucceeded, "", "") }},
	} {
		now := at(i + 1)
		clockAt(db, now)
		if ok, err := step.do(); err != nil || !ok {
			t.Fatalf("%s: %v, %v", step.what, ok, err)
		}
		if got := loadRunbookRun(t, db, r.ID); !got.UpdatedAt.Equal(now) {
			t.Fatalf("after %s the run is updated at %v, want the store's %v", step.what, got.UpdatedAt, now)
		}
	}
	got := loadRunbookRun(t, db, r.ID)
	if got.FinishedAt == nil || !got.FinishedAt.Equal(at(9)) {
		t.Fatalf("run finished at %v, want %v", got.FinishedAt, at(9))
	}
	steps := loadRunbookSteps(t, db, r.ID)
	if len(steps) != 2 || !steps[0].CreatedAt.Equal(at(1)) || steps[0].FinishedAt == nil || !steps[0].FinishedAt.Equal(at(2)) ||
		!steps[1].CreatedAt.Equal(at(5)) || steps[1].FinishedAt == nil || !steps[1].FinishedAt.Equal(at(6)) {
		t.Fatalf("steps = %+v, want started at %v and %v, finished at %v and %v", steps, at(1), at(5), at(2), at(6))
	}
	evs, err := db.AuditEvents(ctx, confirm.AuditFilter{ConversationID: conv.ID})
	if err != nil {
		t.Fatal(err)
	}
	var ats []string
	for _, e := range evs {
		ats = append(ats, fmt.Sprintf("%s@%d", e.Kind, e.At.Second()))
	}
	want := "runbook_started@0 runbook_step@2 runbook_step@4 runbook_step@6 runbook_finished@9"
	if strings.Join(ats, " ") != want {
		t.Fatalf("audit = %v, want %s", ats, want)
	}
}

// Replicas starting the same step (or different steps) at once: exactly
// one start wins.
func testRaceRunbookStartStep(t *testing.T, db *DB) {
	ctx := t.Context()
	r := newRunbookRun(t, db)
	ids := []string{"a", "b"}
	won := raceWinners(t, 8, func(i int) (bool, error) {
		return db.StartRunbookStep(ctx, mainStep(r.ID, ids[i%2], 1), "status", false)
	})
	if len(won) != 1 {
		t.Fatalf("starts won: %v, want one", won)
	}
	if steps := loadRunbookSteps(t, db, r.ID); len(steps) != 1 || steps[0].StepID != ids[won[0]%2] {
		t.Fatalf("steps = %+v", steps)
	}
}

// Two outcomes of one step at once (the runner and a Stop's deny): one is
// recorded and audited.
func testRaceRunbookFinishStep(t *testing.T, db *DB) {
	ctx := t.Context()
	r, k := startedRun(t, db, "a", "status")
	statuses := []confirm.StepStatus{confirm.StepSucceeded, confirm.StepDenied, confirm.StepUnknown}
	wins := raceWinners(t, 6, func(i int) (bool, error) { return db.FinishRunbookStep(ctx, k, statuses[i%3], "r", nil) })
	if len(wins) != 1 {
		t.Fatalf("%d outcomes recorded, want 1", len(wins))
	}
	won := statuses[wins[0]%3]
	if s := loadRunbookSteps(t, db, r.ID)[0]; s.Status != won {
		t.Fatalf("step = %+v, the winner was %s", s, won)
	}
	n := 0
	evs, _ := db.AuditEvents(ctx, confirm.AuditFilter{ConversationID: r.ConversationID})
	for _, e := range evs {
		if e.Kind == confirm.AuditRunbookStep {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("%d runbook_step events, want 1", n)
	}
}

// Item 7 of issue 34: a secret in a run's parameters, a step's result or
// who stopped it reaches no runbook audit row (WithScrub), as a tool
// call's arguments do not; the run keeps its parameters exact, for its
// steps.
func testRunbookAuditScrubbed(t *testing.T, db *DB) {
	const secret = "s3cr3t-t0ken-value"
	db.scrub = func(s string) string { return strings.ReplaceAll(s, secret, "[redacted]") }
	ctx := t.Context()
	conv := newConversation(t, db)
	params := `{"service":"api","token":"` + secret + `"}`
	r := &confirm.RunbookRun{
		Runbook: "restart", Snapshot: json.RawMessage(`{"name":"restart","steps":[{"id":"a","tool":"status"}]}`),
		Params: json.RawMessage(params), RequestedBy: "U-alice", ConversationID: conv.ID,
	}
	if err := db.CreateRunbookRun(ctx, r); err != nil {
		t.Fatal(err)
	}
	k := mainStep(r.ID, "a", 1)
	startStep(t, db, k, "status")
	finishStep(t, db, k, confirm.StepFailed, "401 for "+secret)
	if ok, err := db.FinishRunbookRun(ctx, r.ID, confirm.RunbookFailed, "a", ""); err != nil || !ok {
		t.Fatal(ok, err)
	}
	evs, err := db.AuditEvents(ctx, confirm.AuditFilter{ConversationID: r.ConversationID})
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 3 {
		t.Fatalf("%d audit rows, want 3", len(evs))
	}
	for _, e := range evs {
		if strings.Contains(e.Detail, secret) || !json.Valid([]byte(e.Detail)) {
			t.Errorf("%s detail %s: want valid JSON without the secret", e.Kind, e.Detail)
		}
	}
	var started struct{ Params map[string]string }
	if err := json.Unmarshal([]byte(evs[0].Detail), &started); err != nil || started.Params["service"] != "api" || started.Params["token"] != "[redacted]" {
		t.Fatalf("runbook_started detail %s: want the parameters with the secret redacted", evs[0].Detail)
	}
	if got := loadRunbookRun(t, db, r.ID); string(got.Params) != params {
		t.Fatalf("stored parameters %s, want them exact", got.Params)
	}
}
