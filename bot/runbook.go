package bot

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/airlockhq/airlock/agent"
	"github.com/airlockhq/airlock/card"
	"github.com/airlockhq/airlock/confirm"
	"github.com/airlockhq/airlock/internal/jsonobj"
	"github.com/airlockhq/airlock/model"
	"github.com/airlockhq/airlock/runbook"
)

// Runbook runs go through the one decision path: each step is a one-call
// batch planned by planBatch (the policy, rules, quorum, grants), plus the
// step's confirm/approvals, which only add; a gated step posts the usual
// card and waits without holding the conversation; the decision is the
// same Decide; the call runs in runClaimed with the idempotency key
// <run id>/<step id>/<attempt>. A step's batch is kept out of the model's
// history (its messages have roleRunbookStep) and its end goes to the
// engine instead of the model.

// roleRunbookStep is the stored role of a step batch's messages: the
// model never sees them (it never made those calls).
const roleRunbookStep = confirm.RoleRunbookStep

// JobRunbooks advances due runs (retry delays; every run after a restart).
const JobRunbooks = "runbooks"

// ErrNotAllowedToStop: only the run's requester or an approver of its
// channel may stop it (and only approvers may mark done or retry).
var ErrNotAllowedToStop = errors.New("only the requester or an approver may do that")

// stepBatch reports whether a batch is a runbook step's: its one call
// carries the step's idempotency key, not <batch id>/<key>. (Batch ids
// are random, so no model batch has a key of another form.)
func stepBatch(batch *confirm.Batch) bool {
	return batch != nil && len(batch.Calls) == 1 && !strings.HasPrefix(batch.Calls[0].IdempotencyKey, batch.ID+"/")
}

// newRunbookEngine is the bot's runbook engine: runs are the store's
// (Store holds them), so it always exists; with no runbook configured
// nothing starts a run.
func newRunbookEngine(b *Bot) *runbook.Engine {
	eval := b.cfg.RunbookEval
	if eval == nil {
		eval = &runbook.CEL{}
	}
	m := b.cfg.Metrics
	return &runbook.Engine{Store: b.cfg.Store, Exec: &runbookExec{b: b}, Eval: eval, Now: b.now, Log: b.log,
		StepEnded: func(name string, outcome confirm.StepStatus, d time.Duration) {
			m.RunbookStep(name, string(outcome), d)
		}}
}

// runbookEngine is the bot's runbook engine.
func (b *Bot) runbookEngine() *runbook.Engine { return b.rb }

// Runbooks returns the runbook engine.
func (b *Bot) Runbooks() *runbook.Engine { return b.rb }

// StartRunbook starts a run of rb in the thread for user, with params
// already validated against rb's schema, and advances it as far as it
// goes without a person. It returns the run's id.
func (b *Bot) StartRunbook(ctx context.Context, th Thread, user string, rb *runbook.Config, params map[string]any, parentBatch, parentKey string) (string, error) {
	e := b.runbookEngine()
	conv, err := b.store.Conversation(ctx, th.Platform, th.Channel, th.Thread, false)
	if err != nil {
		return "", fmt.Errorf("conversation: %w", err)
	}
	raw, err := runbook.MarshalJSON(params)
	if err != nil {
		return "", fmt.Errorf("runbook params: %w", err)
	}
	run := &confirm.RunbookRun{Params: raw, RequestedBy: user, ConversationID: conv.ID, ParentBatch: parentBatch, ParentKey: parentKey}
	if err := e.Start(ctx, run, rb); err != nil {
		return run.ID, err
	}
	return run.ID, nil
}

// StopRunbook stops a run at user's word: its requester or an approver of
// its channel. The waiting step's call is denied; nothing more runs.
func (b *Bot) StopRunbook(ctx context.Context, runID, user string, roles []string) error {
	e, run, conv, err := b.runOf(ctx, runID)
	if err != nil {
		return err
	}
	if user != run.RequestedBy && !b.isApprover(ctx, conv, user, roles) {
		return ErrNotAllowedToStop
	}
	return e.Stop(ctx, runID, user, func(batchID string) error {
		n, err := b.store.AbandonPending(ctx, batchID, user, "Not executed: "+user+" stopped the runbook run.")
		if err != nil {
			return err
		}
		if n == 0 {
			return nil // decided already: it runs or ran, and ends as it does
		}
		return b.resume(ctx, conv, batchID, nil)
	})
}

// MarkRunbookDone treats a halted run's unknown step as succeeded (an
// approver's word) and goes on.
func (b *Bot) MarkRunbookDone(ctx context.Context, runID, user string, roles []string) error {
	return b.approverAction(ctx, runID, user, roles, (*runbook.Engine).MarkDone)
}

