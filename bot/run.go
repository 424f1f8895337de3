package bot

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/airlockhq/airlock/agent"
	"github.com/airlockhq/airlock/confirm"
	"github.com/airlockhq/airlock/gateway"
	"github.com/airlockhq/airlock/model"
	"github.com/airlockhq/airlock/redact"
	"github.com/airlockhq/airlock/tools"
)

// resume runs a fully decided batch and continues the model in its thread.
// decided is the batch as stored when it was decided, or nil to load it
// (see finishBatch).
func (b *Bot) resume(ctx context.Context, conv confirm.Conversation, batchID string, decided *confirm.Batch) error {
	unlock, err := b.lockConversation(ctx, conv.ID)
	if err != nil {
		return err
	}
	defer unlock()
	return b.resumeLocked(ctx, conv, batchID, decided)
}

// resumeLocked is resume for a caller holding the conversation.
func (b *Bot) resumeLocked(ctx context.Context, conv confirm.Conversation, batchID string, decided *confirm.Batch) error {
	batch, err := b.finishBatch(ctx, conv, batchID, decided)
	if err != nil || batch == nil {
		return err
	}
	return b.continueAfter(ctx, conv, batch)
}

// continueAfter gives batch, just completed, to the source its request
// came from (request.go).
func (b *Bot) continueAfter(ctx context.Context, conv confirm.Conversation, batch *confirm.Batch) error {
	return b.sourceOf(conv, batch).Continue(ctx, conv, batch)
}

// finishBatch claims a decided batch, runs its allowed calls in the model's
// order (run status written before and after each), and appends one result
// per call to the conversation. It returns the batch when this worker
// completed it; nil when another worker had it or it was already done.
// The caller holds the conversation's turn lock. decided, when not nil, is
// the batch as stored in the transaction that decided it: a decided batch
// does not change until claimed, so once the claim is won it is the batch
// (running), and it is not loaded again.
func (b *Bot) finishBatch(ctx context.Context, conv confirm.Conversation, batchID string, decided *confirm.Batch) (*confirm.Batch, error) {
	if isGateway(conv) {
		return nil, b.finishGateway(ctx, conv, batchID) // Airlock runs none of a gateway client's calls
	}
	batch, err := b.claim(ctx, batchID, decided)
	if err != nil || batch == nil {
		return nil, err
	}
	return b.runClaimed(ctx, conv, batch)
}

