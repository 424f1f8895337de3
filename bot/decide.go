package bot

import (
	"context"
	"crypto/rand"
	"encoding/base32"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/airlockhq/airlock/confirm"
)

// Click is one person's decision on one call, as a platform delivers it.
type Click struct {
	Platform string
	Channel  string // where the click happened
	User     string // platform user id of the clicker
	Ref      string // the opaque reference the button carried
	Allow    bool
	Reason   string   // a deny reason, optional
	Roles    []string // the clicker's roles where the platform has them (Discord)
	IsBot    bool     // clicks by bots are refused
}

// MaxReasonLen caps a deny reason, in runes.
const MaxReasonLen = 500

// Errors a click can meet. Each has a safe message for the clicker
// (UserMessage); logs get the detail.
var (
	ErrNotApprover   = errors.New("you can't approve tool calls in this channel")
	ErrAlreadyClosed = errors.New("this call was already decided, expired or superseded; nothing changed")
	ErrWrongChannel  = errors.New("this button does not belong to this channel")
)

// UserMessage is what the clicker is told when a click changes nothing.
func UserMessage(err error) string {
	switch {
	case errors.Is(err, ErrNotApprover):
		return "You can't approve tool calls in this channel. Nothing changed."
	case errors.Is(err, ErrAlreadyClosed):
		return "This call was already decided, has expired, or was superseded. Nothing changed."
	case errors.Is(err, confirm.ErrBadRef), errors.Is(err, ErrWrongChannel), errors.Is(err, confirm.ErrNotFound):
		return "This button is not one I know. Nothing changed."
	case err == nil:
		return ""
	}
	return "Something went wrong; nothing was run. The operators have the details in the logs."
}

// Decide records one click. It checks the reference, the channel and the
// clicker, takes the single-use transition, updates the card, and when the
// batch is fully decided runs it and continues the conversation. A click
// that changes nothing returns an error for UserMessage and is audited.
func (b *Bot) Decide(ctx context.Context, c Click) error {
	batchID, pos, err := confirm.ParseRef(c.Ref)
	if err != nil {
		b.rejectClick(ctx, c, 0, "", "", "malformed reference")
		return err
	}
	batch, err := b.store.Batch(ctx, batchID)
	if err != nil {
		b.rejectClick(ctx, c, 0, batchID, "", "unknown batch")
		return fmt.Errorf("load batch: %w", err)
	}
	if pos >= len(batch.Calls) {
		b.rejectClick(ctx, c, batch.ConversationID, batchID, "", "unknown call position")
		return confirm.ErrBadRef
	}
	call := batch.Calls[pos]
	conv, err := b.store.ConversationByID(ctx, batch.ConversationID)
	if err != nil {
		return fmt.Errorf("load conversation: %w", err)
	}
	if conv.Platform != c.Platform || conv.Channel != c.Channel {
		b.rejectClick(ctx, c, conv.ID, batchID, call.Key, "button from another channel")
		return ErrWrongChannel
	}
	approver := !c.IsBot && b.cfg.Channels.CanApprove(ctx, conv.Platform, conv.Channel, conv.DM, c.User, c.Roles)
	// The requester may withdraw (deny) their own calls: it can only stop things.
	withdraw := !c.Allow && !c.IsBot && c.User != "" && c.User == batch.RequestedBy
	if !approver && !withdraw {
		b.rejectClick(ctx, c, conv.ID, batchID, call.Key, "not an approver")
		return ErrNotApprover
	}
	d := confirm.Decide{BatchID: batchID, Key: call.Key, Status: confirm.DecisionDenied, By: c.User, Now: b.now()}
	if c.Allow {
		d.Status = confirm.DecisionAllowed
	} else {
		d.Message = denyMessage(c.User, c.Reason)
	}
	res, err := b.store.Decide(ctx, d)
	if err != nil {
		return fmt.Errorf("decide: %w", err)
	}
	if !res.Won {
		b.rejectClick(ctx, c, conv.ID, batchID, call.Key, "call no longer pending")
		return ErrAlreadyClosed
	}
	b.log.Info("call decided", "batch", batchID, "call", call.Key, "tool", call.Tool, "decision", d.Status, "by", c.User)
	b.refreshCard(ctx, conv, batchID)
	if res.BatchDecided {
		b.trace("decided")
		// The click counted; what follows is the bot's work, not the
		// clicker's problem: failures are logged and told in the thread.
		if err := b.resume(ctx, conv, batchID); err != nil {
			b.log.Error("run decided batch", "batch", batchID, "err", err)
		}
	}
	return nil
}

func (b *Bot) trace(point string) {
	if b.cfg.Trace != nil {
		b.cfg.Trace(point)
	}
}

// denyMessage is what the model is told for a person's deny: the default
// message, and the approver's reason when given, quoted as theirs.
func denyMessage(user, reason string) string {
	reason = strings.TrimSpace(reason)
	if reason == "" {
		return confirm.DefaultDenyMessage
	}
	if r := []rune(reason); len(r) > MaxReasonLen {
		reason = string(r[:MaxReasonLen]) + "…"
	}
	return fmt.Sprintf("%s Reason given by the approver (%s): %q", confirm.DefaultDenyMessage, user, reason)
}

func (b *Bot) rejectClick(ctx context.Context, c Click, convID int64, batchID, key, why string) {
	detail, _ := json.Marshal(map[string]any{"why": why, "allow": c.Allow, "platform": c.Platform, "channel": c.Channel, "ref": excerpt(c.Ref, 100)})
	b.log.Warn("click rejected", "why", why, "user", c.User, "channel", c.Channel, "batch", batchID)
	if err := b.store.Audit(ctx, confirm.AuditEvent{
		At: b.now().UTC(), Kind: confirm.AuditRejectedClick, ConversationID: convID,
		BatchID: batchID, CallKey: key, Actor: c.User, Detail: string(detail),
	}); err != nil {
		b.log.Error("audit rejected click", "err", err)
	}
}

// refreshCard re-renders a batch's card from storage.
func (b *Bot) refreshCard(ctx context.Context, conv confirm.Conversation, batchID string) {
	batch, err := b.store.Batch(ctx, batchID)
	if err != nil {
		b.log.Error("reload batch for card", "batch", batchID, "err", err)
		return
	}
	if batch.CardRef == "" {
		return // no card was posted: the batch never paused
	}
	p, err := b.platform(conv.Platform)
	if err != nil {
		b.log.Error("update card", "err", err)
		return
	}
	card := cardFor(batch, b.introOf(ctx, batch), b.approversOf(conv))
	if err := p.UpdateCard(ctx, threadOf(conv), batch.CardRef, card); err != nil {
		b.log.Error("update card", "batch", batchID, "err", err)
	}
}

// PendingCard returns the card of the thread's pending pause, or
// confirm.ErrNotFound when nothing waits.
func (b *Bot) PendingCard(ctx context.Context, th Thread) (*Card, error) {
	conv, err := b.store.FindConversation(ctx, th.Platform, th.Channel, th.Thread)
	if err != nil {
		return nil, err // ErrNotFound: a thread without a conversation waits on nothing
	}
	batch, err := b.store.PendingBatch(ctx, conv.ID)
	if err != nil {
		return nil, err
	}
	card := cardFor(batch, b.introOf(ctx, batch), b.approversOf(conv))
	return &card, nil
}

var batchIDEncoding = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)

func newBatchID() string {
	var buf [16]byte
	if _, err := rand.Read(buf[:]); err != nil {
		panic(fmt.Sprintf("crypto/rand: %v", err))
	}
	return batchIDEncoding.EncodeToString(buf[:])
}