// RetryRunbook runs a halted run's unknown step again as a new attempt,
// which needs approval as a new call.
func (b *Bot) RetryRunbook(ctx context.Context, runID, user string, roles []string) error {
	return b.approverAction(ctx, runID, user, roles, (*runbook.Engine).Retry)
}

func (b *Bot) approverAction(ctx context.Context, runID, user string, roles []string, act func(*runbook.Engine, context.Context, string, string) error) error {
	e, _, conv, err := b.runOf(ctx, runID)
	if err != nil {
		return err
	}
	if !b.isApprover(ctx, conv, user, roles) {
		return ErrNotAllowedToStop
	}
	return act(e, ctx, runID, user)
}

// runOf is the runbook engine, a run and its conversation
func (b *Bot) runOf(ctx context.Context, runID string) (*runbook.Engine, *confirm.RunbookRun, confirm.Conversation, error) {
	e := b.runbookEngine()
	run, err := e.Store.RunbookRun(ctx, runID)
	if errors.Is(err, confirm.ErrNotFound) {
		err = fmt.Errorf("run %q: %w", runID, runbook.ErrNoSuchRun)
	}
	if err != nil {
		return nil, nil, confirm.Conversation{}, err
	}
	conv, err := b.conversation(ctx, run.ConversationID)
	if err != nil {
		return nil, nil, confirm.Conversation{}, err
	}
	return e, run, conv, nil
}

// isApprover reports whether user is an approver of the conversation's
// channel.
func (b *Bot) isApprover(ctx context.Context, conv confirm.Conversation, user string, roles []string) bool {
	return b.cfg.Channels.CanApprove(ctx, conv.Platform, conv.Channel, conv.DM, user, roles)
}

// runbookJob advances due runs.
func (b *Bot) runbookJob(ctx context.Context) error {
	e := b.runbookEngine()
	return e.AdvanceDue(ctx)
}

// stepConfigOf is the configuration of the step whose batch batchID is,
// as its run's snapshot holds it; ok is false for a batch of no step.
func (b *Bot) stepConfigOf(ctx context.Context, batchID string) (sc runbook.StepConfig, ok bool, err error) {
	e := b.runbookEngine()
	st, err := e.Store.RunbookStepByBatch(ctx, batchID)
	if errors.Is(err, confirm.ErrNotFound) {
		return runbook.StepConfig{}, false, nil
	}
	if err != nil {
		return runbook.StepConfig{}, false, err
	}
	run, err := e.Store.RunbookRun(ctx, st.RunID)
	if err != nil {
		return runbook.StepConfig{}, false, err
	}
	rb, err := runbook.Decode(run.Snapshot)
	if err != nil {
		return runbook.StepConfig{}, false, err
	}
	steps := rb.Steps
	if st.Phase == confirm.PhaseOnFailure {
		steps = rb.OnFailure
	}
	for _, s := range steps {
		if s.ID == st.StepID {
			return s, true, nil
		}
	}
	return runbook.StepConfig{}, false, fmt.Errorf("step %q of run %s: %w", st.StepID, st.RunID, runbook.ErrNoSuchRun)
}

// runbookExec is the bot as the engine's executor.
type runbookExec struct {
	b       *Bot
	posting runPosting
}

