package runbook

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/airlockhq/airlock/confirm"
)

// The engine drives runs: a state machine advanced by events (a run
// started, a step's batch done, a retry's delay passed, a person's Mark
// done / Retry / Stop, a restart). Its state is the database's
// (confirm.RunbookStore): every transition is one conditional UPDATE, so
// replicas advancing the same run start each step once. Each step is one
// call submitted through the bot's one decision path (Executor): judged by
// the policy plus the step's confirm/approvals, a card when gated, the
// same single-use Decide, the tool run with the idempotency key
// <run id>/<step id>/<attempt>.

// Evaluator resolves a step's expressions (the compiled definitions do:
// CEL `when`, `{{ }}` arguments, retry `until`). i indexes the phase's
// steps (Config.Steps for PhaseMain, Config.OnFailure for PhaseOnFailure).
type Evaluator interface {
	When(rb *Config, phase string, i int, v Vars) (bool, error)
	Args(rb *Config, phase string, i int, v Vars) (json.RawMessage, error)
	Done(rb *Config, phase string, i int, v Vars) (bool, error)
}

// StepCall is what the executor submits: one call of one step attempt.
type StepCall struct {
	Run    *confirm.RunbookRun
	Key    confirm.StepKey
	Config StepConfig
	Args   json.RawMessage
	// Covered names the batch of the attempt whose approval covers this
	// one (a retry after a failed attempt: an approval of the step covers
	// its attempts); "" for a first attempt or a person's Retry.
	Covered string
}

// RefusedError is a step call the executor refused before storing
// anything (a limit, say): the step ends failed with Reason, not
// retried, and the run goes on as after a failure.
type RefusedError struct{ Reason string }

func (e *RefusedError) Error() string { return "step refused: " + e.Reason }

// Executor submits a step's call through the bot: it stores the one-call
// batch (judged by the policy plus the step's confirm/approvals, which
// only add; the tool's idempotency key Key.IdempotencyKey()), links it to
// the step (SetRunbookStepBatch) and then posts its card, or runs it at
// once when nothing gates it. The batch's end comes back as StepDone.
type Executor interface {
	SubmitStep(ctx context.Context, s StepCall) error
	// ShowRun renders the run message (posted once, then edited).
	ShowRun(ctx context.Context, run *confirm.RunbookRun, rb *Config, steps []confirm.RunbookStep)
	// Finished tells the run's starter it ended (the model's runbook call
	// gets its summary).
	Finished(ctx context.Context, run *confirm.RunbookRun, rb *Config, steps []confirm.RunbookStep)
}

// Store is what the engine needs from storage.
type Store interface {
	confirm.RunbookStore
	Batch(ctx context.Context, id string) (*confirm.Batch, error)
	ConversationByID(ctx context.Context, id int64) (confirm.Conversation, error)
}

// Engine advances runs.
type Engine struct {
	Store Store
	Exec  Executor
	Eval  Evaluator
	Now   func() time.Time
	Log   *slog.Logger
	// StepEnded, when set, is told each step's outcome and duration
	// (metrics).
	StepEnded func(runbook string, outcome confirm.StepStatus, d time.Duration)

	wg sync.WaitGroup
}

// ErrNoSuchRun: a reference names no run (or no step of it).
var ErrNoSuchRun = errors.New("no such run")

// ErrRunEnded: the run has already ended (or is not halted, for Mark done
// and Retry); nothing changed.
var ErrRunEnded = errors.New("the run has ended")

func (e *Engine) now() time.Time {
	if e.Now != nil {
		return e.Now()
	}
	return time.Now()
}

func (e *Engine) log() *slog.Logger {
	if e.Log != nil {
		return e.Log
	}
	return slog.New(slog.DiscardHandler)
}

// Decode reads a run's snapshot.
func Decode(snapshot json.RawMessage) (*Config, error) {
	var rb Config
	if err := json.Unmarshal(snapshot, &rb); err != nil {
		return nil, fmt.Errorf("runbook snapshot: %w", err)
	}
	return &rb, nil
}

// Encode makes a run's snapshot of a definition.
func Encode(rb *Config) (Snapshot, error) {
	b, err := json.Marshal(rb)
	if err != nil {
		return nil, fmt.Errorf("runbook snapshot: %w", err)
	}
	return b, nil
}

