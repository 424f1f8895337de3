package bot

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/airlockhq/airlock/confirm"
)

// Span names the bot records (see Config.Tracer).
const (
	// SpanTurn covers one HandleTurn.
	SpanTurn = "airlock.turn"
	// SpanResume covers one continuation of a conversation outside a
	// turn: after the deciding click, after expiry, or at recovery.
	SpanResume = "airlock.resume"
	// SpanApprovalWait covers a call that needed a person, from the pause
	// (its batch's creation) to its decision; recorded when it is decided.
	SpanApprovalWait = "airlock.approval_wait"
	// SpanToolRun covers one run of a tool.
	SpanToolRun = "airlock.tool_run"
)

// Span attribute keys. Values are ids, names and outcomes only: never tool
// arguments or results, model or user text, or deny reasons.
const (
	AttrPlatform          = attribute.Key("airlock.platform")
	AttrChannel           = attribute.Key("airlock.channel")
	AttrConversationID    = attribute.Key("airlock.conversation.id")
	AttrRequester         = attribute.Key("airlock.requester")      // platform user id
	AttrResumeTrigger     = attribute.Key("airlock.resume.trigger") // click, expiry, recovery
	AttrBatchID           = attribute.Key("airlock.batch.id")
	AttrCallKey           = attribute.Key("airlock.call.key")
	AttrTool              = attribute.Key("airlock.tool.name")
	AttrDecisionID        = attribute.Key("airlock.decision.id")      // the call's idempotency key, <batch id>/<call key>
	AttrDecisionOutcome   = attribute.Key("airlock.decision.outcome") // allowed, denied, expired, abandoned
	AttrDecidedBy         = attribute.Key("airlock.decided_by")       // platform user id, or "airlock", "policy", "rule:<name>", "grant:<id>"
	AttrApprovalsRequired = attribute.Key("airlock.approvals.required")
	AttrApprovalsVotes    = attribute.Key("airlock.approvals.votes")
	AttrRunStatus         = attribute.Key("airlock.run.status") // succeeded, failed, unknown
)

// Resume triggers.
const (
	resumeClick    = "click"
	resumeExpiry   = "expiry"
	resumeRecovery = "recovery"
)

func convAttrs(conv confirm.Conversation) []attribute.KeyValue {
	return []attribute.KeyValue{
		AttrPlatform.String(conv.Platform),
		AttrChannel.String(conv.Channel),
		AttrConversationID.Int64(conv.ID),
	}
}

// startTurn opens the span of a turn; the conversation id is added when
// known (setConversation).
func (b *Bot) startTurn(ctx context.Context, t Turn) (context.Context, trace.Span) {
	return b.cfg.Tracer.Start(ctx, SpanTurn, trace.WithAttributes(
		AttrPlatform.String(t.Platform),
		AttrChannel.String(t.Channel),
		AttrRequester.String(t.User),
	))
}

// setConversation names the conversation on the span in ctx.
func setConversation(ctx context.Context, conv confirm.Conversation) {
	trace.SpanFromContext(ctx).SetAttributes(AttrConversationID.Int64(conv.ID))
}

// startResume opens the span of a continuation outside a turn. batchID
// may be empty (a recovered conversation with no batch to finish); links
// point at the approval waits that ended here.
func (b *Bot) startResume(ctx context.Context, trigger string, conv confirm.Conversation, batchID string, links ...trace.Link) (context.Context, trace.Span) {
	attrs := append(convAttrs(conv), AttrResumeTrigger.String(trigger))
	if batchID != "" {
		attrs = append(attrs, AttrBatchID.String(batchID))
	}
	return b.cfg.Tracer.Start(ctx, SpanResume, trace.WithAttributes(attrs...), trace.WithLinks(links...))
}

// endSpan ends a span, with error status when err is set. The error's text
// is not recorded: it may quote a tool's output or arguments.
func endSpan(span trace.Span, err error) {
	if err != nil {
		span.SetStatus(codes.Error, "failed")
	}
	span.End()
}

// recordWait records the approval wait of a call that a person had to
// decide, now that it is decided: from the batch's creation (the pause) to
// decidedAt. The wait spans processes and clicks, so it is its own trace,
// linked to the span in ctx (the click's, or the turn that abandoned it);
// the returned link lets the continuation point back at it.
func (b *Bot) recordWait(ctx context.Context, batch *confirm.Batch, c confirm.Call, outcome, by string, votes, required int, decidedAt time.Time) trace.Link {
	if !b.tracing {
		return trace.Link{} // a no-op tracer's span would link nowhere
	}
	opts := []trace.SpanStartOption{
		trace.WithNewRoot(),
		trace.WithTimestamp(batch.CreatedAt),
		trace.WithAttributes(
			AttrBatchID.String(batch.ID),
			AttrConversationID.Int64(batch.ConversationID),
			AttrCallKey.String(c.Key),
			AttrTool.String(c.Tool),
			AttrDecisionID.String(c.IdempotencyKey),
			AttrDecisionOutcome.String(outcome),
			AttrDecidedBy.String(by),
			AttrRequester.String(batch.RequestedBy),
			AttrApprovalsRequired.Int(required),
			AttrApprovalsVotes.Int(votes),
		),
	}
	if l := trace.LinkFromContext(ctx); l.SpanContext.IsValid() {
		opts = append(opts, trace.WithLinks(l))
	}
	_, span := b.cfg.Tracer.Start(ctx, SpanApprovalWait, opts...)
	if decidedAt.Before(batch.CreatedAt) {
		decidedAt = batch.CreatedAt
	}
	span.End(trace.WithTimestamp(decidedAt))
	return trace.Link{SpanContext: span.SpanContext()}
}

// recordResolved records the approval waits an Expire/AbandonPending ended: calls
// of batch (reloaded after it) that were pending in before and are now
// decided by the system with status. before may be nil when every call
// with status counts (expiry is the only way to "expired").
func (b *Bot) recordResolved(ctx context.Context, before, after *confirm.Batch, status confirm.DecisionStatus, outcome string) []trace.Link {
	if after == nil {
		return nil
	}
	wasPending := map[string]bool{}
	if before != nil {
		for _, c := range before.Calls {
			if c.Decision == confirm.DecisionPending {
				wasPending[c.Key] = true
			}
		}
	}
	var links []trace.Link
	for _, c := range after.Calls {
		if c.Decision != status || c.DecidedBy != SystemActor || (before != nil && !wasPending[c.Key]) {
			continue
		}
		at := b.now()
		if c.DecidedAt != nil {
			at = *c.DecidedAt
		}
		links = append(links, b.recordWait(ctx, after, c, outcome, SystemActor, len(c.Votes), c.Approvals, at))
	}
	return links
}
