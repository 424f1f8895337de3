package bot

import (
	"context"
	"errors"
	"fmt"

	"github.com/airlockhq/airlock/card"
	"github.com/airlockhq/airlock/confirm"
)

// A run whose outcome is unknown gates its tool: until a person marks it
// checked ("I checked — go on" on its card or its thread line), every
// later call of that tool in the conversation needs a yes, which no grant
// gives (see uncheckedPolicy). Marking it checked is audited
// (unknown_checked); then the tool's calls are judged by the policy again.

// UnknownNoticer is implemented by platforms that post the thread line
// announcing an unknown outcome with an "I checked — go on" button.
// Others get the line as text (and have no button to click).
type UnknownNoticer interface {
	PostUnknownNotice(ctx context.Context, th Thread, n card.UnknownNotice) (ref string, err error)
	UpdateUnknownNotice(ctx context.Context, th Thread, ref string, n card.UnknownNotice) error
}

// ErrAlreadyChecked: the run was marked checked already (a double click),
// or its outcome is not unknown.
var ErrAlreadyChecked = errors.New("this run was already marked checked, or its outcome is known")

// checkOf is the card's check of a call whose run ended unknown; nil for
// other calls.
func checkOf(c confirm.Call) *card.Check {
	if c.Run != confirm.RunUnknown {
		return nil
	}
	return &card.Check{Ref: confirm.CheckedRef(c.BatchID, c.Position), By: c.CheckedBy, At: c.CheckedAt}
}

// unknownNotice is the thread line of a call whose run ended unknown.
func unknownNotice(c confirm.Call) card.UnknownNotice {
	n := card.UnknownNotice{Number: c.Position + 1, Tool: c.Tool, Summary: c.Summary}
	if k := checkOf(c); k != nil {
		n.Check = *k
	}
	return n
}

// postUnknownNotice posts the thread line of a call whose outcome is
// unknown and that no card shows: with "I checked — go on" where the
// platform has it (its reference stored, so a click counts only there),
// else as text.
func (b *Bot) postUnknownNotice(ctx context.Context, conv confirm.Conversation, p Platform, c confirm.Call) {
	n := unknownNotice(c)
	un, ok := p.(UnknownNoticer)
	if !ok {
		n.Summary = quote(c.Summary)
		if err := p.Post(ctx, threadOf(conv), n.Text()); err != nil {
			b.log.Error("post unknown outcome", "err", err)
		}
		return
	}
	ref, err := un.PostUnknownNotice(ctx, threadOf(conv), n)
	if err != nil {
		b.log.Error("post unknown outcome", "batch", c.BatchID, "call", c.Key, "err", err)
		return
	}
	if err := b.store.SetUnknownNoticeRef(ctx, c.BatchID, c.Key, ref); err != nil {
		b.log.Error("store unknown notice ref", "batch", c.BatchID, "call", c.Key, "err", err)
	}
}