// runClaimed is finishBatch once the batch is claimed: batch is it as
// claimed (running).
func (b *Bot) runClaimed(ctx context.Context, conv confirm.Conversation, batch *confirm.Batch) (*confirm.Batch, error) {
	batchID := batch.ID
	b.trace("claimed")
	calls := make([]confirm.ToolCall, len(batch.Calls))
	decisions := make([]confirm.Decision, len(batch.Calls))
	byKey := make(map[string]confirm.Call, len(batch.Calls))
	for i, c := range batch.Calls {
		calls[i] = confirm.ToolCall{ID: c.CallID, Name: c.Tool, Args: c.RunArgs()}
		byKey[c.Key] = c
		decisions[i] = b.decisionFor(c)
	}
	outs := map[string]*outcome{} // each run's outcome, as stored (or to be)
	awaiting := false             // a runbook call's run has not ended
	results, err := confirm.Execute(ctx, calls, decisions, b.hasTool, func(ctx context.Context, key string, tc confirm.ToolCall) (string, error) {
		c := byKey[key]
		if isRunbookTool(c.Tool) {
			o := &outcome{}
			outs[key] = o
			out, wait, err := b.runbookCall(ctx, conv, batch, c, o)
			awaiting = awaiting || wait
			return out, err
		}
		info := confirm.RunInfo{Platform: conv.Platform, Channel: conv.Channel, Thread: conv.Thread,
			BatchID: batchID, Key: key, RequestedBy: batch.RequestedBy, DecidedBy: c.DecidedBy}
		o := &outcome{}
		outs[key] = o
		return b.runCall(confirm.WithRunInfo(ctx, info), c, tc, o)
	})
	if errors.Is(err, confirm.ErrToolUnavailable) {
		// An allowed call names a tool the bot no longer carries (the
		// config changed while the card waited): nothing of the request
		// runs, and the model is told why.
		b.log.Warn("an allowed call's tool is gone; nothing of the batch runs", "batch", batchID, "err", err)
		results = b.refuseBatch(batch, err)
	} else if err != nil {
		// The stored batch broke another rule (it cannot, short of
		// tampering). Execute refuses before running anything.
		b.log.Error("decisions rejected; nothing runs", "batch", batchID, "err", err)
		return nil, fmt.Errorf("execute batch: %w", err)
	}
	b.trace("ran")
	if awaiting {
		// The batch waits on the run, running: its results go to the
		// model, in its order, once the run has ended (resumeParent).
		b.parkBatch(ctx, conv, batch)
		return nil, nil
	}
	msg := model.Message{Role: model.RoleTool}
	for _, r := range results {
		if c := byKey[r.Key]; len(c.EditedArgs) > 0 && c.Decision.Allowed() {
			// The model asked for other arguments: say what ran.
			r.Content = EditedPrefix + string(c.EditedArgs) + ".\n" + r.Content
		}
		msg.Results = append(msg.Results, model.ToolResult{CallID: r.CallID, Key: r.Key, Name: r.Name, Content: r.Content, IsError: r.IsError})
	}
	stored, err := storedMessage(msg)
	if err != nil {
		return nil, err
	}
	if stepBatch(batch) {
		stored.Role = roleRunbookStep
	}
	// The outcomes and results must be written even when ctx ended while
	// a tool ran.
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	done, err := b.store.CompleteBatch(wctx, batchID, stored)
	if err != nil {
		return nil, fmt.Errorf("complete batch: %w", err)
	}
	if !done {
		return nil, nil
	}
	lc := lateCardFrom(ctx)
	lc.stop()
	fresh := ranBatch(batch, outs)
	if slices.ContainsFunc(batch.Calls, func(c confirm.Call) bool { return c.Flagged }) {
		// Only a batch a person was asked about ever has a card: one that
		// ran unasked (an ungated call) skips the card's change and reload.
		if reloaded := b.refreshCard(ctx, conv, batchID); reloaded != nil {
			fresh = reloaded
		}
	}
	lc.ran()
	b.noteUnknown(ctx, conv, fresh)
	return batch, nil
}

// claim takes a decided batch for this worker and returns it (running),
// or nil when another worker had it or it was not decided. decided, when
// not nil, is the batch as its deciding transaction left it: once the
// claim is won it is the batch, and it is not loaded again.
func (b *Bot) claim(ctx context.Context, batchID string, decided *confirm.Batch) (*confirm.Batch, error) {
	won, err := b.store.ClaimBatch(ctx, batchID, b.cfg.WorkerID)
	if err != nil {
		return nil, fmt.Errorf("claim batch: %w", err)
	}
	if !won {
		return nil, nil
	}
	if decided == nil || decided.ID != batchID || decided.Status != confirm.BatchDecided {
		batch, err := b.store.Batch(ctx, batchID)
		if err != nil {
			return nil, fmt.Errorf("load batch: %w", err)
		}
		return batch, nil
	}
	claimed := *decided
	claimed.Status, claimed.ClaimedBy = confirm.BatchRunning, b.cfg.WorkerID
	return &claimed, nil
}

// hasTool reports whether the bot carries the tool.
func (b *Bot) hasTool(name string) bool {
	if isRunbookTool(name) {
		return b.runbookNamed(name) != nil
	}
	_, ok := b.cfg.Tools.Get(name)
	return ok
}

// ranBatch is batch, done, with the run outcomes in outs.
func ranBatch(batch *confirm.Batch, outs map[string]*outcome) *confirm.Batch {
	done := *batch
	done.Status = confirm.BatchDone
	done.Calls = append([]confirm.Call(nil), batch.Calls...)
	for i, c := range done.Calls {
		if o := outs[c.Key]; o != nil && o.status != "" {
			done.Calls[i].Run, done.Calls[i].Result = o.status, o.result
		}
	}
	return &done
}