// Kick advances the run in the background (an event arrived while the
// caller holds a lock the advance would take). Wait waits for kicks.
func (e *Engine) Kick(ctx context.Context, runID string) {
	e.wg.Add(1)
	go func() {
		defer e.wg.Done()
		if err := e.Advance(context.WithoutCancel(ctx), runID); err != nil {
			e.log().Error("advance runbook run", "run", runID, "err", err)
		}
	}()
}

// KickStep records the end of a step's batch and advances its run, in
// the background (the caller holds the conversation the next step takes).
func (e *Engine) KickStep(ctx context.Context, batchID string) {
	e.wg.Add(1)
	go func() {
		defer e.wg.Done()
		ctx := context.WithoutCancel(ctx)
		batch, err := e.Store.Batch(ctx, batchID)
		if err == nil {
			err = e.StepDone(ctx, batch)
		}
		if err != nil {
			e.log().Error("runbook step done", "batch", batchID, "err", err)
		}
	}()
}

// Wait waits for the background advances Kick started.
func (e *Engine) Wait() { e.wg.Wait() }

// state is a run with its steps and definition.
type state struct {
	run   *confirm.RunbookRun
	rb    *Config
	steps []confirm.RunbookStep
	conv  confirm.Conversation
}

func (e *Engine) load(ctx context.Context, runID string) (*state, error) {
	run, err := e.Store.RunbookRun(ctx, runID)
	if errors.Is(err, confirm.ErrNotFound) {
		return nil, fmt.Errorf("run %q: %w", runID, ErrNoSuchRun)
	}
	if err != nil {
		return nil, err
	}
	rb, err := Decode(run.Snapshot)
	if err != nil {
		return nil, err
	}
	steps, err := e.Store.RunbookSteps(ctx, runID)
	if err != nil {
		return nil, err
	}
	conv, err := e.Store.ConversationByID(ctx, run.ConversationID)
	if err != nil {
		return nil, err
	}
	return &state{run: run, rb: rb, steps: steps, conv: conv}, nil
}

// latest is the newest attempt of a step in a phase (nil: none).
func (s *state) latest(phase, id string) *confirm.RunbookStep {
	var out *confirm.RunbookStep
	for i := range s.steps {
		st := &s.steps[i]
		if st.Phase == phase && st.StepID == id && (out == nil || st.Attempt > out.Attempt) {
			out = st
		}
	}
	return out
}

// vars are the expressions' variables at this point of the run.
func (s *state) vars(now time.Time) Vars {
	v := Vars{Params: map[string]any{}, Steps: map[string]StepState{}, Now: now}
	_ = json.Unmarshal(s.run.Params, &v.Params)
	for _, st := range s.steps { // in the order they started: the newest attempt wins
		v.Steps[st.StepID] = StepState{Outcome: outcomeOf(st.Status), Result: decodeResult(st.Result)}
	}
	v.Run = RunInfo{ID: s.run.ID, Name: s.run.Runbook, Requester: s.run.RequestedBy, FailedStep: s.run.FailedStep,
		Platform: s.conv.Platform, Channel: s.conv.Channel}
	if v.Run.FailedStep == "" {
		v.Run.FailedStep = s.failedStep()
	}
	return v
}

func outcomeOf(st confirm.StepStatus) Outcome {
	switch st {
	case confirm.StepStarted, confirm.StepWaiting:
		return ""
	}
	return Outcome(st)
}

// decodeResult is the tool's result decoded from JSON when it is JSON,
// else its text.
func decodeResult(s string) any {
	var v any
	if err := json.Unmarshal([]byte(s), &v); err == nil {
		return v
	}
	return s
}

func phaseSteps(rb *Config, phase string) []StepConfig {
	if phase == confirm.PhaseOnFailure {
		return rb.OnFailure
	}
	return rb.Steps
}

