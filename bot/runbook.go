package bot

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/airlockhq/airlock/card"
	"github.com/airlockhq/airlock/confirm"
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
const roleRunbookStep = "runbook_step"

// JobRunbooks advances due runs (retry delays; every run after a restart).
const JobRunbooks = "runbooks"

// ErrRunbooksOff: the store keeps no runbook runs, or no runbook is
// configured.
var ErrRunbooksOff = errors.New("runbooks are not available")

// ErrNotAllowedToStop: only the run's requester or an approver of its
// channel may stop it (and only approvers may mark done or retry).
var ErrNotAllowedToStop = errors.New("only the requester or an approver may do that")

// stepBatch reports whether a batch is a runbook step's: its one call
// carries the step's idempotency key, not <batch id>/<key>. (Batch ids
// are random, so no model batch has a key of another form.)
func stepBatch(batch *confirm.Batch) bool {
	return batch != nil && len(batch.Calls) == 1 && !strings.HasPrefix(batch.Calls[0].IdempotencyKey, batch.ID+"/")
}

// runbooks is the bot's runbook engine, nil when off.
func (b *Bot) runbookEngine() *runbook.Engine {
	b.rbOnce.Do(func() {
		rs, ok := b.cfg.Store.(runbook.Store)
		if !ok {
			return
		}
		eval := b.cfg.RunbookEval
		if eval == nil {
			eval = &runbook.CEL{}
		}
		b.rb = &runbook.Engine{Store: rs, Exec: &runbookExec{b: b}, Eval: eval, Now: b.now, Log: b.log}
		if m, ok := b.cfg.Metrics.(RunbookMetrics); ok {
			b.rb.StepEnded = func(name string, outcome confirm.StepStatus, d time.Duration) {
				m.RunbookStep(name, string(outcome), d)
			}
		}
	})
	return b.rb
}

// Runbooks returns the runbook engine (nil when runbooks are off).
func (b *Bot) Runbooks() *runbook.Engine { return b.runbookEngine() }

// StartRunbook starts a run of rb in the thread for user, with params
// already validated against rb's schema, and advances it as far as it
// goes without a person. It returns the run's id.
func (b *Bot) StartRunbook(ctx context.Context, th Thread, user string, rb *runbook.Config, params map[string]any, parentBatch, parentKey string) (string, error) {
	e := b.runbookEngine()
	if e == nil {
		return "", ErrRunbooksOff
	}
	conv, err := b.store.Conversation(ctx, th.Platform, th.Channel, th.Thread, false)
	if err != nil {
		return "", fmt.Errorf("conversation: %w", err)
	}
	raw, err := json.Marshal(params)
	if err != nil {
		return "", fmt.Errorf("runbook params: %w", err)
	}
	run := &confirm.RunbookRun{Params: raw, RequestedBy: user, ConversationID: conv.ID, ParentBatch: parentBatch, ParentKey: parentKey}
	if err := e.Start(ctx, run, rb); err != nil {
		return run.ID, err
	}
	return run.ID, nil
}