// MarkChecked records that a person checked a run whose outcome is
// unknown, from its "I checked — go on" button: on the batch's card (or a
// DM copy of it) or on the call's thread line. Only an approver of the
// conversation's channel may (not a bot; the requester only as an
// approver); any other click changes nothing and is audited as a rejected
// click. A second mark changes nothing (ErrAlreadyChecked). The card and
// the thread line are updated to say who checked it.
func (b *Bot) MarkChecked(ctx context.Context, c Click) error {
	if !b.enter() {
		return ErrShuttingDown
	}
	defer b.leave()
	batchID, pos, err := confirm.ParseCheckedRef(c.Ref)
	if err != nil {
		b.rejectClick(ctx, c, 0, "", "", "malformed checked reference")
		return err
	}
	batch, err := b.store.Batch(ctx, batchID)
	if err != nil {
		b.rejectClick(ctx, c, 0, batchID, "", "unknown batch (checked)")
		return fmt.Errorf("load batch: %w", err)
	}
	if pos >= len(batch.Calls) {
		b.rejectClick(ctx, c, batch.ConversationID, batchID, "", "unknown call position (checked)")
		return confirm.ErrBadRef
	}
	conv, err := b.conversation(ctx, batch.ConversationID)
	if err != nil {
		return fmt.Errorf("load conversation: %w", err)
	}
	call := batch.Calls[pos]
	if !b.onCheckButton(ctx, conv, batch, pos, c) {
		b.rejectClick(ctx, c, conv.ID, batchID, call.Key, "checked button not on this call's card or notice")
		return ErrWrongChannel
	}
	if c.IsBot || !b.cfg.Channels.CanApprove(ctx, conv.Platform, conv.Channel, conv.DM, c.User, c.Roles) {
		b.rejectClick(ctx, c, conv.ID, batchID, call.Key, "not an approver (checked)")
		return ErrNotApprover
	}
	ok, err := b.store.MarkChecked(ctx, batchID, call.Key, c.User)
	if err != nil {
		return fmt.Errorf("mark checked: %w", err)
	}
	if !ok {
		return ErrAlreadyChecked
	}
	b.log.Info("unknown outcome marked checked", "batch", batchID, "call", call.Key, "tool", call.Tool, "by", c.User)
	fresh, err := b.store.Batch(ctx, batchID)
	if err != nil {
		b.log.Error("reload batch after check", "batch", batchID, "err", err)
		return nil
	}
	b.refreshCardOf(ctx, conv, fresh)
	if fc := fresh.Calls[pos]; fc.NoticeRef != "" {
		if p, err := b.platform(conv.Platform); err == nil {
			if un, ok := p.(UnknownNoticer); ok {
				if err := un.UpdateUnknownNotice(ctx, threadOf(conv), fc.NoticeRef, unknownNotice(fc)); err != nil {
					b.log.Error("update unknown notice", "batch", batchID, "call", fc.Key, "err", err)
				}
			}
		}
	}
	return nil
}

// onCheckButton reports whether a click came from a message that carries
// the call's "I checked — go on": the batch's card (or a DM copy), or the
// call's thread line. A line posted a moment ago may not have its
// reference stored yet: the turn posting it is waited for once.
func (b *Bot) onCheckButton(ctx context.Context, conv confirm.Conversation, batch *confirm.Batch, pos int, c Click) bool {
	if c.Platform != conv.Platform || c.Message == "" {
		return false
	}
	call := batch.Calls[pos]
	if refHas(call.NoticeRef, c.Message) || (batch.CardRef != "" && b.onCard(ctx, conv, batch, c)) {
		return true
	}
	if call.NoticeRef != "" || call.Run != confirm.RunUnknown || call.CheckedAt != nil {
		return false
	}
	if unlock, err := b.lockConversation(ctx, conv.ID); err == nil {
		unlock()
	}
	fresh, err := b.store.Batch(ctx, batch.ID)
	return err == nil && pos < len(fresh.Calls) && refHas(fresh.Calls[pos].NoticeRef, c.Message)
}

// UncheckedRuns lists the thread's runs whose outcome is unknown and that
// nobody marked checked yet, oldest first, as their thread lines (for a
// terminal, which has no buttons). A thread without a conversation has
// none.
func (b *Bot) UncheckedRuns(ctx context.Context, th Thread) ([]card.UnknownNotice, error) {
	conv, err := b.store.FindConversation(ctx, th.Platform, th.Channel, th.Thread)
	if errors.Is(err, confirm.ErrNotFound) {
		return nil, nil
	} else if err != nil {
		return nil, err
	}
	calls, err := b.store.UnknownCalls(ctx, conv.ID)
	if err != nil {
		return nil, err
	}
	out := make([]card.UnknownNotice, len(calls))
	for i, c := range calls {
		out[i] = unknownNotice(c)
	}
	return out, nil
}