// Advance takes the run as far as it goes without waiting: skipped steps
// recorded, the next step submitted, or the run ended. It is safe to call
// at any time, from any replica: a run already advanced, waiting on a
// step, halted or ended is left as it is.
func (e *Engine) Advance(ctx context.Context, runID string) error {
	for range 1000 { // a runbook's steps bound the loop; this bounds a bug
		s, err := e.load(ctx, runID)
		if err != nil {
			return err
		}
		if s.run.Status != confirm.RunbookRunning || s.run.ActiveStep != "" {
			e.Exec.ShowRun(ctx, s.run, s.rb, s.steps)
			if s.run.ActiveStep != "" {
				return e.recoverStarted(ctx, s)
			}
			return nil
		}
		if s.run.DueAt != nil && s.run.DueAt.After(e.now()) {
			e.Exec.ShowRun(ctx, s.run, s.rb, s.steps)
			return nil // the runbooks job comes back when it is due
		}
		again, err := e.step(ctx, s)
		if err != nil {
			return err
		}
		if !again {
			if s, err := e.load(ctx, runID); err == nil && !s.run.Status.Final() {
				e.Exec.ShowRun(ctx, s.run, s.rb, s.steps) // where it now waits (the end showed itself)
			}
			return nil
		}
	}
	return errors.New("runbook run did not settle")
}

// recoverStarted handles a step left started with no batch (the process
// died between starting it and storing its call): whether its call was
// stored is not known, so its outcome is unknown and the run halts.
func (e *Engine) recoverStarted(ctx context.Context, s *state) error {
	for _, st := range s.steps {
		if !st.Status.Active() || st.StepKey.Active() != s.run.ActiveStep {
			continue
		}
		if st.Status == confirm.StepWaiting {
			// The batch may have ended while its outcome was not yet
			// recorded here (the process died in between).
			batch, err := e.Store.Batch(ctx, st.BatchID)
			if err != nil || batch.Status != confirm.BatchDone {
				return err
			}
			return e.StepDone(ctx, batch)
		}
		if st.CreatedAt.After(e.now().Add(-startGrace)) {
			return nil // being submitted right now, by this or another process
		}
		won, err := e.Store.FinishRunbookStep(ctx, st.StepKey, confirm.StepUnknown, "the step was being submitted when Airlock stopped", nil)
		if err != nil || !won {
			return err
		}
		return e.afterStep(ctx, st.StepKey)
	}
	return nil
}

// startGrace is how long a started step may take to get its batch before
// recovery calls its outcome unknown.
const startGrace = 2 * time.Minute

// step does the run's next move; again: advance further.
func (e *Engine) step(ctx context.Context, s *state) (again bool, err error) {
	now := e.now()
	phase := confirm.PhaseMain
	for _, st := range s.steps {
		if st.Phase == confirm.PhaseOnFailure {
			phase = confirm.PhaseOnFailure
		}
	}
	if phase == confirm.PhaseMain {
		for i, sc := range s.rb.Steps {
			last := s.latest(confirm.PhaseMain, sc.ID)
			next, done, final := e.judge(s, sc, last)
			if final != "" {
				if final == confirm.RunbookFailed {
					if len(s.rb.OnFailure) > 0 {
						s.run.FailedStep = sc.ID
						return e.startOnFailure(ctx, s, sc.ID, now)
					}
				}
				return e.finish(ctx, s, final, sc.ID)
			}
			if done {
				continue
			}
			return e.submit(ctx, s, confirm.PhaseMain, i, next, now)
		}
		return e.finish(ctx, s, confirm.RunbookSucceeded, "")
	}
	failed := s.failedStep()
	for i, sc := range s.rb.OnFailure {
		last := s.latest(confirm.PhaseOnFailure, sc.ID)
		if last != nil && last.Status == confirm.StepUnknown {
			return e.halt(ctx, s, sc.ID)
		}
		if last != nil {
			continue // on_failure steps run once each, whatever their outcome
		}
		return e.submit(ctx, s, confirm.PhaseOnFailure, i, 1, now)
	}
	return e.finish(ctx, s, confirm.RunbookFailed, failed)
}

// failedStep is the main step the run failed at.
func (s *state) failedStep() string {
	for _, sc := range s.rb.Steps {
		if l := s.latest(confirm.PhaseMain, sc.ID); l != nil && l.Status == confirm.StepFailed {
			if sc.OnFailure != OnFailureContinue {
				return sc.ID
			}
		}
	}
	return s.run.FailedStep
}