// SubmitStep asks the approval core for the step's one call (a request
// like a model's reply, request.go), adding the step's confirm/approvals,
// stores the batch with the step's idempotency key, links it to the step,
// and posts its card or runs it.
func (x *runbookExec) SubmitStep(ctx context.Context, s runbook.StepCall) error {
	b := x.b
	conv, err := b.conversation(ctx, s.Run.ConversationID)
	if err != nil {
		return err
	}
	p, err := b.platform(conv.Platform)
	if err != nil {
		return err
	}
	unlock, err := b.lockConversation(ctx, conv.ID)
	if err != nil {
		return err
	}
	locked := true
	defer func() {
		if locked {
			unlock()
		}
	}()
	// No words of the agent: the card says which step of which runbook,
	// started by whom (withStep).
	reply := model.Message{Role: model.RoleAssistant, ToolCalls: []confirm.ToolCall{{
		ID: s.Key.IdempotencyKey(), Name: s.Config.Tool, Args: s.Args,
	}}}
	requester := asker{User: s.Run.RequestedBy}
	// The policy and the tool's schema judge the arguments as they will
	// run, the step's secrets put in (in memory); the batch stores, shows
	// and binds the approval to them with the references.
	judged := reply
	if args, err := runbook.ExpandSecrets(s.Args, s.Config.SecretPaths(), b.stepSecret); err == nil {
		judged.ToolCalls = []confirm.ToolCall{{ID: reply.ToolCalls[0].ID, Name: s.Config.Tool, Args: args}}
	}
	assistant, err := storedMessage(reply)
	if err != nil {
		return err
	}
	assistant.Role = roleRunbookStep
	batch, err := b.request(ctx, approvalRequest{conv: conv, requester: requester, reply: judged, stored: assistant,
		shape: func(ctx context.Context, batch *confirm.Batch) error {
			if c := &batch.Calls[0]; c.Decision != confirm.DecisionInvalid {
				c.Args, c.Summary = s.Args, b.summary(reply.ToolCalls[0])
			} else {
				c.Args = s.Args
			}
			if err := b.addStepGates(ctx, conv, requester, batch, s); err != nil {
				return err
			}
			if batch.Status == confirm.BatchPending {
				// A step's card counts against limits.pending_per_channel as a
				// turn's does: in a full channel the step is refused, nothing
				// stored, and the run goes on as after a failed step.
				if n, full, err := b.pendingFull(ctx, conv.Platform, conv.Channel); err != nil {
					return err
				} else if full {
					return &runbook.RefusedError{Reason: fmt.Sprintf(
						"this channel already has %d requests waiting for a decision (limits.pending_per_channel); decide some of them, then start the run again", n)}
				}
			}
			// The step's gates may have changed whether a person is asked:
			// the call's tool's preview runs only if one is.
			batch.Calls[0].Preview = confirm.Preview{}
			b.markPreview(&batch.Calls[0])
			return nil
		}})
	if err != nil {
		return fmt.Errorf("step: %w", err)
	}
	if _, err := b.runbookEngine().Store.SetRunbookStepBatch(ctx, s.Key, batch.ID); err != nil {
		return err
	}
	if batch.Status == confirm.BatchPending {
		// The card waits for a person; the conversation is not held.
		err := b.postCard(ctx, conv, p, batch, "")
		b.startPreviews(ctx, conv, batch)
		return err
	}
	done, err := b.finishBatch(ctx, conv, batch.ID, batch)
	unlock()
	locked = false
	if err != nil || done == nil {
		return err
	}
	fresh, err := b.store.Batch(ctx, batch.ID)
	if err != nil {
		return err
	}
	return b.runbookEngine().StepDone(ctx, fresh)
}

// addStepGates applies a step's confirm and approvals to its planned
// call: they only add. A call the policy let through needs a person when
// the step says confirm (a grant of the thread may still cover it, as it
// would a flagged model call); approvals raise the call's quorum, and a
// quorum of more than one is never covered by a grant.
func (b *Bot) addStepGates(ctx context.Context, conv confirm.Conversation, requester asker, batch *confirm.Batch, s runbook.StepCall) error {
	c := &batch.Calls[0]
	c.IdempotencyKey = s.Key.IdempotencyKey()
	if c.Decision == confirm.DecisionInvalid || c.Decision == confirm.DecisionDeniedByRule || c.Decision == confirm.DecisionDenied {
		return nil
	}
	if s.Covered != "" {
		// A retry of a failed attempt: the approval of the step covers
		// its attempts (the card said "up to N attempts"), but only when
		// they run exactly the arguments that were approved, after any
		// edit (a critical call's phrase was typed for those): other
		// arguments get a card of their own.
		prev, err := b.store.Batch(ctx, s.Covered)
		if err != nil {
			return fmt.Errorf("the approved attempt of the step: %w", err)
		}
		if len(prev.Calls) == 1 && prev.Calls[0].Flagged && prev.Calls[0].Decision.Allowed() && prev.Calls[0].Tool == c.Tool &&
			jsonobj.Same(prev.Calls[0].RunArgs(), c.Args) {
			now := b.now().UTC()
			c.Decision, c.DecidedBy, c.DecidedAt = prev.Calls[0].Decision, prev.Calls[0].DecidedBy, &now
			c.GrantID = prev.Calls[0].GrantID
			batch.Status = confirm.BatchDecided
			return nil
		}
	}
	need := s.Config.Confirm || s.Config.Approvals > 0
	if !need {
		return nil
	}
	reason := confirm.Reason{Kind: confirm.ReasonRunbookStep}
	if !c.Flagged {
		c.Flagged = true
		c.Reasons = append(c.Reasons, reason)
		c.Approvals, c.Grantable = b.approvalsOf(confirm.Verdict{})
		c.Risk = confirm.RiskMedium
		c.Decision, c.DecidedBy, c.DecidedAt = confirm.DecisionPending, "", nil
		if s.Config.Approvals <= 1 {
			if g, err := b.grantFor(ctx, conv, *c, requester, b.now().UTC(), map[string][]confirm.Grant{}); err != nil {
				return err
			} else if g != nil {
				now := b.now().UTC()
				c.Decision, c.DecidedBy, c.DecidedAt, c.GrantID = confirm.DecisionAllowedByGrant, grantActor(g.ID), &now, g.ID
			}
		}
	}
	if s.Config.Approvals > c.Approvals {
		c.Approvals = s.Config.Approvals
	}
	if c.Approvals > 1 {
		c.Grantable = false
		if c.Decision == confirm.DecisionAllowedByGrant {
			c.Decision, c.DecidedBy, c.DecidedAt, c.GrantID = confirm.DecisionPending, "", nil, ""
		}
	}
	batch.Status = confirm.BatchDecided
	if c.Decision == confirm.DecisionPending {
		batch.Status = confirm.BatchPending
	}
	return nil
}