// refuseBatch answers every call of a batch that may not run: calls that
// ran before (a crash in between) keep their outcome, the others are not
// executed.
func (b *Bot) refuseBatch(batch *confirm.Batch, why error) []confirm.Result {
	out := make([]confirm.Result, len(batch.Calls))
	for i, c := range batch.Calls {
		r := confirm.Result{Key: c.Key, CallID: c.CallID, Name: c.Tool, IsError: true}
		switch {
		case c.Run == confirm.RunSucceeded:
			r.Content, r.IsError = c.Result, false
		case c.Run == confirm.RunFailed:
			r.Content = c.Result
		case c.Run == confirm.RunUnknown || c.Run == confirm.RunRunning:
			r.Content = confirm.UnknownOutcomeMessage
		case c.Decision.Allowed():
			r.Content = fmt.Sprintf("Not executed: a tool this request needs is no longer available (%v), so none of its calls ran.", why)
		default:
			r.Content, r.Denied = b.decisionFor(c).DenyMessage(), true
		}
		out[i] = r
	}
	return out
}

// decisionFor turns a stored call into the decision confirm.Execute applies.
func (b *Bot) decisionFor(c confirm.Call) confirm.Decision {
	switch {
	case c.Decision.Allowed():
		return confirm.Allow(c.Key)
	case c.Decision == confirm.DecisionExpired:
		return confirm.Deny(c.Key, confirm.ExpiredMessage)
	case c.Decision == confirm.DecisionDenied && c.DenyMessage == "":
		// A person's deny: the message is built from their words (data).
		return confirm.Deny(c.Key, denyMessage(c.DecidedBy, c.DenyReason))
	default:
		return confirm.Deny(c.Key, c.DenyMessage)
	}
}

// runCall runs one allowed call exactly once. The run status goes to
// running before the tool is called and to its outcome after; a call that
// is not in not_started (it ran before a crash, or its outcome is unknown)
// is never run again: its stored outcome answers the model.
// The outcome is left in *o.
func (b *Bot) runCall(ctx context.Context, c confirm.Call, tc confirm.ToolCall, o *outcome) (string, error) {
	won, err := b.store.StartRun(ctx, c.BatchID, c.Key)
	if err != nil {
		return "", fmt.Errorf("not executed: could not record the run: %w", err)
	}
	if !won {
		fresh, err := b.store.Batch(ctx, c.BatchID)
		if err == nil {
			for _, fc := range fresh.Calls {
				if fc.Key == c.Key {
					c = fc
				}
			}
		}
		o.status, o.result = c.Run, c.Result
		switch c.Run {
		case confirm.RunSucceeded:
			return c.Result, nil
		case confirm.RunUnknown:
			if c.Result != "" {
				return "", errors.New(c.Result)
			}
			//lint:ignore ST1005 the message is the sentence the model reads as the call's result
			return "", errors.New(confirm.UnknownOutcomeMessage)
		default:
			return "", errors.New(c.Result)
		}
	}
	tool, ok := b.cfg.Tools.Get(tc.Name)
	if !ok { // checked by Execute; kept for safety
		o.status, o.result = confirm.RunFailed, "tool not available"
		b.finishRun(ctx, c.BatchID, c.Key, o)
		return "", fmt.Errorf("tool %q is not available", tc.Name)
	}
	args, err := b.toolArgs(ctx, c, tc.Args)
	if err != nil {
		// A runbook step's secret is not configured any more: the tool
		// does not run (never with the reference in the secret's place).
		o.status, o.result = confirm.RunFailed, "Not run: "+b.scrub(err.Error())
		b.settleRun(ctx, c, o)
		return "", errors.New(o.result)
	}
	if refusal := b.recheck(context.WithoutCancel(ctx), c); refusal != "" {
		// The yes was given for another preview: the tool is not called.
		o.status, o.result = confirm.RunFailed, refusal
		b.settleRun(ctx, c, o)
		return "", errors.New(refusal)
	}
	b.log.Info("tool run", "batch", c.BatchID, "call", c.Key, "tool", tc.Name)
	ctx, span := b.cfg.Tracer.Start(ctx, SpanToolRun, trace.WithAttributes(
		AttrTool.String(tc.Name),
		AttrBatchID.String(c.BatchID),
		AttrCallKey.String(c.Key),
		AttrDecisionID.String(c.IdempotencyKey),
		AttrDecidedBy.String(c.DecidedBy),
	))
	// A run, once started, is not cancelled with the turn (a shutdown, a
	// closed connection): cutting it off would report "failed" for an
	// action that may have happened. The tool's own timeout bounds it; a
	// process that exits meanwhile leaves it running, hence unknown.
	t0 := time.Now()
	forget := b.runningCall(c.IdempotencyKey, c)
	out, runErr := tool.Run(context.WithoutCancel(ctx), args, c.IdempotencyKey)
	forget()
	elapsed := time.Since(t0)
	status, result := confirm.RunSucceeded, b.scrub(out)
	switch {
	case errors.Is(runErr, tools.ErrOutcomeUnknown):
		// The request may have reached the service (a timeout, a cut
		// connection): the outcome is unknown, never "failed", and the
		// call is not repeated without a person's yes.
		b.log.Warn("tool outcome unknown", "batch", c.BatchID, "call", c.Key, "tool", tc.Name, "err", b.scrub(runErr.Error()))
		status, result = confirm.RunUnknown, confirm.UncertainOutcomeMessage+" ("+b.scrub(runErr.Error())+")"
	case runErr != nil:
		status, result = confirm.RunFailed, b.scrub(runErr.Error())
	}
	b.cfg.Metrics.ToolRun(tc.Name, string(status), elapsed)
	span.SetAttributes(AttrRunStatus.String(string(status)))
	switch status {
	case confirm.RunFailed:
		span.SetStatus(codes.Error, "tool run failed")
	case confirm.RunUnknown:
		span.SetStatus(codes.Error, "tool run outcome unknown")
	}
	span.End()
	o.status, o.result = status, result
	b.settleRun(ctx, c, o)
	if runErr != nil {
		return "", errors.New(result)
	}
	return result, nil
}

