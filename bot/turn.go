package bot

import (
	"context"
	"errors"
	"fmt"

	"github.com/airlockhq/airlock/agent"
	"github.com/airlockhq/airlock/confirm"
	"github.com/airlockhq/airlock/model"
)

// Turn is one message a person addressed to the bot.
type Turn struct {
	Platform string
	Channel  string
	Thread   string
	User     string // platform user id
	Text     string
	DM       bool     // a direct message (served only by a "dm" channels entry)
	Roles    []string // the author's roles where the platform has them (Discord)
	// Command: the text is a runbook command typed as one (the
	// terminal's /run, /runbooks, /stop), never sent to the model.
	Command bool
	// Inbox is the key of the delivery the turn came in, when the
	// platform recorded it in the inbox (Record): the turn's message is
	// stored as that delivery's. Replayed: the turn is worked again, its
	// receiver having died; a message a first attempt stored is not
	// stored again, and the model is asked only when nothing answered it.
	Inbox    string
	Replayed bool
}

// Admission says whether a message may reach the model.
type Admission int

const (
	// Admitted: the channel is served and the author may ask there.
	Admitted Admission = iota
	// NotServed: no channels entry covers the channel (or, for a direct
	// message, no "dm" entry). A mention gets NotServedMessage once;
	// other messages are ignored.
	NotServed
	// NotRequester: the channel lists requesters and the author is not
	// one. Their messages are neither turns nor context.
	NotRequester
)

// DatabaseDownMessage answers a message while the database can't be
// reached: nothing was recorded or run.
const DatabaseDownMessage = "I can't reach my database right now, so I did nothing with this. Write again in a minute."

// TurnFailedMessage is what a thread is told when its turn failed (the
// logs get err): DatabaseDownMessage when the database could not be
// reached, else that something went wrong.
func TurnFailedMessage(err error) string {
	if errors.Is(err, confirm.ErrUnavailable) {
		return DatabaseDownMessage
	}
	return "Something went wrong while handling this; nothing more was done. The operators have the details in the logs. Write again to retry."
}

// NotServedMessage answers a mention in a channel the bot does not serve.
const NotServedMessage = "I'm not enabled in this channel; an operator can add it to the config."

// Admit says whether the turn's author may talk to the bot where they
// wrote. Adapters may call it before doing platform work (starting a
// thread); HandleTurn and Note check it again.
func (b *Bot) Admit(ctx context.Context, t Turn) Admission {
	if !b.cfg.Channels.Serves(t.Platform, t.Channel, t.DM) {
		return NotServed
	}
	if !b.cfg.Channels.MayAsk(ctx, t.Platform, t.Channel, t.DM, t.User, t.Roles) {
		return NotRequester
	}
	return Admitted
}

// HandleTurn runs one turn: it checks that the author may ask there and
// is within the limits, resolves a pending pause of the thread as
// abandoned (when the author is its requester or an approver), runs
// decided work that is still open, then asks the model and runs its calls
// until it answers or pauses. One turn at a time per thread.
func (b *Bot) HandleTurn(ctx context.Context, t Turn) error {
	ctx, span := b.startTurn(ctx, t)
	err := b.handleTurn(ctx, t)
	endSpan(span, err)
	return err
}