// ShowRun shows the run as it now stands: its message is posted once and
// then kept in sync with the run by card sync (rendered from storage,
// each change once where the platform lets it, the rest by the card-sync
// job, under the platform's rate limits).
func (x *runbookExec) ShowRun(ctx context.Context, run *confirm.RunbookRun, rb *runbook.Config, steps []confirm.RunbookStep) {
	x.b.showRun(ctx, &x.posting, run)
}

// Finished tells the run's starter it ended.
func (x *runbookExec) Finished(ctx context.Context, run *confirm.RunbookRun, rb *runbook.Config, steps []confirm.RunbookStep) {
	x.b.cfg.Metrics.RunbookRun(run.Runbook, string(run.Status))
	if run.ParentBatch != "" {
		// The model's call started it: its reply's results go to the
		// model now (in the background: the caller may hold the
		// conversation).
		x.b.runbookEngine().Go(ctx, func(ctx context.Context) { x.b.resumeParent(ctx, run) })
	}
}

// RunbookMetrics count runbook runs and steps by runbook and outcome.
type RunbookMetrics interface {
	RunbookRun(runbook, outcome string)
	RunbookStep(runbook, outcome string, d time.Duration)
}

// RunMessenger is implemented by platforms that post a run message and
// edit it in place, with its buttons (card.Run.Actions; a click comes
// back as RunAction). Others get the run's start and end as lines.
type RunMessenger interface {
	PostRun(ctx context.Context, th Thread, r card.Run) (ref string, err error)
	UpdateRun(ctx context.Context, th Thread, ref string, r card.Run) error
}

// runView is a run as its message shows it.
type runView struct {
	run   *confirm.RunbookRun
	rb    *runbook.Config
	steps []confirm.RunbookStep
}

// loadRun loads a run with its runbook (its snapshot) and its steps.
func (b *Bot) loadRun(ctx context.Context, id string) (*runView, error) {
	e := b.runbookEngine()
	run, err := e.Store.RunbookRun(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("load run %s: %w", id, err)
	}
	rb, err := runbook.Decode(run.Snapshot)
	if err != nil {
		return nil, err
	}
	steps, err := e.Store.RunbookSteps(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("load steps of run %s: %w", id, err)
	}
	return &runView{run: run, rb: rb, steps: steps}, nil
}

// runCard is the run message of v, scrubbed.
func (b *Bot) runCard(ctx context.Context, v *runView) card.Run {
	r := scrubRun(RunCard(v.run, v.rb, v.steps, b.stepsDecided(ctx, v.steps)), b.cfg.Redact)
	if b.cfg.ConsoleURL != "" {
		r.PageURL = strings.TrimSuffix(b.cfg.ConsoleURL, "/") + "/ui/runs/" + v.run.ID
	}
	return r
}

// runPosting serialises, per run, this process's post of the run's
// message (one show posts it; the others update it), and remembers the
// runs whose end line it posted on a platform without edits.
type runPosting struct {
	mu    sync.Mutex
	locks map[string]*runLock
	ended cache[string, bool]
}

type runLock struct {
	mu   sync.Mutex
	refs int
}

func (p *runPosting) lock(runID string) func() {
	p.mu.Lock()
	if p.locks == nil {
		p.locks = map[string]*runLock{}
	}
	l := p.locks[runID]
	if l == nil {
		l = &runLock{}
		p.locks[runID] = l
	}
	l.refs++
	p.mu.Unlock()
	l.mu.Lock()
	return func() {
		l.mu.Unlock()
		p.mu.Lock()
		if l.refs--; l.refs == 0 {
			delete(p.locks, runID)
		}
		p.mu.Unlock()
	}
}

