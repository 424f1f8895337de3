package bot

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/airlockhq/airlock/agent"
	"github.com/airlockhq/airlock/card"
	"github.com/airlockhq/airlock/confirm"
	"github.com/airlockhq/airlock/model"
	"github.com/airlockhq/airlock/runbook"
	"github.com/airlockhq/airlock/tools"
)

// The model's runbook tools: each runbook offered in a channel is a tool
// of the model there, runbook__<name>, whose parameters are the runbook's
// schema. A call of it is one call of the model's reply like any other:
// the reply pauses as a whole for its gated calls (the runbook call itself
// needs no card unless a rule asks for one; its steps are gated one by
// one), and once the reply is decided and runs, the call starts the run
// in the thread (the run records the batch and the call's key). The batch
// then waits on the run, running, with nothing of it held: when the run
// has ended the batch is taken up again, the call's result is the run's
// summary, and the reply's results go to the model in the model's order.
// After a restart, recovery takes the batch up again and finds the run by
// its parent; a run still going keeps the batch waiting.

// runbookTool is a runbook as a tool of the model.
type runbookTool struct{ rb *runbook.Runbook }

// runbookToolNote ends a runbook tool's description, so the model knows
// what a call does and what comes back.
const runbookToolNote = "Calling this tool starts the runbook in this thread: its steps run in order, and those that need approval wait for a person. You get the run's summary (each step's outcome and result) once the run has ended."

func (t runbookTool) Spec() model.ToolSpec {
	desc := strings.TrimSpace(t.rb.Description() + " " + runbookToolNote)
	return model.ToolSpec{Name: runbook.ToolName(t.rb.Name()), Description: desc, Parameters: t.rb.Parameters()}
}

func (t runbookTool) Confirm() bool { return false }

// Validate checks the arguments against the runbook's schema; the error
// names the parameter and what is allowed.
func (t runbookTool) Validate(args json.RawMessage) error {
	_, err := t.rb.ParamsJSON(args)
	return err
}

// Summary is the read-back: the runbook and its parameters, defaults
// filled.
func (t runbookTool) Summary(args json.RawMessage) (string, error) {
	params, err := t.rb.ParamsJSON(args)
	if err != nil {
		return "", err
	}
	raw, err := runbook.MarshalJSON(params)
	if err != nil {
		return "", err
	}
	return "run runbook " + t.rb.Name() + " " + string(raw), nil
}

// Run is never called: the bot starts the run (runbookCall).
func (t runbookTool) Run(context.Context, json.RawMessage, string) (string, error) {
	return "", errors.New("a runbook is started by the bot, not run as a tool")
}

// isRunbookTool reports whether name is a runbook's tool (config refuses
// other tools and MCP servers whose names would start so).
func isRunbookTool(name string) bool { return strings.HasPrefix(name, runbook.ToolPrefix) }

// runbookNamed is the configured runbook whose tool name is, or nil.
func (b *Bot) runbookNamed(tool string) *runbook.Runbook {
	if !isRunbookTool(tool) {
		return nil
	}
	name := strings.TrimPrefix(tool, runbook.ToolPrefix)
	for _, r := range b.cfg.Runbooks {
		if r.Name() == name {
			return r
		}
	}
	return nil
}

// runbookToolIn returns the runbook tool name when the conversation's
// channel offers that runbook. ok is false for any other name.
func (b *Bot) runbookToolIn(conv confirm.Conversation, name string) (tools.Tool, bool) {
	for _, r := range b.offeredRunbooks(conv.Platform, conv.Channel, conv.DM) {
		if runbook.ToolName(r.Name()) == name {
			return runbookTool{rb: r}, true
		}
	}
	return nil, false
}

// runbookSpecs are the runbook tools the model sees in the conversation.
func (b *Bot) runbookSpecs(conv confirm.Conversation) []model.ToolSpec {
	var out []model.ToolSpec
	for _, r := range b.offeredRunbooks(conv.Platform, conv.Channel, conv.DM) {
		out = append(out, runbookTool{rb: r}.Spec())
	}
	return out
}