// judge reads a main step's newest attempt: done (go on), the next
// attempt to run, or the run's end it causes (final; halted for unknown).
func (e *Engine) judge(s *state, sc StepConfig, last *confirm.RunbookStep) (next int, done bool, final confirm.RunbookStatus) {
	if last == nil {
		return 1, false, ""
	}
	switch last.Status {
	case confirm.StepSucceeded, confirm.StepSkipped:
		return 0, true, ""
	case confirm.StepDenied:
		return 0, false, confirm.RunbookDenied
	case confirm.StepExpired:
		return 0, false, confirm.RunbookExpired
	case confirm.StepUnknown:
		return 0, false, confirm.RunbookHalted
	case confirm.StepFailed:
		if sc.Retry != nil && last.Attempt < sc.Retry.Max() && !strings.HasPrefix(last.Result, invalidPrefix) {
			return last.Attempt + 1, false, ""
		}
		if sc.OnFailure == OnFailureContinue {
			return 0, true, ""
		}
		return 0, false, confirm.RunbookFailed
	}
	return 0, false, "" // active: Advance does not get here
}

// invalidPrefix starts the result of a step that could not be submitted
// (its arguments did not resolve or validate): it is not retried.
const invalidPrefix = "Not run: "

func (e *Engine) startOnFailure(ctx context.Context, s *state, failed string, now time.Time) (bool, error) {
	return e.submit(ctx, s, confirm.PhaseOnFailure, 0, 1, now)
}

func (e *Engine) halt(ctx context.Context, s *state, step string) (bool, error) {
	won, err := e.Store.HaltRunbookRun(ctx, s.run.ID, step)
	if err != nil {
		return false, err
	}
	if won {
		if s, err := e.load(ctx, s.run.ID); err == nil {
			e.Exec.ShowRun(ctx, s.run, s.rb, s.steps)
		}
	}
	return false, nil
}

func (e *Engine) finish(ctx context.Context, s *state, status confirm.RunbookStatus, step string) (bool, error) {
	if status == confirm.RunbookHalted {
		return e.halt(ctx, s, step)
	}
	if status == confirm.RunbookSucceeded {
		step = ""
	}
	won, err := e.Store.FinishRunbookRun(ctx, s.run.ID, status, step, "")
	if err != nil || !won {
		return false, err
	}
	return false, e.ended(ctx, s.run.ID)
}

// ended shows the ended run and tells its starter.
func (e *Engine) ended(ctx context.Context, runID string) error {
	s, err := e.load(ctx, runID)
	if err != nil {
		return err
	}
	e.Exec.ShowRun(ctx, s.run, s.rb, s.steps)
	e.Exec.Finished(ctx, s.run, s.rb, s.steps)
	return nil
}

// submit starts attempt of the phase's step i: `when` false records it
// skipped; arguments that do not resolve end the step failed (not
// retried); else the executor submits its call.
func (e *Engine) submit(ctx context.Context, s *state, phase string, i, attempt int, now time.Time) (bool, error) {
	sc := phaseSteps(s.rb, phase)[i]
	k := confirm.StepKey{RunID: s.run.ID, Phase: phase, StepID: sc.ID, Attempt: attempt}
	v := s.vars(now)
	if attempt == 1 && sc.When != "" {
		ok, err := e.Eval.When(s.rb, phase, i, v)
		if err != nil {
			return e.refuse(ctx, k, sc, fmt.Sprintf("%sits condition failed: %v", invalidPrefix, err))
		}
		if !ok {
			if _, err := e.Store.StartRunbookStep(ctx, k, sc.Tool, true); err != nil {
				return false, err
			}
			return true, nil
		}
	}
	won, err := e.Store.StartRunbookStep(ctx, k, sc.Tool, false)
	if err != nil || !won {
		return false, err
	}
	raw, err := e.Eval.Args(s.rb, phase, i, v)
	if err != nil {
		return e.end(ctx, k, confirm.StepFailed, fmt.Sprintf("%sits arguments did not resolve: %v", invalidPrefix, err))
	}
	covered := ""
	if attempt > 1 {
		if prev := s.latest(phase, sc.ID); prev != nil && prev.Status == confirm.StepFailed {
			covered = prev.BatchID
		}
	}
	err = e.Exec.SubmitStep(ctx, StepCall{Run: s.run, Key: k, Config: sc, Args: raw, Covered: covered})
	if re := (*RefusedError)(nil); errors.As(err, &re) {
		return e.end(ctx, k, confirm.StepFailed, invalidPrefix+re.Reason)
	}
	if err != nil {
		// Whether its call was stored is not known: recovery decides.
		return false, fmt.Errorf("submit step %s: %w", k.Active(), err)
	}
	return false, nil
}