// showRun posts the run's message when it has none yet, else records a
// change of the run and renders its message (card sync). A platform
// without edits gets the run's start and its end as lines.
func (b *Bot) showRun(ctx context.Context, posting *runPosting, run *confirm.RunbookRun) {
	ctx = context.WithoutCancel(ctx)
	conv, err := b.conversation(ctx, run.ConversationID)
	if err != nil {
		b.log.Error("run message", "run", run.ID, "err", err)
		return
	}
	p, err := b.platform(conv.Platform)
	if err != nil {
		return
	}
	rm, ok := p.(RunMessenger)
	if !ok {
		b.showRunLines(ctx, posting, p, conv, run.ID)
		return
	}
	s := confirm.Subject{Kind: confirm.SubjectRun, ID: run.ID}
	if run.MessageRef == "" && b.postRun(ctx, posting, rm, conv, run.ID) {
		return
	}
	if b.syncSubject(ctx, s) {
		return
	}
	// A message posted but not listed (by an older release): listed now,
	// behind, for the card-sync job.
	if fresh, err := b.runbookEngine().Store.RunbookRun(ctx, run.ID); err == nil && fresh.MessageRef != "" {
		th := threadOf(conv)
		b.rememberMsg(ctx, confirm.CardMessage{RunID: run.ID, Kind: confirm.CardRun, Platform: th.Platform, Channel: th.Channel, Thread: th.Thread, Ref: fresh.MessageRef})
		b.cs.nudge()
	}
}

// postRun posts the run's message unless a show posted it meanwhile, and
// records it (the run's message_ref, and a card-sync message at the
// run's version read before the state it shows). It reports whether the
// show is done: the message was posted now, or could not be (the next
// show tries again).
func (b *Bot) postRun(ctx context.Context, posting *runPosting, rm RunMessenger, conv confirm.Conversation, runID string) bool {
	unlock := posting.lock(runID)
	defer unlock()
	s := confirm.Subject{Kind: confirm.SubjectRun, ID: runID}
	version, err := b.store.SubjectVersion(ctx, s)
	if err != nil {
		b.log.Error("run message version", "run", runID, "err", err)
		return true
	}
	v, err := b.loadRun(ctx, runID)
	if err != nil {
		b.log.Error("run message", "run", runID, "err", err)
		return true
	}
	if v.run.MessageRef != "" {
		return false // posted by an earlier show: this one is a change
	}
	th := threadOf(conv)
	ref, err := rm.PostRun(ctx, th, b.runCard(ctx, v))
	if err != nil {
		b.log.Error("post run message", "run", runID, "err", err)
		return true
	}
	if err := b.runbookEngine().Store.SetRunbookMessageRef(ctx, runID, ref); err != nil {
		b.log.Error("store run message ref", "run", runID, "err", err)
	}
	if b.rememberMsg(ctx, confirm.CardMessage{RunID: runID, Kind: confirm.CardRun, Platform: th.Platform, Channel: th.Channel, Thread: th.Thread, Ref: ref, Version: version}) {
		b.cs.nudge() // a change while it was posted leaves it behind
	}
	return true
}

// showRunLines gives a platform without edits the run's start and its
// end, each once by this process.
func (b *Bot) showRunLines(ctx context.Context, posting *runPosting, p Platform, conv confirm.Conversation, runID string) {
	unlock := posting.lock(runID)
	defer unlock()
	v, err := b.loadRun(ctx, runID)
	if err != nil {
		b.log.Error("run message", "run", runID, "err", err)
		return
	}
	text := b.runCard(ctx, v).Text()
	switch {
	case v.run.MessageRef == "":
		if err := p.Post(ctx, threadOf(conv), text); err == nil {
			_ = b.runbookEngine().Store.SetRunbookMessageRef(ctx, runID, "posted")
		}
	case v.run.Status.Final():
		if ended, _ := posting.ended.get(runID); !ended {
			posting.ended.put(runID, true)
			_ = p.Post(ctx, threadOf(conv), text)
		}
	}
}

// stepsDecided is when the call of each finished step was decided (batch
// id → time), from the bot's cache (a decision's time never changes) or
// its batch.
func (b *Bot) stepsDecided(ctx context.Context, steps []confirm.RunbookStep) map[string]time.Time {
	out := map[string]time.Time{}
	for _, st := range steps {
		if st.BatchID == "" || st.Status.Active() || st.Status == confirm.StepSkipped {
			continue
		}
		if t, ok := b.stepDecided.get(st.BatchID); ok {
			out[st.BatchID] = t
			continue
		}
		batch, err := b.store.Batch(ctx, st.BatchID)
		if err != nil || len(batch.Calls) != 1 || batch.Calls[0].DecidedAt == nil {
			continue // shown from the step's start
		}
		out[st.BatchID] = *batch.Calls[0].DecidedAt
		b.stepDecided.put(st.BatchID, *batch.Calls[0].DecidedAt)
	}
	return out
}

