package bot

// HoldConversation takes a conversation's in-process turn lock, as a
// turn or a runner does, until release is called (tests).
func (b *Bot) HoldConversation(id int64) (release func()) { return b.turns.lock(id) }
