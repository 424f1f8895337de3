package bot

import "time"

// HoldConversation takes a conversation's in-process turn lock, as a
// turn or a runner does, until release is called (tests).
func (b *Bot) HoldConversation(id int64) (release func()) { return b.turns.lock(id) }

// CardBackoff is the card-sync job's wait after a message's n-th failure
// in a row (tests).
func CardBackoff(n int) time.Duration { return cardBackoff(n) }