// RunText is the run message as lines: the runbook, who started it, the
// parameters, and every step with where it stands.
func RunText(run *confirm.RunbookRun, rb *runbook.Config, steps []confirm.RunbookStep, decided map[string]time.Time) string {
	return RunCard(run, rb, steps, decided).Text()
}

// RunCard is the run message as the platforms lay it out (card.Run).
// decided is when each step's call was decided (by batch id): a step's
// time runs from then, so the wait for its approver is not counted.
func RunCard(run *confirm.RunbookRun, rb *runbook.Config, steps []confirm.RunbookStep, decided map[string]time.Time) card.Run {
	out := card.Run{ID: run.ID, Runbook: run.Runbook, RequestedBy: run.RequestedBy, Status: run.Status, Params: string(run.Params)}
	if run.Status == confirm.RunbookHalted {
		out.HaltedAt = run.FailedStep
	}
	line := func(phase string, sc runbook.StepConfig) {
		var last *confirm.RunbookStep
		for i := range steps {
			if steps[i].Phase == phase && steps[i].StepID == sc.ID {
				last = &steps[i]
			}
		}
		state := "waiting"
		if last == nil && run.Status.Final() {
			// The run ended before it got to the step.
			state = "not run"
			if phase == confirm.PhaseOnFailure && run.Status != confirm.RunbookFailed {
				state = "not needed"
			}
		}
		if last != nil {
			switch last.Status {
			case confirm.StepStarted:
				state = "running"
			case confirm.StepWaiting:
				state = "needs approval, or running once allowed"
			case confirm.StepSucceeded:
				state = "succeeded"
				if last.FinishedAt != nil {
					from := last.CreatedAt
					if t, ok := decided[last.BatchID]; ok && t.After(from) {
						from = t
					}
					state += " (" + last.FinishedAt.Sub(from).Round(time.Millisecond).String() + ")"
				}
				if last.MarkedBy != "" {
					state += ", marked done by " + last.MarkedBy
				}
			case confirm.StepFailed:
				state = "failed (" + agent.CutText(last.Result, 200) + ")"
			case confirm.StepSkipped:
				state = "skipped: its when is false (" + agent.CutText(sc.When, 120) + ")"
			default:
				state = string(last.Status)
			}
			if last.Attempt > 1 {
				state += fmt.Sprintf(", attempt %d", last.Attempt)
			}
		}
		out.Steps = append(out.Steps, card.RunStep{ID: sc.ID, Tool: sc.Tool, State: state})
	}
	for _, sc := range rb.Steps {
		line(confirm.PhaseMain, sc)
	}
	for _, sc := range rb.OnFailure {
		line(confirm.PhaseOnFailure, sc)
	}
	return out
}

// scrubRun removes secrets from what a run message shows that a model, a
// tool or a person wrote: the parameters and the step states (results).
func scrubRun(r card.Run, redact func(string) string) card.Run {
	r.Params = redact(r.Params)
	steps := make([]card.RunStep, len(r.Steps))
	for i, s := range r.Steps {
		s.State = redact(s.State)
		steps[i] = s
	}
	r.Steps = steps
	return r
}

// offeredRunbooks are the runbooks offered where the turn was written:
// every configured one, or those its channels entry names.
func (b *Bot) offeredRunbooks(platform, channel string, dm bool) []*runbook.Runbook {
	e, ok := b.cfg.Channels.entry(platform, channel, dm)
	if !ok {
		return nil
	}
	var out []*runbook.Runbook
	for _, r := range b.cfg.Runbooks {
		if e.Runbooks == nil || containsString(e.Runbooks, r.Name()) {
			out = append(out, r)
		}
	}
	return out
}

