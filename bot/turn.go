package bot

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

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
}

// HandleTurn runs one turn: it resolves a pending pause of the thread as
// abandoned, runs decided work that is still open, then asks the model and
// runs its calls until it answers or pauses. One turn at a time per thread.
func (b *Bot) HandleTurn(ctx context.Context, t Turn) error {
	conv, err := b.store.Conversation(ctx, t.Platform, t.Channel, t.Thread)
	if err != nil {
		return fmt.Errorf("load conversation: %w", err)
	}
	unlock, err := b.lockConversation(ctx, conv.ID)
	if err != nil {
		return err
	}
	defer unlock()

	if err := b.settle(ctx, conv); err != nil {
		return err
	}
	if err := b.append(ctx, conv.ID, model.Message{Role: model.RoleUser, Author: t.User, Text: t.Text}); err != nil {
		return err
	}
	return b.converse(ctx, conv, t.User)
}

// Note keeps a message said in a thread that holds a conversation, without
// making it a turn: the model sees it as context on the next turn. It never
// supersedes a pending card. A thread without a conversation keeps nothing.
func (b *Bot) Note(ctx context.Context, t Turn) error {
	conv, err := b.store.FindConversation(ctx, t.Platform, t.Channel, t.Thread)
	if errors.Is(err, confirm.ErrNotFound) {
		return nil
	} else if err != nil {
		return fmt.Errorf("load conversation: %w", err)
	}
	return b.append(ctx, conv.ID, model.Message{Role: model.RoleUser, Author: t.User, Text: t.Text, Aside: true})
}

// HasConversation reports whether the thread holds a conversation.
func (b *Bot) HasConversation(ctx context.Context, th Thread) (bool, error) {
	_, err := b.store.FindConversation(ctx, th.Platform, th.Channel, th.Thread)
	if errors.Is(err, confirm.ErrNotFound) {
		return false, nil
	}
	return err == nil, err
}

// settle brings a conversation to a state where a new user message may
// follow: a pending pause is abandoned (every call denied with "The user
// moved on."), and batches decided but not yet run are run, so the history
// never holds tool calls without results.
func (b *Bot) settle(ctx context.Context, conv confirm.Conversation) error {
	if pending, err := b.store.PendingBatch(ctx, conv.ID); err == nil {
		n, err := b.store.ResolvePending(ctx, pending.ID, confirm.DecisionDenied, SystemActor, confirm.MovedOnMessage, true, b.now())
		if err != nil {
			return fmt.Errorf("abandon pause: %w", err)
		}
		if n > 0 {
			b.log.Info("pause abandoned: the user moved on", "batch", pending.ID, "conversation", conv.ID)
		}
	} else if !errors.Is(err, confirm.ErrNotFound) {
		return fmt.Errorf("load pending pause: %w", err)
	}
	open, err := b.store.OpenBatches(ctx, conv.ID)
	if err != nil {
		return fmt.Errorf("load open batches: %w", err)
	}
	for _, id := range open {
		if _, err := b.finishBatch(ctx, conv, id); err != nil {
			return err
		}
	}
	return nil
}

// converse asks the model and acts on its reply until the model answers in
// text, pauses on a gated call, or the turn runs out of tool rounds.
func (b *Bot) converse(ctx context.Context, conv confirm.Conversation, requester string) error {
	th := threadOf(conv)
	p, err := b.platform(conv.Platform)
	if err != nil {
		return err
	}
	for {
		hist, err := b.history(ctx, conv.ID)
		if err != nil {
			return err
		}
		reply, err := b.cfg.Model.Generate(ctx, model.Request{System: b.cfg.SystemPrompt, Messages: hist, Tools: b.cfg.Tools.Specs()})
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
			if err := b.append(ctx, conv.ID, reply); err != nil {
				return err
			}
			text := reply.Text
			if text == "" {
				text = "(the model returned an empty answer)"
			}
			return p.Post(ctx, th, text)
		}
		if err := confirm.CheckRounds(roundsThisTurn(hist), b.cfg.MaxToolRounds); err != nil {
			return b.stopForRounds(ctx, conv, p, reply)
		}
		batch, paused, err := b.pause(ctx, conv, requester, reply)
		if err != nil {
			return err
		}
		if paused {
			return b.postCard(ctx, conv, p, batch, reply.Text)
		}
		if _, err := b.finishBatch(ctx, conv, batch.ID); err != nil {
			return err
		}
	}
}

