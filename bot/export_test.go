package bot

import (
	"context"
	"time"
)

// HoldConversation takes a conversation's in-process turn lock, as a
// turn or a runner does, until release is called (tests).
func (b *Bot) HoldConversation(id int64) (release func()) { return b.turns.lock(id) }

// CardBackoff is the card-sync job's wait after a message's n-th failure
// in a row (tests).
func CardBackoff(n int) time.Duration { return cardBackoff(n) }

// RefreshCard is the entry into card sync (tests).
func (b *Bot) RefreshCard(ctx context.Context, batchID string) {
	batch, err := b.store.Batch(ctx, batchID)
	if err != nil {
		return
	}
	conv, err := b.conversation(ctx, batch.ConversationID)
	if err != nil {
		return
	}
	b.refreshCardOf(ctx, conv, batch)
}

// ErrNoAnswer is Dispatch's error for a kind of button the core has no
// answer for (tests).
var ErrNoAnswer = errNoAnswer