func containsString(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// runbookCommand answers `run NAME k=v ...`, `runbooks` and `stop` in a
// turn (a mention's text, or the terminal's /run, /runbooks, /stop)
// without the model. handled is false for any other text.
func (b *Bot) runbookCommand(ctx context.Context, t Turn) (handled bool, err error) {
	text := strings.TrimSpace(t.Text)
	word, _, _ := strings.Cut(text, " ")
	word = strings.ToLower(word)
	if word != "run" && word != "runbooks" && word != "stop" {
		if t.Command {
			return true, b.postIn(ctx, Thread{Platform: t.Platform, Channel: t.Channel, Thread: t.Thread}, "Unknown command.")
		}
		return false, nil
	}
	if len(b.cfg.Runbooks) == 0 && !t.Command {
		return false, nil // no runbooks configured: the words go to the model as before
	}
	th := Thread{Platform: t.Platform, Channel: t.Channel, Thread: t.Thread}
	offered := b.offeredRunbooks(t.Platform, t.Channel, t.DM)
	_, rest, _ := strings.Cut(text, " ")
	switch word {
	case "runbooks":
		return true, b.postIn(ctx, th, runbookList(offered))
	case "stop":
		return true, b.stopInThread(ctx, th, t, strings.TrimSpace(rest))
	}
	// A run is a request like a turn: it counts against its author's
	// limits.turns_per_minute (`runbooks` and `stop` do not: stopping
	// must always be possible); a command worked again (the inbox) was
	// counted by its first attempt.
	if !t.Replayed {
		if over, err := b.overTurnLimit(ctx, t, "No runbook was started; wait a minute and run it again."); err != nil || over {
			return true, err
		}
	}
	name, args, err := runbook.ParseCommand(rest)
	if err != nil {
		return true, b.postIn(ctx, th, "I could not read that command: "+err.Error()+"\n"+runbookList(offered))
	}
	var rb *runbook.Runbook
	for _, r := range offered {
		if r.Name() == name {
			rb = r
		}
	}
	if rb == nil {
		return true, b.postIn(ctx, th, fmt.Sprintf("There is no runbook %q here. %s", name, runbookList(offered)))
	}
	params, err := rb.Params(args)
	if err != nil {
		return true, b.postIn(ctx, th, fmt.Sprintf("Runbook %s was not started: %v", rb.Name(), err))
	}
	// Nor may it add a waiting card to a full channel: refused before
	// anything is stored.
	if full, err := b.channelFull(ctx, th, "Runbook "+rb.Name()+" was not started; decide some of them, then run it again."); err != nil || full {
		return true, err
	}
	// A run more in a thread where something already waits: say what, so
	// the new card is not taken for the only one.
	if note, err := b.waitingNote(ctx, th, t.Command); err != nil {
		b.log.Error("what waits in the thread", "err", err)
	} else if note != "" {
		if err := b.postIn(ctx, th, note+" Starting run "+rb.Name()+" as well."); err != nil {
			return true, err
		}
	}
	cfg := rb.Config()
	// A run is started at most once per delivery: the delivery is done
	// before the run starts, so a kill in between loses the command
	// (the person sees no run and asks again) rather than starting a
	// second run when it is worked again.
	if t.Inbox != "" {
		if err := b.store.FinishInbox(ctx, t.Platform, t.Inbox); err != nil {
			return true, fmt.Errorf("mark the command's delivery done: %w", err)
		}
	}
	if _, err := b.StartRunbook(ctx, th, t.User, &cfg, params, "", ""); err != nil {
		b.log.Error("start runbook", "runbook", rb.Name(), "err", err)
		return true, b.postIn(ctx, th, "Runbook "+rb.Name()+" could not start; it is logged.")
	}
	return true, nil
}

// runbookList is the runbooks offered, with their parameters.
func runbookList(offered []*runbook.Runbook) string {
	if len(offered) == 0 {
		return "No runbooks are offered here."
	}
	var sb strings.Builder
	sb.WriteString("Runbooks offered here:")
	for _, r := range offered {
		fmt.Fprintf(&sb, "\n- %s", r.Name())
		var ps []string
		for _, p := range r.ParamSpecs() {
			ps = append(ps, paramLine(p))
		}
		if len(ps) > 0 {
			sb.WriteString(" " + strings.Join(ps, " "))
		}
		if d := r.Description(); d != "" {
			sb.WriteString(": " + d)
		}
	}
	return sb.String()
}

// commandWord is how a person writes a command where the turn came from:
// "/stop" in the terminal (Turn.Command), "@airlock stop" elsewhere.
func commandWord(terminal bool, word string) string {
	if terminal {
		return "/" + word
	}
	return "@airlock " + word
}

// liveRunsIn are the thread's runs that have not ended, oldest first;
// nil when the thread holds no conversation.
func (b *Bot) liveRunsIn(ctx context.Context, th Thread) ([]confirm.RunbookRun, *confirm.Conversation, error) {
	conv, err := b.store.FindConversation(ctx, th.Platform, th.Channel, th.Thread)
	if errors.Is(err, confirm.ErrNotFound) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, err
	}
	e := b.runbookEngine()
	live, err := e.Store.LiveRunbookRuns(ctx)
	if err != nil {
		return nil, nil, err
	}
	var out []confirm.RunbookRun
	for _, r := range live {
		if r.ConversationID == conv.ID {
			out = append(out, r)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].CreatedAt.Before(out[j].CreatedAt) })
	return out, &conv, nil
}

