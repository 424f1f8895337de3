package bot

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/airlockhq/airlock/confirm"
	"github.com/airlockhq/airlock/internal/ids"
	"github.com/airlockhq/airlock/model"
	"github.com/airlockhq/airlock/tools"
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
	return b.converse(ctx, conv, asker{User: t.User, Roles: t.Roles}, nil)
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

// converse asks the model and acts on its reply until the model answers in
// text, pauses on a gated call, or the turn runs out of tool rounds. hist,
// when not nil, is the conversation's history as the caller just loaded
// it, used for the first request.
func (b *Bot) converse(ctx context.Context, conv confirm.Conversation, requester asker, hist []model.Message) error {
	th := threadOf(conv)
	p, err := b.platform(conv.Platform)
	if err != nil {
		return err
	}
	for first := true; ; first = false {
		if !first || hist == nil {
			var err error
			if hist, err = b.history(ctx, conv.ID); err != nil {
				return err
			}
		}
		gctx := model.WithWaitNotice(ctx, func(wait time.Duration, err error) {
			what := "the model's rate limit"
			if !model.RateLimited(err) {
				what = "the model to recover"
			}
			if perr := p.Post(ctx, th, fmt.Sprintf("Waiting %s for %s…", wait.Round(time.Second), what)); perr != nil {
				b.log.Error("post in thread", "err", perr)
			}
		})
		reply, err := b.cfg.Model.Generate(gctx, model.Request{System: b.cfg.SystemPrompt, Messages: hist, Tools: b.specsFor(conv)})
		if err != nil {
			b.log.Error("model request failed", "conversation", conv.ID, "err", err)
			msg := "I could not reach the model, so I stopped here. Nothing was lost: write again to retry."
			if perr := p.Post(ctx, th, msg); perr != nil {
				b.log.Error("post in thread", "err", perr)
			}
			return nil // told in the thread and logged; the history is intact for a retry
		}
		reply.Role = model.RoleAssistant
		if len(reply.ToolCalls) == 0 {
			return b.answer(ctx, conv, p, reply)
		}
		if len(reply.ToolCalls) > b.cfg.MaxCallsPerReply {
			return b.stopForCalls(ctx, conv, p, reply)
		}
		if err := confirm.CheckRounds(roundsThisTurn(hist), b.cfg.MaxToolRounds); err != nil {
			return b.stopForRounds(ctx, conv, p, reply)
		}
		batch, paused, err := b.pause(ctx, conv, requester, reply)
		if err != nil {
			return err
		}
		if paused {
			err := b.postCard(ctx, conv, p, batch, reply.Text)
			b.startPreviews(ctx, conv, batch)
			return err
		}
		// Nothing waited on a person: the batch is as pause stored it.
		done, err := b.finishBatch(ctx, conv, batch.ID, batch)
		if err != nil {
			return err
		}
		if done == nil && awaitsRunbook(batch) {
			return nil // it waits on a runbook run; the model goes on when the run has ended
		}
	}
}

// stopForRounds answers every call of a reply past the round limit without
// running it, so the history stays whole, and says so in the thread.
func (b *Bot) stopForRounds(ctx context.Context, conv confirm.Conversation, p Platform, reply model.Message) error {
	return b.stopUnrun(ctx, conv, p, reply,
		fmt.Sprintf("Not executed: this turn reached its limit of %d tool rounds.", b.cfg.MaxToolRounds),
		fmt.Sprintf("I stopped: this turn reached its limit of %d tool rounds (model.max_tool_rounds). Nothing more was run.", b.cfg.MaxToolRounds))
}

// stopForCalls answers a reply with more calls than model.max_calls_per_reply
// whole as invalid: no call runs, no card asks anyone, every call gets the
// same error result, and the thread is told in one line.
func (b *Bot) stopForCalls(ctx context.Context, conv confirm.Conversation, p Platform, reply model.Message) error {
	why := fmt.Sprintf("too many calls in one reply: %d, at most %d", len(reply.ToolCalls), b.cfg.MaxCallsPerReply)
	b.log.Warn("reply refused: "+why, "conversation", conv.ID)
	return b.stopUnrun(ctx, conv, p, reply, "Not executed: "+why+".",
		"I stopped: the model asked for "+why+" (model.max_calls_per_reply). Nothing was run.")
}

