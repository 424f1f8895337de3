package card

import "fmt"

// PartNote is the line of a card that a platform's limits lay out over
// several messages (parts > 1): on the first, how many messages the
// calls fill and where the card's own buttons are; on the others, which
// request they continue and which calls they hold (first to last,
// numbered from 1). "" for a card in one message.
func (c Card) PartNote(part, parts, first, last int) string {
	if parts < 2 {
		return ""
	}
	calls := fmt.Sprintf("calls %d–%d", first, last)
	if first == last {
		calls = fmt.Sprintf("call %d", first)
	}
	if part == 1 {
		rest := "the rest in the messages that follow"
		if parts == 2 {
			rest = "the rest in the next message"
		}
		note := fmt.Sprintf("This request's %d calls fill %d messages: %s here, %s.", len(c.Calls), parts, calls, rest)
		if !c.Complete() {
			note += " Each call's buttons are under it; the request's own (Allow all, Deny all, Extend) are at the end of the last message."
		}
		return note
	}
	id := c.BatchID
	if len(id) > 40 {
		id = id[:40]
	}
	return fmt.Sprintf("Approval request %s, continued (message %d of %d): %s.", id, part, parts, calls)
}