func (b *Bot) handleTurn(ctx context.Context, t Turn) error {
	if !b.enter() {
		b.log.Info("turn refused: shutting down", "platform", t.Platform, "channel", t.Channel, "user", t.User)
		return b.postIn(ctx, Thread{Platform: t.Platform, Channel: t.Channel, Thread: t.Thread}, RestartingMessage)
	}
	defer b.leave()
	switch b.Admit(ctx, t) {
	case NotServed:
		b.log.Info("mention in a channel that is not served", "platform", t.Platform, "channel", t.Channel, "dm", t.DM, "user", t.User)
		return b.postIn(ctx, Thread{Platform: t.Platform, Channel: t.Channel, Thread: t.Thread}, NotServedMessage)
	case NotRequester:
		b.log.Info("message from someone who may not ask here; dropped", "platform", t.Platform, "channel", t.Channel, "user", t.User)
		return nil
	}
	if handled, err := b.runbookCommand(ctx, t); handled {
		return err // run, runbooks, stop: answered without the model
	}
	th := Thread{Platform: t.Platform, Channel: t.Channel, Thread: t.Thread}
	if b.cfg.ModelOff {
		// The words go nowhere: nothing is stored, and no waiting card
		// (a run's step, or a pause from when a model was configured)
		// is abandoned for them.
		return b.postIn(ctx, th, model.OffReply)
	}
	// A turn worked again was counted by its first attempt (or that
	// attempt died before): the platform's failure does not spend the
	// person's rate.
	if !t.Replayed {
		if over, err := b.overTurnLimit(ctx, t, "I ignored this one; wait a minute and ask again."); err != nil || over {
			return err
		}
	}
	conv, err := b.store.Conversation(ctx, t.Platform, t.Channel, t.Thread, t.DM)
	if err != nil {
		return fmt.Errorf("load conversation: %w", err)
	}
	b.convs.put(conv.ID, conv) // the clicks on its cards look it up by id
	setConversation(ctx, conv)
	unlock, err := b.lockConversation(ctx, conv.ID)
	if err != nil {
		return err
	}
	defer unlock()

	if t.Replayed && t.Inbox != "" {
		if done, err := b.replayedTurn(ctx, conv, t); done || err != nil {
			return err
		}
	}
	if waiting, err := b.waitingOnRunbook(ctx, conv, t); waiting || err != nil {
		return err // the model's runbook run goes on; the words are context
	}
	if pending, err := b.modelPause(ctx, conv); err == nil && !b.mayMoveOn(ctx, conv, pending, t) {
		// A bystander cannot abandon someone else's card: their words are
		// kept as context and the card keeps waiting.
		b.log.Info("bystander wrote while a card waits; kept as an aside", "conversation", conv.ID, "user", t.User)
		if err := b.appendTurn(ctx, conv.ID, t, model.Message{Role: model.RoleUser, Author: t.User, Text: t.Text, Aside: true}); err != nil {
			return err
		}
		return b.postIn(ctx, th, "A request in this thread is waiting for a decision; only the person who asked or an approver can move on from it. Your message is kept as context.")
	} else if err != nil && !errors.Is(err, confirm.ErrNotFound) {
		return fmt.Errorf("load pending pause: %w", err)
	}
	if err := b.settle(ctx, conv); err != nil {
		return err
	}
	if full, err := b.channelFull(ctx, threadOf(conv), "Decide some of them, then ask again."); err != nil || full {
		return err
	}
	if err := b.appendTurn(ctx, conv.ID, t, model.Message{Role: model.RoleUser, Author: t.User, Text: t.Text}); err != nil {
		return err
	}
	return b.agent.Converse(ctx, conv, agent.Requester{User: t.User, Roles: t.Roles}, nil)
}

// asker is the author of the turn a model reply answers: its requester.
// Roles are known only while the turn is handled (a continuation after a
// click knows the user only).
type asker struct {
	User  string
	Roles []string
}

// mayMoveOn reports whether the author of a turn may abandon the thread's
// waiting card: its requester or an approver of the channel.
func (b *Bot) mayMoveOn(ctx context.Context, conv confirm.Conversation, pending *confirm.Batch, t Turn) bool {
	if t.User != "" && t.User == pending.RequestedBy {
		return true
	}
	return b.cfg.Channels.CanApprove(ctx, conv.Platform, conv.Channel, conv.DM, t.User, t.Roles)
}

// Note keeps a message said in a thread that holds a conversation, without
// making it a turn: the model sees it as context on the next turn. It never
// supersedes a pending card. A thread without a conversation keeps nothing,
// and neither does a channel that is not served or a person who may not ask
// there.
func (b *Bot) Note(ctx context.Context, t Turn) error {
	if !b.enter() {
		return nil // an aside while stopping is dropped; the turn after it is refused too
	}
	defer b.leave()
	if b.Admit(ctx, t) != Admitted {
		return nil
	}
	conv, err := b.store.FindConversation(ctx, t.Platform, t.Channel, t.Thread)
	if errors.Is(err, confirm.ErrNotFound) {
		return nil
	} else if err != nil {
		return fmt.Errorf("load conversation: %w", err)
	}
	if stored, err := b.replayedStored(ctx, t); stored || err != nil {
		return err // kept by the first attempt
	}
	return b.appendTurn(ctx, conv.ID, t, model.Message{Role: model.RoleUser, Author: t.User, Text: t.Text, Aside: true})
}