// outcome is a run's outcome, as written by FinishRun.
type outcome struct {
	status confirm.RunStatus
	result string
}

// settleRun writes a run's outcome o. The outcome must be written even
// when ctx ended while the tool ran.
func (b *Bot) settleRun(ctx context.Context, c confirm.Call, o *outcome) {
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	b.finishRun(wctx, c.BatchID, c.Key, o)
}

// finishRun records a run's outcome; a failure is logged (the run is left
// running, hence unknown at the next recovery).
func (b *Bot) finishRun(ctx context.Context, batchID, key string, o *outcome) {
	if err := b.store.FinishRun(ctx, batchID, key, o.status, o.result); err != nil {
		b.log.Error("record tool outcome", "batch", batchID, "call", key, "err", err)
	}
}

// scrub removes secrets and URL credentials and queries from text a tool
// produced before it is stored, shown or sent to the model.
func (b *Bot) scrub(s string) string {
	return b.cfg.Redact(redact.URLs(s))
}

// noteUnknown tells the thread about calls whose outcome is unknown and
// that no card shows (calls that ran without approval), each line with
// "I checked — go on" (see postUnknownNotice); a gated call's card says
// it and has the button. batch must be loaded after its runs finished.
func (b *Bot) noteUnknown(ctx context.Context, conv confirm.Conversation, batch *confirm.Batch) {
	p, err := b.platform(conv.Platform)
	if err != nil {
		return
	}
	for _, c := range batch.Calls {
		if c.Run != confirm.RunUnknown || c.CheckedAt != nil || (c.Flagged && batch.CardRef != "") {
			continue
		}
		b.postUnknownNotice(ctx, conv, p, c)
	}
}

// Recover runs at start: it finishes work a dead worker left (see
// RecoverBatches) and asks the model to answer tool results it never saw.
// Only conversations of platforms this process serves are touched.
func (b *Bot) Recover(ctx context.Context) error {
	if !b.enter() {
		return nil
	}
	defer b.leave()
	if err := b.RecoverBatches(ctx); err != nil {
		return err
	}
	if err := b.recoverPreviews(ctx); err != nil {
		b.log.Error("recover previews", "err", err)
	}
	convs, err := b.store.UnansweredConversations(ctx)
	if err != nil {
		return err
	}
	for _, id := range convs {
		conv, err := b.conversation(ctx, id)
		if err != nil {
			return fmt.Errorf("load conversation: %w", err)
		}
		if _, err := b.platform(conv.Platform); err != nil {
			continue // a process serving that platform will answer it
		}
		if _, _, gw := gateway.SessionOf(conv.Thread); gw {
			continue // a gateway client's session: no model answers it
		}
		unlock, ok, err := b.tryLockConversation(ctx, id)
		if err != nil || !ok {
			continue // a live worker has it
		}
		hist, err := b.agent.History(ctx, id)
		if err == nil && agent.EndsWithResults(hist) {
			b.log.Warn("continuing a conversation left without an answer", "conversation", id)
			rctx, span := b.startResume(ctx, resumeRecovery, conv, "")
			err = b.agent.Converse(rctx, conv, agent.Requester{User: agent.LastAuthor(hist)}, hist)
			endSpan(span, err)
		}
		unlock()
		if err != nil {
			b.log.Error("continue conversation", "conversation", id, "err", err)
		}
	}
	return nil
}

