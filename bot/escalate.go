package bot

import (
	"context"
	"fmt"
	"time"

	"github.com/airlockhq/airlock/confirm"
)

// escalate fires the escalation steps that are due. Each step fires once
// per batch across replicas (the first MarkEscalated wins): a message
// mentioning the step's people is posted where the card is (its thread or
// the approvals channel), and the card is re-rendered with the step fired
// (its approvers may decide from then on). Batches of platforms this
// process does not serve are left to a process that does.
func (b *Bot) escalate(ctx context.Context) error {
	now := b.now()
	for i, step := range b.cfg.Escalation {
		ids, err := b.store.DueEscalations(ctx, i, now.Add(-step.After))
		if err != nil {
			return fmt.Errorf("list due escalations: %w", err)
		}
		for _, id := range ids {
			if err := b.escalateOne(ctx, id, i, step, now); err != nil {
				b.log.Error("escalate", "batch", id, "step", i+1, "err", err)
			}
		}
	}
	return nil
}

func (b *Bot) escalateOne(ctx context.Context, id string, i int, step EscalationStep, now time.Time) error {
	batch, conv, p, err := b.served(ctx, id)
	if err != nil || p == nil {
		return err // nil p: a process serving that platform escalates it
	}
	won, err := b.store.MarkEscalated(ctx, id, i)
	if err != nil || !won {
		return err
	}
	b.log.Info("escalated", "batch", id, "step", i+1)
	where := b.cardPlace(ctx, conv, id)
	msg := fmt.Sprintf("%s: escalated — a request has waited %s for a decision and expires at %s: %s",
		mention(p, step.Mention, "Escalation"), now.Sub(batch.CreatedAt).Round(time.Second), batch.ExpiresAt.UTC().Format("15:04:05 UTC"), waitingCalls(batch))
	if !step.Approvers.Empty() {
		msg += " The people this step names may now decide it too."
	}
	if err := p.Post(ctx, where, msg); err != nil {
		b.log.Error("post escalation", "batch", id, "err", err)
	}
	batch.Escalated = append(batch.Escalated, i)
	b.refreshCardOf(ctx, conv, batch)
	return nil
}

// cardPlace is where a batch's card is: its thread, or the approvals
// channel it was posted in.
func (b *Bot) cardPlace(ctx context.Context, conv confirm.Conversation, batchID string) Thread {
	if msgs, err := b.cardMessages(ctx, batchID); err == nil {
		if m := mainCard(msgs); m != nil {
			return Thread{Platform: m.Platform, Channel: m.Channel, Thread: m.Thread}
		}
	}
	return threadOf(conv)
}