// stopUnrun answers every call of a reply with result without running it,
// so the history stays whole, ends the turn with notice and posts it (as
// an answer).
func (b *Bot) stopUnrun(ctx context.Context, conv confirm.Conversation, p Platform, reply model.Message, result, notice string) error {
	keys := confirm.Keys(reply.ToolCalls)
	results := model.Message{Role: model.RoleTool}
	for i, c := range reply.ToolCalls {
		results.Results = append(results.Results, model.ToolResult{
			CallID: c.ID, Key: keys[i], Name: c.Name, IsError: true, Content: result,
		})
	}
	// The notice ends the turn in the history too, so a restart finds
	// nothing left to answer and never asks the model again; it is
	// posted as an answer is (see answer).
	return b.answer(ctx, conv, p, reply, results, model.Message{Role: model.RoleAssistant, Text: notice})
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

// planBatch judges the calls of a reply (see pause) and returns the batch
// to store and the grants it uses, by id.
func (b *Bot) planBatch(ctx context.Context, conv confirm.Conversation, requester asker, reply model.Message) (*confirm.Batch, map[string]*confirm.Grant, error) {
	lookup := func(name string) (confirm.ToolInfo, bool) {
		t, ok := b.offered(conv, name)
		if !ok {
			return confirm.ToolInfo{}, false
		}
		return toolInfo(name, t), true
	}
	validate := func(c confirm.ToolCall) error { return b.validateCall(ctx, conv, requester.User, c) }
	policy, err := b.policyIn(ctx, conv)
	if err != nil {
		return nil, nil, err
	}
	now := b.now().UTC()
	base := confirm.Request{Platform: conv.Platform, Channel: conv.Channel, Requester: requester.User, Now: now}
	planned, _ := confirm.Plan(reply.ToolCalls, base, lookup, policy, validate)
	intro := reply.Text
	batch := &confirm.Batch{
		ID:             ids.New(),
		ConversationID: conv.ID,
		RequestedBy:    requester.User,
		Status:         confirm.BatchDecided,
		ExpiresAt:      now.Add(b.cfg.Timeout),
		Intro:          &intro,
	}
	active := map[string][]confirm.Grant{} // per tool, looked up once
	used := map[string]*confirm.Grant{}
	for _, pc := range planned {
		v := pc.Verdict
		c := confirm.Call{
			BatchID:        batch.ID,
			Key:            pc.Key,
			Position:       pc.Position,
			CallID:         pc.Call.ID,
			Tool:           pc.Call.Name,
			Args:           pc.Call.Args,
			Flagged:        pc.Flagged,
			Reasons:        v.Reasons,
			Run:            confirm.RunNotStarted,
			IdempotencyKey: batch.ID + "/" + pc.Key,
			ExpiresAt:      batch.ExpiresAt,
		}
		if pc.Flagged {
			c.Approvals, c.Grantable = b.approvalsOf(v)
			c.Restrict, c.Risk = v.Restrict, v.Risk.Or(confirm.RiskMedium)
		}
		switch {
		case pc.Invalid != nil:
			c.Decision, c.DecidedBy, c.DecidedAt = confirm.DecisionInvalid, SystemActor, &now
			c.DenyMessage = b.cfg.Redact("Not executed: " + pc.Invalid.Error())
			c.Summary = pc.Call.Name + " (invalid arguments)"
		case pc.Refused:
			c.Decision, c.DecidedBy, c.DecidedAt = confirm.DecisionDeniedByRule, ruleActor(v.DenyRule), &now
			c.DenyMessage = v.DenyMessage
			if c.DenyMessage == "" {
				c.DenyMessage = confirm.DefaultRuleDenyMessage(v.DenyRule)
			}
		case pc.Blocked:
			c.Decision, c.DecidedBy, c.DecidedAt = confirm.DecisionDenied, SystemActor, &now
			c.DenyMessage = confirm.SiblingInvalidMessage
		case pc.Flagged:
			c.Decision = confirm.DecisionPending
			if g, err := b.grantFor(ctx, conv, c, requester, now, active); err != nil {
				return nil, nil, err
			} else if g != nil {
				c.Decision, c.DecidedBy, c.DecidedAt, c.GrantID = confirm.DecisionAllowedByGrant, grantActor(g.ID), &now, g.ID
				used[g.ID] = g
			}
		default:
			c.Decision, c.DecidedBy, c.DecidedAt = confirm.DecisionAllowedByPolicy, PolicyActor, &now
		}
		if pc.Invalid == nil {
			c.Summary = b.summary(pc.Call)
		}
		if c.Decision == confirm.DecisionPending {
			batch.Status = confirm.BatchPending
		}
		b.markPreview(&c)
		batch.Calls = append(batch.Calls, c)
	}
	return batch, used, nil
}

// policyIn is the policy judging calls in the conversation: the
// configured one, and a person's yes for every call of a tool with a run
// whose outcome is unknown that nobody marked checked yet.
func (b *Bot) policyIn(ctx context.Context, conv confirm.Conversation) (confirm.Policy, error) {
	unknown, err := b.store.UnknownCalls(ctx, conv.ID)
	if err != nil {
		return nil, fmt.Errorf("load calls with unknown outcomes: %w", err)
	}
	return confirm.All(b.cfg.Policy, uncheckedPolicy(unknown)), nil
}

// approvalsOf is how many distinct people must allow a call the verdict
// asks about, and whether an "Allow for" may allow it (never a high or
// critical call).
func (b *Bot) approvalsOf(v confirm.Verdict) (approvals int, grantable bool) {
	approvals = v.Approvals
	if approvals <= 0 {
		approvals = b.cfg.DefaultApprovals
	}
	return approvals, !v.NotGrantable && !v.Risk.NoGrant() && approvals == 1
}

// grantFor returns the newest active grant of the conversation that covers
// a flagged call, or nil. Grants cover only calls needing one approval
// that no rule made ungrantable, of the grant's tool, in the grant's
// thread; of turns started by the grant's requester or by an approver of
// the channel; and only calls its creator may decide now: admitted by
// every restriction the call's verdict names, or, for a call without
// restrictions, an approver of the channel. A grant never widens who
// approves.
func (b *Bot) grantFor(ctx context.Context, conv confirm.Conversation, c confirm.Call, requester asker, now time.Time, cache map[string][]confirm.Grant) (*confirm.Grant, error) {
	if b.cfg.GrantFor <= 0 || !c.Grantable || c.Approvals > 1 {
		return nil, nil
	}
	gs, ok := cache[c.Tool]
	if !ok {
		var err error
		if gs, err = b.store.ActiveGrants(ctx, conv.ID, c.Tool); err != nil {
			return nil, fmt.Errorf("look up grants: %w", err)
		}
		cache[c.Tool] = gs
	}
	if len(gs) == 0 || requester.User == "" {
		return nil, nil
	}
	approves := b.cfg.Channels.CanApprove(ctx, conv.Platform, conv.Channel, conv.DM, requester.User, requester.Roles)
	def := b.toolDefinition(c.Tool)
	for i := range gs {
		g := &gs[i]
		if g.ToolDef != "" && g.ToolDef != def {
			continue // made for the tool as it was: it changed since
		}
		// The creator's roles are those they had when they made it.
		if (g.Requester == requester.User || approves) && b.mayGrant(ctx, conv, c, g.CreatedBy, g.CreatorRoles) {
			return g, nil
		}
	}
	return nil, nil
}

// toolDefinition is the definition of the named tool as the bot carries
// it now (tools.Definition); "" when it carries none.
func (b *Bot) toolDefinition(name string) string {
	t, ok := b.cfg.Tools.Get(name)
	if !ok {
		return ""
	}
	return tools.Definition(t)
}

// mayGrant reports whether user (with roles) may decide the call other
// than through an escalation step: a member of every restriction rules
// put on it, or, without restrictions, an approver of the channel. Only
// they may make a grant, and a grant covers a call only while its creator
// may: escalation steps widen who decides one card, never what a grant
// covers.
func (b *Bot) mayGrant(ctx context.Context, conv confirm.Conversation, c confirm.Call, user string, roles []string) bool {
	if user == "" {
		return false
	}
	if len(c.Restrict) == 0 {
		return b.cfg.Channels.CanApprove(ctx, conv.Platform, conv.Channel, conv.DM, user, roles)
	}
	for _, set := range c.Restrict {
		if !b.cfg.Channels.Admits(ctx, conv.Platform, user, roles, set) {
			return false
		}
	}
	return true
}

// notePauseDecisions tells the thread, one line each, about calls decided
// at pause time without a card: refused by a rule, or allowed by a grant.
func (b *Bot) notePauseDecisions(ctx context.Context, conv confirm.Conversation, batch *confirm.Batch, grants map[string]*confirm.Grant) {
	for _, c := range batch.Calls {
		var msg string
		switch c.Decision {
		case confirm.DecisionDeniedByRule:
			msg = fmt.Sprintf("Call %d (%s: %s) was refused by rule %s and not run.", c.Position+1, c.Tool, quote(c.Summary), strings.TrimPrefix(c.DecidedBy, "rule:"))
		case confirm.DecisionAllowedByGrant:
			g := grants[c.GrantID]
			msg = fmt.Sprintf("Call %d (%s: %s) is allowed by %s's grant for %s's requests until %s.", c.Position+1, c.Tool, quote(c.Summary), g.CreatedBy, g.Requester, g.ExpiresAt.UTC().Format("15:04 UTC"))
		default:
			continue
		}
		if err := b.postIn(ctx, threadOf(conv), msg); err != nil {
			b.log.Error("post pause decision", "batch", batch.ID, "err", err)
		}
	}
}

// toolInfo is what the policy may know of a tool: its flag, and its
// approvals when it says (tools[].approvals).
func toolInfo(name string, t tools.Tool) confirm.ToolInfo {
	info := confirm.ToolInfo{Name: name, Confirm: t.Confirm()}
	if a, ok := t.(interface{ Approvals() int }); ok {
		info.Approvals = a.Approvals()
	}
	if r, ok := t.(interface{ Risk() confirm.Risk }); ok {
		info.Risk = r.Risk()
	}
	return info
}

// uncheckedPolicy asks for every call of a tool that has a run whose
// outcome is unknown and that nobody marked checked yet in the
// conversation, whatever its arguments (a retry with a note is a retry
// all the same); no grant covers them.
func uncheckedPolicy(unknown []confirm.Call) confirm.Policy {
	gated := map[string]bool{}
	for _, u := range unknown {
		gated[u.Tool] = true
	}
	return confirm.PolicyFunc(func(r confirm.Request) confirm.Verdict {
		if !gated[r.Call.Name] {
			return confirm.Verdict{}
		}
		return confirm.Verdict{Ask: true, NotGrantable: true, Reasons: []confirm.Reason{{Kind: confirm.ReasonUnknownOutcome}}}
	})
}

// offered returns the tool when the bot carries it and the conversation's
// channel offers it.
func (b *Bot) offered(conv confirm.Conversation, name string) (tools.Tool, bool) {
	if isRunbookTool(name) {
		return b.runbookToolIn(conv, name) // channels[].runbooks, not channels[].tools
	}
	if !b.cfg.Channels.ToolAllowed(conv.Platform, conv.Channel, conv.DM, name) {
		return nil, false
	}
	return b.cfg.Tools.Get(name)
}

// ApprovalNote is added to the description of a tool whose calls need a
// person's yes, so the model says a call waits instead of claiming success.
const ApprovalNote = "Calls of this tool wait for a person's approval before they run: when you call it, tell the user it is waiting for approval, never that it is done."

// specsFor returns the tools offered in the conversation's channel as the
// model sees them, each gated tool's description saying so: a tool whose
// every call asks (its flag, confirmation.tools) and a tool some ask rule
// could gate in this channel (whatever the arguments, requester or time).
func (b *Bot) specsFor(conv confirm.Conversation) []model.ToolSpec {
	all := b.cfg.Tools.Specs()
	out := make([]model.ToolSpec, 0, len(all))
	for _, s := range all {
		t, ok := b.offered(conv, s.Name)
		if !ok {
			continue
		}
		info := toolInfo(s.Name, t)
		req := confirm.Request{Call: confirm.ToolCall{Name: s.Name, Args: json.RawMessage("{}")}, Tool: &info,
			Platform: conv.Platform, Channel: conv.Channel}
		v := b.cfg.Policy.Evaluate(req)
		if (v.Ask && alwaysAsks(v.Reasons)) || confirm.MayAsk(b.cfg.Policy, req) {
			s.Description = strings.TrimSpace(s.Description + " " + ApprovalNote)
		}
		out = append(out, s)
	}
	return append(out, b.runbookSpecs(conv)...)
}

// alwaysAsks reports whether the reasons gate every call of the tool (its
// flag or confirmation.tools), not only some arguments (rules).
func alwaysAsks(rs []confirm.Reason) bool {
	for _, r := range rs {
		if r.Kind == confirm.ReasonToolFlag || r.Kind == confirm.ReasonConfirmationTools {
			return true
		}
	}
	return false
}

// summary renders a call's read-back from its validated arguments.
func (b *Bot) summary(c confirm.ToolCall) string {
	t, ok := b.cfg.Tools.Get(c.Name)
	if rb := b.runbookNamed(c.Name); rb != nil {
		t, ok = runbookTool{rb: rb}, true
	}
	if !ok {
		return c.Name
	}
	s, err := t.Summary(c.Args)
	if err != nil {
		b.log.Warn("summary template failed; showing the arguments only", "tool", c.Name, "err", err)
		return c.Name + " (read-back unavailable; check the arguments)"
	}
	// Stored to be shown (the card, thread lines, the audit): no secret.
	return b.cfg.Redact(s)
}

// introOf returns the model's words that came with a batch's calls, for
// its card: as stored with the batch, or, for a batch stored by an older
// release, from its assistant message. (Not cached in memory: a model's
// text may be long, and a card is rendered only a few times.)
func (b *Bot) introOf(ctx context.Context, batch *confirm.Batch) string {
	if batch.Intro != nil {
		return *batch.Intro
	}
	m, err := b.store.Message(ctx, batch.ConversationID, batch.MessageSeq)
	if err != nil {
		return ""
	}
	var mm model.Message
	if json.Unmarshal(m.Body, &mm) != nil {
		return ""
	}
	return mm.Text
}