// runWhere says where a live run stands, e.g. ", at step restart,
// waiting for a decision (request abcdefgh)" ("" between steps).
func (b *Bot) runWhere(ctx context.Context, r confirm.RunbookRun) string {
	if r.Status == confirm.RunbookHalted {
		return ", halted at step " + r.FailedStep + " (its outcome is unknown)"
	}
	steps, err := b.runbookEngine().Store.RunbookSteps(ctx, r.ID)
	if err != nil {
		return ""
	}
	for _, st := range steps {
		if !st.Status.Active() {
			continue
		}
		s := ", at step " + st.StepID
		if batch, err := b.store.Batch(ctx, st.BatchID); err == nil && batch.Status == confirm.BatchPending {
			s += ", waiting for a decision (request " + shortID(batch.ID) + ")"
		}
		return s
	}
	return ""
}

// shortID is a request's id as cards name it: its first 8 characters.
func shortID(id string) string {
	if len(id) > 8 {
		return id[:8]
	}
	return id
}

// waitingNote says what already waits in the thread, "" when nothing: its
// live runs and the model's waiting card. terminal picks the commands'
// spelling.
func (b *Bot) waitingNote(ctx context.Context, th Thread, terminal bool) (string, error) {
	live, conv, err := b.liveRunsIn(ctx, th)
	if err != nil || conv == nil {
		return "", err // nil conv: the thread holds nothing yet
	}
	var parts []string
	for _, r := range live {
		parts = append(parts, "run "+r.ID+" of "+r.Runbook+b.runWhere(ctx, r))
	}
	pauses, err := b.modelPauses(ctx, *conv)
	if err != nil {
		return "", err
	}
	for _, p := range pauses {
		parts = append(parts, "the agent's request "+shortID(p.ID)+", waiting for a decision")
	}
	if len(parts) == 0 {
		return "", nil
	}
	note := "Already waiting here: " + strings.Join(parts, "; ") + "."
	if terminal {
		note += " /card shows every waiting card."
	}
	if len(live) > 0 {
		note += " " + commandWord(terminal, "stop") + " RUN stops a run."
	}
	return note, nil
}

// stopInThread stops a live run of the thread (`stop [RUN]`): the one
// named (its id, or the start of it), or the only one; with several and
// none named, it lists them and stops nothing.
func (b *Bot) stopInThread(ctx context.Context, th Thread, t Turn, which string) error {
	live, _, err := b.liveRunsIn(ctx, th)
	if err != nil {
		return err
	}
	if len(live) == 0 {
		return b.postIn(ctx, th, "No runbook is running in this thread.")
	}
	stop := commandWord(t.Command, "stop")
	var named []confirm.RunbookRun
	for _, r := range live {
		if which == "" || strings.HasPrefix(r.ID, which) {
			named = append(named, r)
		}
	}
	list := func(runs []confirm.RunbookRun) string {
		var sb strings.Builder
		for _, r := range runs {
			fmt.Fprintf(&sb, "\n- %s %s: %s, started by %s%s", stop, r.ID, r.Runbook, r.RequestedBy, b.runWhere(ctx, r))
		}
		return sb.String()
	}
	switch {
	case len(named) == 0:
		return b.postIn(ctx, th, fmt.Sprintf("No run going here starts with %q. The runs going here:%s", which, list(live)))
	case len(named) > 1 && which == "":
		return b.postIn(ctx, th, "Several runs are going here; say which to stop:"+list(named))
	case len(named) > 1:
		return b.postIn(ctx, th, fmt.Sprintf("More than one run starts with %q; say more of its id:%s", which, list(named)))
	}
	id := named[0].ID
	switch err := b.StopRunbook(ctx, id, t.User, t.Roles); {
	case errors.Is(err, ErrNotAllowedToStop):
		return b.postIn(ctx, th, "Only the person who started the run or an approver can stop it.")
	case errors.Is(err, runbook.ErrRunEnded):
		return b.postIn(ctx, th, "That run has already ended.")
	case err != nil:
		return err
	}
	return nil
}

// paramLine is one parameter as the list shows it: name=<type> or the
// allowed values, optional ones in brackets with their default.
func paramLine(p runbook.ParamSpec) string {
	v := p.Type
	if len(p.Enum) > 0 {
		var vs []string
		for _, e := range p.Enum {
			vs = append(vs, fmt.Sprint(e))
		}
		v = strings.Join(vs, "|")
	}
	if v == "" {
		v = "value"
	}
	s := p.Name + "=" + v
	if !p.Required {
		if p.HasDefault {
			s += fmt.Sprintf(" (default %v)", p.Default)
		}
		s = "[" + s + "]"
	}
	return s
}