// runbookCall is a model's runbook call as its batch runs: it starts the
// run the first time (wait: the batch waits on it), reports wait while
// the run goes on, and once the run has ended records the call's outcome
// (succeeded when the run did, else failed) with the run's summary as its
// result.
func (b *Bot) runbookCall(ctx context.Context, conv confirm.Conversation, batch *confirm.Batch, c confirm.Call, o *outcome) (out string, wait bool, err error) {
	switch c.Run {
	case confirm.RunNotStarted:
	case confirm.RunSucceeded:
		o.status, o.result = c.Run, c.Result
		return c.Result, false, nil
	case confirm.RunUnknown, confirm.RunRunning:
		o.status, o.result = confirm.RunUnknown, c.Result
		if c.Result == "" {
			//lint:ignore ST1005 the message is the sentence the model reads as the call's result
			return "", false, errors.New(confirm.UnknownOutcomeMessage)
		}
		return "", false, errors.New(c.Result)
	default:
		o.status, o.result = c.Run, c.Result
		return "", false, errors.New(c.Result)
	}
	e := b.runbookEngine()
	run, err := e.Store.RunbookRunByParent(ctx, batch.ID, c.Key)
	switch {
	case errors.Is(err, confirm.ErrNotFound):
		rb := b.runbookNamed(c.Tool)
		if rb == nil {
			return b.endRunbookCall(ctx, c, o, confirm.RunFailed, fmt.Sprintf("Not executed: runbook %q is not configured.", strings.TrimPrefix(c.Tool, runbook.ToolPrefix)))
		}
		params, err := rb.ParamsJSON(c.RunArgs())
		if err != nil {
			return b.endRunbookCall(ctx, c, o, confirm.RunFailed, b.cfg.Redact("Not executed: "+err.Error()))
		}
		raw, err := runbook.MarshalJSON(params)
		if err != nil {
			return b.endRunbookCall(ctx, c, o, confirm.RunFailed, "Not executed: "+err.Error())
		}
		cfg := rb.Config()
		run := &confirm.RunbookRun{Params: raw, RequestedBy: batch.RequestedBy, ConversationID: conv.ID, ParentBatch: batch.ID, ParentKey: c.Key}
		if err := e.Begin(ctx, run, &cfg); err != nil {
			// Whether it was stored is not known: the batch waits, and
			// recovery looks the run up by its parent again.
			b.log.Error("start the model's runbook run", "batch", batch.ID, "call", c.Key, "err", err)
		} else {
			b.log.Info("runbook started by the model", "batch", batch.ID, "call", c.Key, "run", run.ID, "runbook", rb.Name())
		}
		return "", true, nil
	case err != nil:
		b.log.Error("look up the model's runbook run", "batch", batch.ID, "call", c.Key, "err", err)
		return "", true, nil
	case !run.Status.Final():
		return "", true, nil
	}
	steps, err := e.Store.RunbookSteps(ctx, run.ID)
	if err != nil {
		b.log.Error("load the steps of the model's runbook run", "run", run.ID, "err", err)
		return "", true, nil
	}
	rb, err := runbook.Decode(run.Snapshot)
	if err != nil {
		return b.endRunbookCall(ctx, c, o, confirm.RunFailed, "The run ended, but its definition could not be read: "+err.Error())
	}
	status := confirm.RunFailed
	if run.Status == confirm.RunbookSucceeded {
		status = confirm.RunSucceeded
	}
	return b.endRunbookCall(ctx, c, o, status, b.scrub(RunSummary(run, rb, steps)))
}