// HasConversation reports whether the thread holds a conversation.
func (b *Bot) HasConversation(ctx context.Context, th Thread) (bool, error) {
	_, err := b.store.FindConversation(ctx, th.Platform, th.Channel, th.Thread)
	if errors.Is(err, confirm.ErrNotFound) {
		return false, nil
	}
	return err == nil, err
}

// modelPause is the conversation's newest pending batch of the model's
// (not a runbook step's card, which a turn never abandons);
// confirm.ErrNotFound when none waits.
func (b *Bot) modelPause(ctx context.Context, conv confirm.Conversation) (*confirm.Batch, error) {
	pauses, err := b.modelPauses(ctx, conv)
	if err != nil {
		return nil, err
	}
	if len(pauses) == 0 {
		return nil, fmt.Errorf("model pause: %w", confirm.ErrNotFound)
	}
	return pauses[len(pauses)-1], nil
}

// modelPauses are the conversation's pending batches of the model's,
// oldest first: a run's step cards wait in the same thread and are left
// out (they wait for their decision or the run's stop).
func (b *Bot) modelPauses(ctx context.Context, conv confirm.Conversation) ([]*confirm.Batch, error) {
	pending, err := b.pendingBatches(ctx, conv.ID)
	if err != nil {
		return nil, err
	}
	var out []*confirm.Batch
	for _, batch := range pending {
		if !stepBatch(batch) {
			out = append(out, batch)
		}
	}
	return out, nil
}

// settle brings a conversation to a state where a new user message may
// follow: the model's pending pause is abandoned (every call denied with
// "The user moved on."; a runbook step's card is not the model's and
// keeps waiting), and batches decided but not yet run are run, so the
// history never holds tool calls without results.
func (b *Bot) settle(ctx context.Context, conv confirm.Conversation) error {
	pauses, err := b.modelPauses(ctx, conv)
	if err != nil {
		return fmt.Errorf("load pending pause: %w", err)
	}
	for _, pending := range pauses {
		n, err := b.store.AbandonPending(ctx, pending.ID, SystemActor, confirm.MovedOnMessage)
		if err != nil {
			return fmt.Errorf("abandon pause: %w", err)
		}
		if n > 0 {
			b.log.Info("pause abandoned: the user moved on", "batch", pending.ID, "conversation", conv.ID)
		}
		for range n {
			b.cfg.Metrics.Decision("abandoned", b.now().Sub(pending.CreatedAt))
		}
		if n > 0 && b.tracing {
			if after, err := b.store.Batch(ctx, pending.ID); err == nil {
				b.recordResolved(ctx, pending, after, confirm.DecisionDenied, "abandoned")
			}
		}
	}
	open, err := b.store.OpenBatches(ctx, conv.ID)
	if err != nil {
		return fmt.Errorf("load open batches: %w", err)
	}
	for _, id := range open {
		if _, err := b.finishBatch(ctx, conv, id, nil); err != nil {
			return err
		}
	}
	return nil
}

// pause stores a reply with tool calls as a batch. The policy judges each
// call: a call it asks about waits for people's decisions (the batch is
// paused), unless an active grant of this conversation covers it (see
// grantFor); a call it denies is refused by its rule; the others are
// allowed by policy. A call of a tool not offered in the channel is
// refused like an unknown tool; a call whose read-back cannot be built is
// invalid; a call of a tool with an earlier run whose outcome is unknown,
// not yet marked checked, needs a person's yes. A grant revoked or expired
// after it was looked up is caught by the transaction storing the batch:
// the reply is planned again.
func (b *Bot) pause(ctx context.Context, conv confirm.Conversation, requester asker, reply model.Message) (*confirm.Batch, bool, error) {
	assistant, err := storedMessage(reply)
	if err != nil {
		return nil, false, err
	}
	batch, err := b.request(ctx, approvalRequest{conv: conv, requester: requester, reply: reply, stored: assistant})
	if err != nil {
		return nil, false, err
	}
	return batch, batch.Status == confirm.BatchPending, nil
}

// ApprovalNote is added to the description of a tool whose calls need a
// person's yes, so the model says a call waits instead of claiming success.
const ApprovalNote = "Calls of this tool wait for a person's approval before they run: when you call it, tell the user it is waiting for approval, never that it is done."