// RecoverBatches finishes batches a dead worker left: decided but never
// run, or left running, whose calls that were running become unknown
// (never run again) before the batch is finished and the conversation
// continued. A conversation a live worker holds is left to it.
func (b *Bot) RecoverBatches(ctx context.Context) error {
	if !b.enter() {
		return nil
	}
	defer b.leave()
	var ids []string
	for _, st := range []confirm.BatchStatus{confirm.BatchRunning, confirm.BatchDecided} {
		some, err := b.store.BatchesIn(ctx, st)
		if err != nil {
			return fmt.Errorf("list %s batches: %w", st, err)
		}
		ids = append(ids, some...)
	}
	for _, id := range ids {
		if err := b.recoverBatch(ctx, id); err != nil {
			b.log.Error("recover batch", "batch", id, "err", err)
		}
	}
	return b.postUncarded(ctx)
}

func (b *Bot) recoverBatch(ctx context.Context, id string) error {
	_, conv, p, err := b.served(ctx, id)
	if err != nil || p == nil {
		return err // nil p: a process serving that platform will finish it
	}
	unlock, ok, err := b.tryLockConversation(ctx, conv.ID)
	if err != nil || !ok {
		return err // a live worker holds the conversation
	}
	defer unlock()
	// Reload under the lock: the holder may have finished meanwhile.
	batch, err := b.store.Batch(ctx, id)
	if err != nil {
		return fmt.Errorf("reload batch: %w", err)
	}
	if b.awaitsLiveRun(ctx, batch) {
		return nil // it waits on a runbook run, which takes it up when it ends
	}
	switch {
	case batch.Status == confirm.BatchRunning && isGateway(conv):
		// Claimed to be completed, by a worker that died: its calls run
		// at the client (a running one is the client's, not unknown).
		if err := b.store.ReleaseBatch(ctx, id); err != nil {
			return fmt.Errorf("release batch: %w", err)
		}
	case batch.Status == confirm.BatchRunning:
		if _, err := b.store.RecoverRunning(ctx, id); err != nil {
			return fmt.Errorf("mark running calls unknown: %w", err)
		}
		if err := b.store.ReleaseBatch(ctx, id); err != nil {
			return fmt.Errorf("release batch: %w", err)
		}
		b.log.Warn("recovered a batch a dead worker left running", "batch", id, "claimed_by", batch.ClaimedBy)
	case batch.Status == confirm.BatchDecided:
	default:
		return nil
	}
	rctx, span := b.startResume(ctx, resumeRecovery, conv, id)
	err = b.resumeLocked(rctx, conv, id, nil)
	endSpan(span, err)
	return err
}

// Sweep expires pending calls past their deadline (answering the model
// for them and continuing their conversations) and posts reminders before
// expiry.
func (b *Bot) Sweep(ctx context.Context) error { return b.sweep(ctx, true) }