// endRunbookCall records a runbook call's outcome, as runCall records a
// tool's (the run taken to running, then to its outcome).
func (b *Bot) endRunbookCall(ctx context.Context, c confirm.Call, o *outcome, status confirm.RunStatus, result string) (string, bool, error) {
	won, err := b.store.StartRun(ctx, c.BatchID, c.Key)
	if err != nil {
		return "", false, fmt.Errorf("not executed: could not record the run: %w", err)
	}
	if !won {
		// Recorded by an earlier worker: its outcome stands.
		if fresh, err := b.store.Batch(ctx, c.BatchID); err == nil {
			for _, fc := range fresh.Calls {
				if fc.Key == c.Key {
					status, result = fc.Run, fc.Result
				}
			}
		}
		o.status, o.result = status, result
		if status == confirm.RunSucceeded {
			return result, false, nil
		}
		return "", false, errors.New(result)
	}
	o.status, o.result = status, result
	b.finishRun(context.WithoutCancel(ctx), c.BatchID, c.Key, o)
	if status != confirm.RunSucceeded {
		return "", false, errors.New(result)
	}
	return result, false, nil
}

// parkBatch leaves a batch that waits on a runbook run running: its card
// shows where the calls stand.
func (b *Bot) parkBatch(ctx context.Context, conv confirm.Conversation, batch *confirm.Batch) {
	if batch.CardRef != "" {
		b.refreshCard(ctx, conv, batch.ID)
	}
}

// awaitsRunbook reports whether the batch has an allowed runbook call: it
// may wait on its run.
func awaitsRunbook(batch *confirm.Batch) bool {
	for _, c := range batch.Calls {
		if c.Decision.Allowed() && isRunbookTool(c.Tool) && c.Run == confirm.RunNotStarted {
			return true
		}
	}
	return false
}

// awaitsLiveRun reports whether a running batch waits on a runbook run
// its call started that has not ended: recovery leaves it (nothing of it
// runs; the run's end takes it up). A run that ended without taking it up
// (the process died in between) does not hold it.
func (b *Bot) awaitsLiveRun(ctx context.Context, batch *confirm.Batch) bool {
	e := b.runbookEngine()
	if batch.Status != confirm.BatchRunning || !awaitsRunbook(batch) {
		return false
	}
	for _, c := range batch.Calls {
		if !c.Decision.Allowed() || !isRunbookTool(c.Tool) || c.Run != confirm.RunNotStarted {
			continue
		}
		run, err := e.Store.RunbookRunByParent(ctx, batch.ID, c.Key)
		if err == nil && !run.Status.Final() {
			return true
		}
	}
	return false
}

// resumeParent takes up the model's batch whose runbook call started the
// run, now ended: the batch completes and the model continues.
func (b *Bot) resumeParent(ctx context.Context, run *confirm.RunbookRun) {
	if !b.enter() {
		return // recovery at the next start takes it up
	}
	defer b.leave()
	conv, err := b.conversation(ctx, run.ConversationID)
	if err != nil {
		b.log.Error("continue after a runbook run", "run", run.ID, "err", err)
		return
	}
	if _, err := b.platform(conv.Platform); err != nil {
		return // a process serving that platform takes it up
	}
	unlock, err := b.lockConversation(ctx, conv.ID)
	if err != nil {
		b.log.Error("continue after a runbook run", "run", run.ID, "err", err)
		return
	}
	defer unlock()
	batch, err := b.store.Batch(ctx, run.ParentBatch)
	if err != nil {
		b.log.Error("continue after a runbook run", "run", run.ID, "batch", run.ParentBatch, "err", err)
		return
	}
	switch batch.Status {
	case confirm.BatchRunning:
		// Nothing of it runs (a running call holds the conversation,
		// held here): it waited on the run.
		if err := b.store.ReleaseBatch(ctx, batch.ID); err != nil {
			b.log.Error("continue after a runbook run", "run", run.ID, "err", err)
			return
		}
	case confirm.BatchDecided:
	default:
		return
	}
	if err := b.resumeLocked(ctx, conv, batch.ID, nil); err != nil {
		b.log.Error("continue after a runbook run", "run", run.ID, "batch", batch.ID, "err", err)
	}
}

