package bot

// The limits every source's requests count against
// (limits.turns_per_minute, limits.pending_per_channel), the waiting
// batches of a conversation, and the bot's own lines in a thread.

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/airlockhq/airlock/confirm"
)

// overTurnLimit counts the turn against its author's rate and tells them,
// once per minute, when they are over it, with dropped (what became of
// this turn). Nothing of an over-limit turn reaches the model or the
// history, and no run starts.
func (b *Bot) overTurnLimit(ctx context.Context, t Turn, dropped string) (bool, error) {
	limit := b.cfg.TurnsPerMinute
	if limit <= 0 {
		return false, nil
	}
	n, err := b.store.CountTurn(ctx, t.Platform, t.User, time.Minute)
	if err != nil {
		return false, fmt.Errorf("count turns: %w", err)
	}
	if n <= limit {
		return false, nil
	}
	b.log.Warn("turn rate limit reached; turn dropped", "platform", t.Platform, "user", t.User, "turns_last_minute", n)
	if n == limit+1 {
		msg := fmt.Sprintf("You've sent more than %d requests in a minute (limits.turns_per_minute). %s", limit, dropped)
		return true, b.postIn(ctx, Thread{Platform: t.Platform, Channel: t.Channel, Thread: t.Thread}, msg)
	}
	return true, nil
}

// channelFull tells the author in th, with then (what to do), when the
// channel already holds as many waiting cards as allowed; then nothing
// reaches the model and no run starts.
func (b *Bot) channelFull(ctx context.Context, th Thread, then string) (bool, error) {
	n, full, err := b.pendingFull(ctx, th.Platform, th.Channel)
	if err != nil || !full {
		return false, err
	}
	b.log.Warn("waiting cards per channel limit reached; turn dropped", "platform", th.Platform, "channel", th.Channel, "waiting", n)
	msg := fmt.Sprintf("This channel already has %d requests waiting for a decision (limits.pending_per_channel). %s", n, then)
	return true, b.postIn(ctx, th, msg)
}

// pendingFull reports whether the channel holds as many waiting cards as
// limits.pending_per_channel allows (n of them): no turn, run or runbook
// step may add one.
func (b *Bot) pendingFull(ctx context.Context, platform, channel string) (n int, full bool, err error) {
	limit := b.cfg.PendingPerChannel
	if limit <= 0 {
		return 0, false, nil
	}
	n, err = b.store.PendingInChannel(ctx, platform, channel)
	if err != nil {
		return 0, false, fmt.Errorf("count waiting cards: %w", err)
	}
	return n, n >= limit, nil
}

// postIn posts the bot's own text in a thread.
func (b *Bot) postIn(ctx context.Context, th Thread, text string) error {
	p, err := b.platform(th.Platform)
	if err != nil {
		return err
	}
	return p.Post(ctx, th, text)
}

// pendingBatches are the conversation's batches waiting for a person,
// oldest first, loaded (one decided meanwhile is left out).
func (b *Bot) pendingBatches(ctx context.Context, convID int64) ([]*confirm.Batch, error) {
	ids, err := b.store.PendingBatches(ctx, convID)
	if err != nil {
		return nil, err
	}
	var out []*confirm.Batch
	for _, id := range ids {
		batch, err := b.store.Batch(ctx, id)
		if errors.Is(err, confirm.ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		if batch.Status == confirm.BatchPending {
			out = append(out, batch)
		}
	}
	return out, nil
}