// sweep is Sweep; the sweep job leaves escalation to its own job.
func (b *Bot) sweep(ctx context.Context, escalate bool) error {
	if !b.enter() {
		return nil
	}
	defer b.leave()
	b.sweeping.Lock()
	defer b.sweeping.Unlock()
	if err := b.remind(ctx); err != nil {
		b.log.Error("reminders", "err", err)
	}
	if escalate {
		if err := b.escalate(ctx); err != nil {
			b.log.Error("escalation", "err", err)
		}
	}
	ids, err := b.store.ExpiredBatches(ctx)
	if err != nil {
		return fmt.Errorf("list expired: %w", err)
	}
	for _, id := range ids {
		_, conv, p, err := b.served(ctx, id)
		if err != nil {
			return err
		}
		if p == nil {
			continue // a process serving that platform expires it and continues the conversation
		}
		n, err := b.store.ExpirePending(ctx, id, SystemActor, confirm.ExpiredMessage)
		if err != nil {
			return fmt.Errorf("expire batch: %w", err)
		}
		if n == 0 {
			continue
		}
		batch, err := b.store.Batch(ctx, id)
		if err != nil {
			return fmt.Errorf("load batch: %w", err)
		}
		b.log.Info("approval expired", "batch", id, "calls", n)
		for range n {
			b.cfg.Metrics.Decision("expired", b.now().Sub(batch.CreatedAt))
		}
		for _, c := range batch.Calls {
			if c.Decision == confirm.DecisionExpired {
				b.cfg.Metrics.CallExpired(c.Tool)
			}
		}
		waited := b.recordResolved(ctx, nil, batch, confirm.DecisionExpired, "expired")
		b.refreshCard(ctx, conv, id)
		rctx, span := b.startResume(ctx, resumeExpiry, conv, id, waited...)
		err = b.resume(rctx, conv, id, nil)
		endSpan(span, err)
		if err != nil {
			b.log.Error("continue after expiry", "batch", id, "err", err)
		}
	}
	return nil
}

// Mentioner is implemented by platforms that can mention approvers.
type Mentioner interface {
	Mention(approvers confirm.Approvers) string
}

// remind posts, once per batch, a reminder mentioning the approvers
// RemindBefore ahead of expiry. A lead not shorter than the timeout sends
// none.
func (b *Bot) remind(ctx context.Context) error {
	lead := b.cfg.RemindBefore
	if lead <= 0 || lead >= b.cfg.Timeout {
		return nil
	}
	now := b.now()
	ids, err := b.store.DueReminders(ctx, now.Add(lead))
	if err != nil {
		return err
	}
	for _, id := range ids {
		batch, conv, p, err := b.served(ctx, id)
		if err != nil {
			return err
		}
		if p == nil {
			continue // a process serving that platform reminds
		}
		won, err := b.store.MarkReminded(ctx, id)
		if err != nil || !won {
			if err != nil {
				b.log.Error("mark reminded", "batch", id, "err", err)
			}
			continue
		}
		left := batch.ExpiresAt.Sub(now).Round(time.Second)
		msg := fmt.Sprintf("%s: a request here still needs a decision and expires in %s (%s): %s",
			mention(p, b.approversOf(conv), "Approvers"), left, batch.ExpiresAt.UTC().Format("15:04:05 UTC"), waitingCalls(batch))
		if err := p.Post(ctx, b.cardPlace(ctx, conv, id), msg); err != nil {
			b.log.Error("post reminder", "batch", id, "err", err)
		}
	}
	return nil
}

// served loads a batch, its conversation and the platform that serves it
// here: p is nil when this process does not serve that platform.
func (b *Bot) served(ctx context.Context, id string) (*confirm.Batch, confirm.Conversation, Platform, error) {
	batch, err := b.store.Batch(ctx, id)
	if err != nil {
		return nil, confirm.Conversation{}, nil, fmt.Errorf("load batch: %w", err)
	}
	conv, err := b.conversation(ctx, batch.ConversationID)
	if err != nil {
		return nil, confirm.Conversation{}, nil, fmt.Errorf("load conversation: %w", err)
	}
	p, err := b.platform(conv.Platform)
	if err != nil {
		p = nil
	}
	return batch, conv, p, nil
}

// mention names people on the platform (a mention that notifies them where
// the platform can), or fallback when the set names nobody.
func mention(p Platform, set confirm.Approvers, fallback string) string {
	who := strings.Join(set.Users, ", ")
	if m, ok := p.(Mentioner); ok {
		who = m.Mention(set)
	}
	if who == "" {
		return fallback
	}
	return who
}

// waitingCalls lists a batch's waiting calls with their read-backs,
// each quoted inert.
func waitingCalls(batch *confirm.Batch) string {
	var waiting []string
	for _, c := range batch.Calls {
		if c.Decision == confirm.DecisionPending {
			waiting = append(waiting, fmt.Sprintf("%d. %s", c.Position+1, quote(c.Summary)))
		}
	}
	return strings.Join(waiting, "; ")
}