// waitingOnRunbook answers a turn written while a batch of the thread
// waits on a runbook run the model started: the words are kept as context
// (the model sees them once it continues) and the author is told.
func (b *Bot) waitingOnRunbook(ctx context.Context, conv confirm.Conversation, t Turn) (bool, error) {
	if len(b.cfg.Runbooks) == 0 {
		return false, nil
	}
	open, err := b.store.OpenBatches(ctx, conv.ID)
	if err != nil {
		return false, fmt.Errorf("load open batches: %w", err)
	}
	for _, id := range open {
		batch, err := b.store.Batch(ctx, id)
		if err != nil {
			return false, fmt.Errorf("load batch: %w", err)
		}
		if !awaitsRunbook(batch) {
			continue
		}
		if err := b.appendTurn(ctx, conv.ID, t, model.Message{Role: model.RoleUser, Author: t.User, Text: t.Text, Aside: true}); err != nil {
			return true, err
		}
		return true, b.postIn(ctx, threadOf(conv), "A runbook the agent started is running in this thread; the agent goes on when it has ended. Your message is kept as context. `stop` stops the run.")
	}
	return false, nil
}

// RunSummary is a runbook call's result for the model: how the run ended
// and each step's outcome and result (cut), in the order they ran, then
// the steps that did not run.
func RunSummary(run *confirm.RunbookRun, rb *runbook.Config, steps []confirm.RunbookStep) string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "Runbook %s (run %s) ", run.Runbook, run.ID)
	switch {
	case run.Status == confirm.RunbookStopped && run.StoppedBy != "":
		fmt.Fprintf(&sb, "was stopped by %s", run.StoppedBy)
		if run.FailedStep != "" {
			fmt.Fprintf(&sb, " at step %s", run.FailedStep)
		}
	case run.FailedStep != "" && run.Status != confirm.RunbookSucceeded:
		fmt.Fprintf(&sb, "%s at step %s", run.Status, run.FailedStep)
	default:
		sb.WriteString(string(run.Status))
	}
	sb.WriteString(".\nParameters: " + string(run.Params) + "\nSteps:")
	seen := map[string]bool{}
	for _, st := range steps {
		seen[st.Phase+"/"+st.StepID] = true
		name := st.StepID
		if st.Phase == confirm.PhaseOnFailure {
			name += " (on_failure)"
		}
		fmt.Fprintf(&sb, "\n- %s (%s), attempt %d: %s", name, st.Tool, st.Attempt, st.Status)
		if st.MarkedBy != "" {
			fmt.Fprintf(&sb, " (marked done by %s)", st.MarkedBy)
		}
		if st.Result != "" {
			sb.WriteString(": " + agent.CutText(st.Result, summaryResultChars))
		}
	}
	for _, sc := range rb.Steps {
		if !seen[confirm.PhaseMain+"/"+sc.ID] {
			fmt.Fprintf(&sb, "\n- %s (%s): not run", sc.ID, sc.Tool)
		}
	}
	return sb.String()
}

// summaryResultChars bounds each step's result in a run's summary.
const summaryResultChars = 2000

// withStep marks the card of a runbook step's batch as that step's:
// Airlock's call, started by the run's requester, never the agent's words.
func (b *Bot) withStep(c card.Card, batch *confirm.Batch) card.Card {
	if !stepBatch(batch) {
		return c
	}
	e := b.runbookEngine()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	st, err := e.Store.RunbookStepByBatch(ctx, batch.ID)
	if err != nil {
		return c
	}
	run, err := e.Store.RunbookRun(ctx, st.RunID)
	if err != nil {
		return c
	}
	s := &card.Step{Runbook: run.Runbook, ID: st.StepID, StartedBy: run.RequestedBy, Attempt: st.Attempt}
	if rb, err := runbook.Decode(run.Snapshot); err == nil {
		for _, sc := range append(append([]runbook.StepConfig(nil), rb.Steps...), rb.OnFailure...) {
			if sc.ID == st.StepID && sc.Retry != nil {
				s.Attempts = sc.Retry.Max()
			}
		}
	}
	c.Step, c.Intro = s, ""
	return c
}