// runbookStepDone routes a step batch's end to the engine; the caller
// holds the conversation, which the next step takes: it advances in the
// background.
func (b *Bot) runbookStepDone(ctx context.Context, batch *confirm.Batch) {
	e := b.runbookEngine()
	if e == nil {
		return
	}
	e.KickStep(ctx, batch.ID)
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
// (ErrRunbooksOff when no runbook is configured).
func (b *Bot) runOf(ctx context.Context, runID string) (*runbook.Engine, *confirm.RunbookRun, confirm.Conversation, error) {
	e := b.runbookEngine()
	if e == nil {
		return nil, nil, confirm.Conversation{}, ErrRunbooksOff
	}
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
	if e == nil {
		return nil
	}
	return e.AdvanceDue(ctx)
}

// runbookExec is the bot as the engine's executor.
type runbookExec struct {
	b    *Bot
	msgs runMessages
}

// SubmitStep plans the step's one call like a model's reply (planBatch),
// adds the step's confirm/approvals, stores the batch with the step's
// idempotency key, links it to the step, and posts its card or runs it.
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
	var batch *confirm.Batch
	for attempt := 1; ; attempt++ {
		var used map[string]*confirm.Grant
		batch, used, err = b.planBatch(ctx, conv, requester, reply)
		if err != nil {
			return err
		}
		if err := b.addStepGates(ctx, conv, requester, batch, s); err != nil {
			return err
		}
		// The step's gates may have changed whether a person is asked:
		// the call's tool's preview runs only if one is.
		batch.Calls[0].Preview = confirm.Preview{}
		b.markPreview(&batch.Calls[0])
		assistant, err := storedMessage(reply)
		if err != nil {
			return err
		}
		assistant.Role = roleRunbookStep
		err = b.store.CreateBatch(ctx, batch, assistant)
		if errors.Is(err, confirm.ErrGrantInactive) && attempt < maxPlanAttempts {
			continue
		}
		if err != nil {
			return fmt.Errorf("store step batch: %w", err)
		}
		b.notePauseDecisions(ctx, conv, batch, used)
		break
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
		// its attempts (the card said "up to N attempts").
		prev, err := b.store.Batch(ctx, s.Covered)
		if err != nil {
			return fmt.Errorf("the approved attempt of the step: %w", err)
		}
		if len(prev.Calls) == 1 && prev.Calls[0].Decision.Allowed() && prev.Calls[0].Tool == c.Tool {
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

// ShowRun posts the run message once and edits it after, coalesced.
func (x *runbookExec) ShowRun(ctx context.Context, run *confirm.RunbookRun, rb *runbook.Config, steps []confirm.RunbookStep) {
	x.msgs.show(ctx, x.b, run, rb, steps)
}

// Finished tells the run's starter it ended.
func (x *runbookExec) Finished(ctx context.Context, run *confirm.RunbookRun, rb *runbook.Config, steps []confirm.RunbookStep) {
	if m, ok := x.b.cfg.Metrics.(RunbookMetrics); ok {
		m.RunbookRun(run.Runbook, string(run.Status))
	}
	if run.ParentBatch != "" {
		// The model's call started it: its reply's results go to the
		// model now (in the background: the caller may hold the
		// conversation).
		x.b.runbookEngine().Go(ctx, func(ctx context.Context) { x.b.resumeParent(ctx, run) })
	}
}

// RunbookMetrics is implemented by metrics that count runbook runs by
// runbook and outcome.
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

// runMessages coalesces the edits of run messages: at most one update in
// flight per message, the latest state wins.
type runMessages struct {
	mu   sync.Mutex
	runs map[string]*runMessage
}

type runMessage struct {
	busy bool
	next *runView
	last string // the text last rendered: an equal state is not sent again
}

type runView struct {
	run   *confirm.RunbookRun
	rb    *runbook.Config
	steps []confirm.RunbookStep
}

func (m *runMessages) show(ctx context.Context, b *Bot, run *confirm.RunbookRun, rb *runbook.Config, steps []confirm.RunbookStep) {
	v := &runView{run: run, rb: rb, steps: steps}
	m.mu.Lock()
	if m.runs == nil {
		m.runs = map[string]*runMessage{}
	}
	e := m.runs[run.ID]
	if e == nil {
		e = &runMessage{}
		m.runs[run.ID] = e
	}
	if e.busy {
		e.next = v // the update in flight sends it when it is done
		m.mu.Unlock()
		return
	}
	e.busy = true
	m.mu.Unlock()
	for {
		b.renderRun(ctx, v, &e.last)
		m.mu.Lock()
		if e.next == nil {
			e.busy = false
			if v.run.Status.Final() {
				delete(m.runs, run.ID)
			}
			m.mu.Unlock()
			return
		}
		v, e.next = e.next, nil
		m.mu.Unlock()
	}
}

// renderRun posts or edits the run message of v, unless its text is
// *last (what was rendered before); *last is then the text rendered.
func (b *Bot) renderRun(ctx context.Context, v *runView, last *string) {
	conv, err := b.conversation(ctx, v.run.ConversationID)
	if err != nil {
		b.log.Error("run message", "run", v.run.ID, "err", err)
		return
	}
	p, err := b.platform(conv.Platform)
	if err != nil {
		return
	}
	th := threadOf(conv)
	if v.run.MessageRef == "" {
		// Posted by an earlier render (renders of a run are serialized)?
		if r, err := b.runbookEngine().Store.RunbookRun(ctx, v.run.ID); err == nil {
			v.run.MessageRef = r.MessageRef
		}
	}
	rc := scrubRun(RunCard(v.run, v.rb, v.steps, b.now()), b.cfg.Redact)
	text := rc.Text()
	if text == *last && v.run.MessageRef != "" {
		return // nothing a reader could see changed
	}
	*last = text
	rm, ok := p.(RunMessenger)
	if !ok {
		// A platform without edits gets the start and the end.
		if v.run.MessageRef == "" {
			if err := p.Post(ctx, th, text); err == nil {
				_ = b.runbookEngine().Store.SetRunbookMessageRef(ctx, v.run.ID, "posted")
			}
		} else if v.run.Status.Final() {
			_ = p.Post(ctx, th, text)
		}
		return
	}
	if v.run.MessageRef == "" {
		ref, err := rm.PostRun(ctx, th, rc)
		if err != nil {
			b.log.Error("post run message", "run", v.run.ID, "err", err)
			*last = "" // not shown: the next state is sent, even if equal
			return
		}
		if err := b.runbookEngine().Store.SetRunbookMessageRef(ctx, v.run.ID, ref); err != nil {
			b.log.Error("store run message ref", "run", v.run.ID, "err", err)
		}
		return
	}
	if err := rm.UpdateRun(ctx, th, v.run.MessageRef, rc); err != nil {
		b.log.Error("update run message", "run", v.run.ID, "err", err)
		*last = "" // not shown: the next state is sent, even if equal
	}
}

// RunText is the run message as lines: the runbook, who started it, the
// parameters, and every step with where it stands.
func RunText(run *confirm.RunbookRun, rb *runbook.Config, steps []confirm.RunbookStep, now time.Time) string {
	return RunCard(run, rb, steps, now).Text()
}

// RunCard is the run message as the platforms lay it out (card.Run).
func RunCard(run *confirm.RunbookRun, rb *runbook.Config, steps []confirm.RunbookStep, now time.Time) card.Run {
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
		if last == nil && phase == confirm.PhaseOnFailure && run.Status.Final() && run.Status != confirm.RunbookFailed {
			state = "not needed"
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
					state += " (" + last.FinishedAt.Sub(last.CreatedAt).Round(time.Millisecond).String() + ")"
				}
				if last.MarkedBy != "" {
					state += ", marked done by " + last.MarkedBy
				}
			case confirm.StepFailed:
				state = "failed (" + cutText(last.Result, 200) + ")"
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
	switch word {
	case "runbooks":
		return true, b.postIn(ctx, th, runbookList(offered))
	case "stop":
		return true, b.stopInThread(ctx, th, t)
	}
	_, rest, _ := strings.Cut(text, " ")
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

// stopInThread stops the newest live run of the thread (`stop`).
func (b *Bot) stopInThread(ctx context.Context, th Thread, t Turn) error {
	e := b.runbookEngine()
	if e == nil {
		return b.postIn(ctx, th, "No runbook runs here.")
	}
	conv, err := b.store.FindConversation(ctx, th.Platform, th.Channel, th.Thread)
	if errors.Is(err, confirm.ErrNotFound) {
		return b.postIn(ctx, th, "No runbook is running in this thread.")
	}
	if err != nil {
		return err
	}
	live, err := e.Store.LiveRunbookRuns(ctx)
	if err != nil {
		return err
	}
	id := ""
	for _, r := range live {
		if r.ConversationID == conv.ID {
			id = r.ID
		}
	}
	if id == "" {
		return b.postIn(ctx, th, "No runbook is running in this thread.")
	}
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