// stopForRounds answers every call of a reply past the round limit without
// running it, so the history stays whole, and says so in the thread.
func (b *Bot) stopForRounds(ctx context.Context, conv confirm.Conversation, p Platform, reply model.Message) error {
	keys := confirm.Keys(reply.ToolCalls)
	results := model.Message{Role: model.RoleTool}
	for i, c := range reply.ToolCalls {
		results.Results = append(results.Results, model.ToolResult{
			CallID: c.ID, Key: keys[i], Name: c.Name, IsError: true,
			Content: fmt.Sprintf("Not executed: this turn reached its limit of %d tool rounds.", b.cfg.MaxToolRounds),
		})
	}
	if err := b.append(ctx, conv.ID, reply, results); err != nil {
		return err
	}
	return p.Post(ctx, threadOf(conv), fmt.Sprintf("I stopped: this turn reached its limit of %d tool rounds (model.max_tool_rounds). Nothing more was run.", b.cfg.MaxToolRounds))
}

// pause stores a reply with tool calls as a batch. When the policy flags a
// call, the batch waits for decisions (paused); otherwise every call is
// allowed by policy and the batch is ready to run.
func (b *Bot) pause(ctx context.Context, conv confirm.Conversation, requester string, reply model.Message) (*confirm.Batch, bool, error) {
	lookup := func(name string) (confirm.ToolInfo, bool) {
		t, ok := b.cfg.Tools.Get(name)
		if !ok {
			return confirm.ToolInfo{}, false
		}
		return confirm.ToolInfo{Name: name, Confirm: t.Confirm()}, true
	}
	validate := func(c confirm.ToolCall) error {
		t, ok := b.cfg.Tools.Get(c.Name)
		if !ok {
			return fmt.Errorf("unknown tool %q", c.Name)
		}
		return t.Validate(c.Args)
	}
	planned, paused := confirm.Plan(reply.ToolCalls, lookup, b.cfg.Policy, validate)
	now := b.now().UTC()
	batch := &confirm.Batch{
		ID:             newBatchID(),
		ConversationID: conv.ID,
		RequestedBy:    requester,
		Status:         confirm.BatchDecided,
		CreatedAt:      now,
		ExpiresAt:      now.Add(b.cfg.Timeout),
	}
	if paused {
		batch.Status = confirm.BatchPending
	}
	for _, pc := range planned {
		c := confirm.Call{
			BatchID:        batch.ID,
			Key:            pc.Key,
			Position:       pc.Position,
			CallID:         pc.Call.ID,
			Tool:           pc.Call.Name,
			Args:           pc.Call.Args,
			Flagged:        pc.Flagged,
			Run:            confirm.RunNotStarted,
			IdempotencyKey: batch.ID + "/" + pc.Key,
			ExpiresAt:      batch.ExpiresAt,
		}
		switch {
		case pc.Invalid != nil:
			c.Decision, c.DecidedBy, c.DecidedAt = confirm.DecisionInvalid, SystemActor, &now
			c.DenyMessage = "Not executed: " + pc.Invalid.Error()
			c.Summary = pc.Call.Name + " (invalid arguments)"
		case pc.Flagged:
			c.Decision = confirm.DecisionPending
		default:
			c.Decision, c.DecidedBy, c.DecidedAt = confirm.DecisionAllowedByPolicy, PolicyActor, &now
		}
		if pc.Invalid == nil {
			c.Summary = b.summary(pc.Call)
		}
		batch.Calls = append(batch.Calls, c)
	}
	assistant, err := storedMessage(reply)
	if err != nil {
		return nil, false, err
	}
	if err := b.store.CreateBatch(ctx, batch, assistant); err != nil {
		return nil, false, fmt.Errorf("store batch: %w", err)
	}
	return batch, paused, nil
}

// summary renders a call's read-back from its validated arguments.
func (b *Bot) summary(c confirm.ToolCall) string {
	t, ok := b.cfg.Tools.Get(c.Name)
	if !ok {
		return c.Name
	}
	s, err := t.Summary(c.Args)
	if err != nil {
		b.log.Warn("summary template failed; showing the arguments only", "tool", c.Name, "err", err)
		return c.Name + " (read-back unavailable; check the arguments)"
	}
	return s
}

func (b *Bot) postCard(ctx context.Context, conv confirm.Conversation, p Platform, batch *confirm.Batch, intro string) error {
	stored, err := b.store.Batch(ctx, batch.ID)
	if err != nil {
		return fmt.Errorf("reload batch: %w", err)
	}
	card := cardFor(stored, intro, b.cfg.Approvers.For(conv.Platform, conv.Channel))
	ref, err := p.PostCard(ctx, threadOf(conv), card)
	if err != nil {
		return fmt.Errorf("post card: %w", err)
	}
	if err := b.store.SetCardRef(ctx, batch.ID, ref); err != nil {
		return fmt.Errorf("store card ref: %w", err)
	}
	return nil
}

// introOf returns the model's words in the stored assistant message of a
// batch, for the card.
func (b *Bot) introOf(ctx context.Context, batch *confirm.Batch) string {
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