// refuse records a step that cannot start as failed (a start and its end).
func (e *Engine) refuse(ctx context.Context, k confirm.StepKey, sc StepConfig, why string) (bool, error) {
	won, err := e.Store.StartRunbookStep(ctx, k, sc.Tool, false)
	if err != nil || !won {
		return false, err
	}
	return e.end(ctx, k, confirm.StepFailed, why)
}

func (e *Engine) end(ctx context.Context, k confirm.StepKey, status confirm.StepStatus, result string) (bool, error) {
	if _, err := e.Store.FinishRunbookStep(ctx, k, status, result, nil); err != nil {
		return false, err
	}
	return true, nil
}

// StepDone records the outcome of a step's batch, just done (or decided
// without running: denied, expired, refused), and advances the run. A
// batch that is no step's is ignored.
func (e *Engine) StepDone(ctx context.Context, batch *confirm.Batch) error {
	st, err := e.Store.RunbookStepByBatch(ctx, batch.ID)
	if errors.Is(err, confirm.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	if !st.Status.Active() || len(batch.Calls) != 1 {
		return e.Advance(ctx, st.RunID)
	}
	s, err := e.load(ctx, st.RunID)
	if err != nil {
		return err
	}
	c := batch.Calls[0]
	status, result := callOutcome(c)
	sc, i := s.stepConfig(st.Phase, st.StepID)
	if status == confirm.StepSucceeded && sc != nil && sc.Retry != nil && sc.Retry.Until != "" {
		v := s.vars(e.now())
		v.Steps[st.StepID] = StepState{Outcome: Succeeded, Result: decodeResult(result)}
		ok, err := e.Eval.Done(s.rb, st.Phase, i, v)
		if err != nil || !ok {
			status = confirm.StepFailed
		}
	}
	var due *time.Time
	if status == confirm.StepFailed && sc != nil && sc.Retry != nil && st.Attempt < sc.Retry.Max() && sc.Retry.Delay > 0 {
		t := e.now().Add(sc.Retry.Delay)
		due = &t
	}
	won, err := e.Store.FinishRunbookStep(ctx, st.StepKey, status, result, due)
	if err != nil {
		return err
	}
	if won && e.StepEnded != nil {
		e.StepEnded(s.run.Runbook, status, e.now().Sub(st.CreatedAt))
	}
	return e.afterStep(ctx, st.StepKey)
}

func (e *Engine) afterStep(ctx context.Context, k confirm.StepKey) error {
	return e.Advance(ctx, k.RunID)
}

func (s *state) stepConfig(phase, id string) (*StepConfig, int) {
	for i, sc := range phaseSteps(s.rb, phase) {
		if sc.ID == id {
			return &sc, i
		}
	}
	return nil, -1
}

// callOutcome is a step's outcome from its one call.
func callOutcome(c confirm.Call) (confirm.StepStatus, string) {
	switch c.Decision {
	case confirm.DecisionDenied, confirm.DecisionDeniedByRule:
		msg := c.DenyMessage
		if c.DenyReason != "" {
			msg = c.DenyReason
		}
		return confirm.StepDenied, msg
	case confirm.DecisionExpired:
		return confirm.StepExpired, c.DenyMessage
	case confirm.DecisionInvalid:
		return confirm.StepFailed, invalidPrefix + c.DenyMessage
	}
	switch c.Run {
	case confirm.RunSucceeded:
		return confirm.StepSucceeded, c.Result
	case confirm.RunFailed:
		return confirm.StepFailed, c.Result
	}
	return confirm.StepUnknown, c.Result
}

// Stop ends a run at a person's word (the requester or an approver: the
// caller checks): nothing more runs; a waiting step's call is denied by
// the caller (deny) before the run is marked stopped.
func (e *Engine) Stop(ctx context.Context, runID, by string, deny func(batchID string) error) error {
	s, err := e.load(ctx, runID)
	if err != nil {
		return err
	}
	if s.run.Status.Final() {
		return ErrRunEnded
	}
	won, err := e.Store.FinishRunbookRun(ctx, runID, confirm.RunbookStopped, activeStepID(s.run.ActiveStep), by)
	if err != nil {
		return err
	}
	if !won {
		return ErrRunEnded
	}
	for _, st := range s.steps {
		if st.Status == confirm.StepWaiting && st.BatchID != "" && deny != nil {
			if err := deny(st.BatchID); err != nil {
				e.log().Error("deny the waiting step of a stopped run", "run", runID, "err", err)
				continue
			}
			// The step's outcome is recorded now, before the run's end is
			// told (the model's summary): its batch, denied, is done (one
			// decided before the stop runs and ends as it does).
			if batch, err := e.Store.Batch(ctx, st.BatchID); err == nil && batch.Status == confirm.BatchDone && len(batch.Calls) == 1 {
				status, result := callOutcome(batch.Calls[0])
				won, err := e.Store.FinishRunbookStep(ctx, st.StepKey, status, result, nil)
				if err != nil {
					e.log().Error("record the waiting step of a stopped run", "run", runID, "err", err)
				} else if won && e.StepEnded != nil {
					e.StepEnded(s.run.Runbook, status, e.now().Sub(st.CreatedAt))
				}
			}
		}
	}
	return e.ended(ctx, runID)
}

func activeStepID(active string) string {
	parts := strings.Split(active, "/")
	if len(parts) == 3 {
		return parts[1]
	}
	return ""
}

// MarkDone treats a halted run's unknown step as succeeded and goes on.
func (e *Engine) MarkDone(ctx context.Context, runID, by string) error {
	_, last, err := e.halted(ctx, runID)
	if err != nil {
		return err
	}
	if err := ended(e.Store.MarkRunbookStepDone(ctx, last.StepKey, by)); err != nil {
		return err
	}
	return e.Advance(ctx, runID)
}

// halted loads a halted run and the last attempt of the step it halted
// at, whose outcome is unknown; ErrRunEnded when the run is not so.
func (e *Engine) halted(ctx context.Context, runID string) (*state, *confirm.RunbookStep, error) {
	s, err := e.load(ctx, runID)
	if err != nil {
		return nil, nil, err
	}
	if s.run.Status != confirm.RunbookHalted {
		return nil, nil, ErrRunEnded
	}
	var last *confirm.RunbookStep
	for i := range s.steps {
		if s.steps[i].StepID == s.run.FailedStep && (last == nil || s.steps[i].Seq > last.Seq) {
			last = &s.steps[i]
		}
	}
	if last == nil || last.Status != confirm.StepUnknown {
		return nil, nil, ErrRunEnded
	}
	return s, last, nil
}

// ended is ErrRunEnded for a transition another click or job won first.
func ended(won bool, err error) error {
	if err == nil && !won {
		return ErrRunEnded
	}
	return err
}

// Retry runs a halted run's unknown step again as a new attempt, which
// needs approval as a new call.
func (e *Engine) Retry(ctx context.Context, runID, by string) error {
	s, last, err := e.halted(ctx, runID)
	if err != nil {
		return err
	}
	if err := ended(e.Store.ResumeRunbookRun(ctx, runID)); err != nil {
		return err
	}
	s.run.Status = confirm.RunbookRunning
	sc, i := s.stepConfig(last.Phase, last.StepID)
	if sc == nil {
		return fmt.Errorf("step %q: %w", last.StepID, ErrNoSuchRun)
	}
	if _, err := e.retryStep(ctx, s, last.Phase, i, last.Attempt+1, by); err != nil {
		return err
	}
	return e.Advance(ctx, runID)
}

// retryStep submits attempt of a step after a person's Retry: as a new
// call, gated (Confirm: a person's yes again, whatever the tool says).
func (e *Engine) retryStep(ctx context.Context, s *state, phase string, i, attempt int, by string) (bool, error) {
	sc := phaseSteps(s.rb, phase)[i]
	k := confirm.StepKey{RunID: s.run.ID, Phase: phase, StepID: sc.ID, Attempt: attempt}
	won, err := e.Store.StartRunbookStep(ctx, k, sc.Tool, false)
	if err != nil || !won {
		return false, err
	}
	raw, err := e.Eval.Args(s.rb, phase, i, s.vars(e.now()))
	if err != nil {
		return e.end(ctx, k, confirm.StepFailed, fmt.Sprintf("%sits arguments did not resolve: %v", invalidPrefix, err))
	}
	sc.Confirm = true
	err = e.Exec.SubmitStep(ctx, StepCall{Run: s.run, Key: k, Config: sc, Args: raw})
	if re := (*RefusedError)(nil); errors.As(err, &re) {
		return e.end(ctx, k, confirm.StepFailed, invalidPrefix+re.Reason)
	}
	return false, err
}

// Start stores a new run of rb (parameters validated by the caller) and
// advances it.
func (e *Engine) Start(ctx context.Context, run *confirm.RunbookRun, rb *Config) error {
	if err := e.create(ctx, run, rb); err != nil {
		return err
	}
	return e.Advance(ctx, run.ID)
}

// create stores a new run of rb with its snapshot and shows the whole
// plan, from the start.
func (e *Engine) create(ctx context.Context, run *confirm.RunbookRun, rb *Config) error {
	snap, err := Encode(rb)
	if err != nil {
		return err
	}
	run.Runbook, run.Snapshot = rb.Name, snap
	if err := e.Store.CreateRunbookRun(ctx, run); err != nil {
		return err
	}
	e.Exec.ShowRun(ctx, run, rb, nil)
	return nil
}

// Begin stores a new run of rb like Start, shows its plan, and advances
// it in the background: the caller holds the conversation the run's
// first step takes (the model's runbook__<name> call, run with its
// batch).
func (e *Engine) Begin(ctx context.Context, run *confirm.RunbookRun, rb *Config) error {
	if err := e.create(ctx, run, rb); err != nil {
		return err
	}
	e.Kick(ctx, run.ID)
	return nil
}

// Go runs fn in the background, counted by Wait (the model's turn that
// continues once a run it started has ended).
func (e *Engine) Go(ctx context.Context, fn func(context.Context)) {
	e.wg.Add(1)
	go func() {
		defer e.wg.Done()
		fn(context.WithoutCancel(ctx))
	}()
}

// AdvanceDue advances every due run (the runbooks job): delays passed,
// and after a restart every run where it was.
func (e *Engine) AdvanceDue(ctx context.Context) error {
	live, err := e.Store.LiveRunbookRuns(ctx)
	if err != nil {
		return err
	}
	var errs []error
	for _, r := range live {
		if r.Status != confirm.RunbookRunning {
			continue
		}
		if err := e.Advance(ctx, r.ID); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// CEL evaluates steps with their compiled definitions (CEL `when` and
// `until`, `{{ }}` argument templates), compiled once per snapshot.
type CEL struct {
	mu    sync.Mutex
	cache map[string]*Runbook
}

func (c *CEL) step(rb *Config, phase string, i int) (*Step, error) {
	snap, err := Encode(rb)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	r := c.cache[string(snap)]
	if r == nil {
		if r, err = FromSnapshot(snap); err != nil {
			return nil, err
		}
		if c.cache == nil || len(c.cache) > 256 {
			c.cache = map[string]*Runbook{}
		}
		c.cache[string(snap)] = r
	}
	steps := r.Steps()
	if phase == confirm.PhaseOnFailure {
		steps = r.OnFailure()
	}
	if i < 0 || i >= len(steps) {
		return nil, fmt.Errorf("step %d of %s: %w", i, phase, ErrNoSuchRun)
	}
	return steps[i], nil
}

func (c *CEL) When(rb *Config, phase string, i int, v Vars) (bool, error) {
	s, err := c.step(rb, phase, i)
	if err != nil {
		return false, err
	}
	return s.When(v)
}

func (c *CEL) Args(rb *Config, phase string, i int, v Vars) (json.RawMessage, error) {
	s, err := c.step(rb, phase, i)
	if err != nil {
		return nil, err
	}
	return s.Args(v)
}

func (c *CEL) Done(rb *Config, phase string, i int, v Vars) (bool, error) {
	s, err := c.step(rb, phase, i)
	if err != nil {
		return false, err
	}
	return s.Done(v)
}
