package bot

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/airlockhq/airlock/confirm"
	"github.com/airlockhq/airlock/gateway"
	"github.com/airlockhq/airlock/internal/jsonobj"
	"github.com/airlockhq/airlock/model"
	"github.com/airlockhq/airlock/tools"
)

// The MCP source (issue 37): a gateway client connected to Airlock's MCP
// server calls Airlock's own tools (package mcpserver serves MCP over the
// gateway.Tools this file implements). A client's MCP session is a
// conversation of its channel keyed by the thread mcp/<client>/<session>.
// Its calls go through the one path (request.go), as the built-in agent's
// do: the client's acts_for is the requester; the tool's flag,
// confirmation.tools, the rules (with `client`), the client's ask and deny
// lists judge; an ungated call runs at once, a gated one when allowed;
// Airlock runs them (runCall), exactly once. Nothing is handed back
// (mcpSource): the waiting tools/call reads the batch.

// isMCP reports whether conv is a gateway client's MCP session.
func isMCP(conv confirm.Conversation) bool { return gateway.IsMCPSession(conv.Thread) }

// mcpTool is one of Airlock's tools as a client's MCP call of it is
// judged: it asks when the tool does, or when the client's ask list names
// it (rules may add, as everywhere).
type mcpTool struct {
	tools.Tool
	client gateway.Client
	name   string
}

func (t mcpTool) Confirm() bool { return t.Tool.Confirm() || t.client.Judge(t.name) == gateway.Asks }

// offeredMCP is tool name as the MCP session's client may call it: one
// of Airlock's own tools its `tools` globs name, or a runbook its channel
// offers (runbook__<name>) that they name.
func (b *Bot) offeredMCP(c gateway.Client, name string) (tools.Tool, bool) {
	if !c.Offers(name) {
		return nil, false
	}
	var t tools.Tool
	ok := false
	if isRunbookTool(name) {
		t, ok = b.runbookToolIn(clientChannel(c), name)
	} else {
		t, ok = b.cfg.Tools.Get(name)
	}
	if !ok {
		return nil, false
	}
	return mcpTool{Tool: t, client: c, name: name}, true
}

// clientChannel is the client's channel, as a conversation is looked up
// for what it offers.
func clientChannel(c gateway.Client) confirm.Conversation {
	return confirm.Conversation{Platform: c.Channel.Platform, Channel: c.Channel.ID}
}

// MCP is the approval core as the MCP server sees it.
func (b *Bot) MCP() gateway.Tools { return mcpCore{b} }

type mcpCore struct{ b *Bot }

var (
	_ gateway.Tools = mcpCore{}
	_ Source        = mcpSource{}
)

// mcpSource: nothing to hand back; the client's tools/call reads the
// batch.
type mcpSource struct{}

func (mcpSource) Continue(context.Context, confirm.Conversation, *confirm.Batch) error { return nil }

// Offered lists Airlock's tools the client's globs name, as the tool set
// describes them.
func (m mcpCore) Offered(c gateway.Client) []gateway.Tool {
	var out []gateway.Tool
	for _, s := range append(m.b.cfg.Tools.Specs(), m.b.runbookSpecs(clientChannel(c))...) {
		if _, ok := m.b.offeredMCP(c, s.Name); !ok {
			continue
		}
		schema := s.Parameters
		if len(schema) == 0 {
			schema = json.RawMessage(`{"type":"object"}`)
		}
		out = append(out, gateway.Tool{Name: s.Name, Description: s.Description, InputSchema: schema})
	}
	return out
}

// Call makes the client's call in its MCP session's conversation, or joins
// the session's call of the same tool and arguments a person was asked
// about. An ungated call has run when it returns.
func (m mcpCore) Call(ctx context.Context, c gateway.Client, session, tool string, args json.RawMessage) (gateway.Outcome, error) {
	b := m.b
	if _, ok := b.offeredMCP(c, tool); !ok {
		return gateway.Outcome{}, gateway.ErrUnknownTool
	}
	if len(args) == 0 {
		args = json.RawMessage(`{}`)
	}
	canon, ok := jsonobj.Canonical(args)
	if !ok {
		return gateway.Outcome{}, errors.New("the arguments are not JSON")
	}
	conv, p, unlock, err := b.clientSession(ctx, c, gateway.MCPThread(c.Name, session))
	if err != nil {
		return gateway.Outcome{}, err
	}
	defer unlock()
	if id, err := m.bound(ctx, conv, tool, canon); err != nil || id != "" {
		if err != nil {
			return gateway.Outcome{}, err
		}
		return m.outcome(ctx, conv, id)
	}
	// A new call: within the client's max_pending, over all its MCP
	// sessions (a retry joining a waiting call is never refused).
	if n, err := b.store.PendingInThreads(ctx, c.Channel.Platform, c.Channel.ID, gateway.MCPThread(c.Name, "")); err != nil {
		return gateway.Outcome{}, err
	} else if n >= c.MaxPending {
		return gateway.Outcome{}, gateway.ErrTooManyPending
	}
	body, _ := json.Marshal(map[string]any{"client": c.Name, "session": session, "tool": tool, "args": json.RawMessage(canon)})
	reply := model.Message{Role: model.RoleAssistant, ToolCalls: []confirm.ToolCall{{Name: tool, Args: canon}}}
	batch, err := b.request(ctx, approvalRequest{conv: conv, requester: asker{User: c.ActsFor}, reply: reply,
		stored: confirm.Message{Role: roleGateway, Body: body},
		shape:  b.clientLists(c, tool)})
	if err != nil {
		return gateway.Outcome{}, err
	}
	if batch.Status == confirm.BatchPending {
		if err := b.postCard(ctx, conv, p, batch, ""); err != nil {
			b.log.Warn("mcp: post a card; card sync and recovery go on with it", "batch", batch.ID, "err", err)
		}
		b.startPreviews(ctx, conv, batch)
	} else if _, err := b.finishBatch(ctx, conv, batch.ID, batch); err != nil {
		return gateway.Outcome{}, err
	}
	return m.outcome(ctx, conv, batch.ID)
}

// bound is the session's call a retry of tool with args joins: one a
// person was asked about, whatever became of it; or a runbook's run still
// going (started unasked, it would otherwise start again).
func (m mcpCore) bound(ctx context.Context, conv confirm.Conversation, tool string, args []byte) (string, error) {
	id, err := m.b.store.AskedBatch(ctx, conv.ID, tool, args)
	if err != nil || id != "" || !isRunbookTool(tool) {
		return id, err
	}
	open, err := m.b.store.OpenBatches(ctx, conv.ID) // the runs under way: few
	if err != nil {
		return "", err
	}
	for _, id := range open {
		batch, err := m.b.store.Batch(ctx, id)
		if err != nil {
			return "", err
		}
		if c := batch.Calls; len(c) == 1 && c[0].Tool == tool && string(c[0].Args) == string(args) {
			return id, nil
		}
	}
	return "", nil
}

// Outcome is where the client's call id stands; another client's id, or
// one that is not an MCP call, is not found.
func (m mcpCore) Outcome(ctx context.Context, c gateway.Client, id string) (gateway.Outcome, error) {
	batch, err := m.b.store.Batch(ctx, id)
	if errors.Is(err, confirm.ErrNotFound) {
		return gateway.Outcome{}, gateway.ErrNotFound
	}
	if err != nil {
		return gateway.Outcome{}, err
	}
	conv, err := m.b.conversation(ctx, batch.ConversationID)
	if err != nil {
		return gateway.Outcome{}, err
	}
	if owner, ok := m.b.gatewayClient(conv); !ok || !isMCP(conv) || owner.Name != c.Name || len(batch.Calls) != 1 {
		return gateway.Outcome{}, gateway.ErrNotFound
	}
	return m.outcomeOf(ctx, conv, batch), nil
}

// Left records that the client stopped waiting for its pending call id,
// and updates the card to say so.
func (m mcpCore) Left(ctx context.Context, c gateway.Client, id string) error {
	if _, err := m.Outcome(ctx, c, id); err != nil {
		return err // not the client's
	}
	won, err := m.b.store.MarkClientLeft(ctx, id)
	if err != nil || !won {
		return err
	}
	batch, err := m.b.store.Batch(ctx, id)
	if err != nil {
		return err
	}
	conv, err := m.b.conversation(ctx, batch.ConversationID)
	if err != nil {
		return err
	}
	m.b.refreshCard(ctx, conv, id)
	return nil
}

func (m mcpCore) outcome(ctx context.Context, conv confirm.Conversation, id string) (gateway.Outcome, error) {
	batch, err := m.b.store.Batch(ctx, id)
	if err != nil {
		return gateway.Outcome{}, err
	}
	return m.outcomeOf(ctx, conv, batch), nil
}

// outcomeOf is the batch's one call as the MCP client is told: its result
// once it ran, what Airlock's agent would be told when it did not.
func (m mcpCore) outcomeOf(ctx context.Context, conv confirm.Conversation, batch *confirm.Batch) gateway.Outcome {
	c := batch.Calls[0]
	o := gateway.Outcome{ID: batch.ID, State: gateway.CallWaiting}
	switch {
	case c.Decision == confirm.DecisionPending:
		o.CardURL = m.b.cardURL(ctx, conv, batch)
	case c.Decision.Allowed():
		switch c.Run {
		case confirm.RunSucceeded:
			o.State, o.Result = gateway.CallDone, c.Result
		case confirm.RunFailed:
			o.State, o.Result, o.IsError = gateway.CallDone, c.Result, true
		case confirm.RunUnknown:
			o.State, o.Result, o.IsError = gateway.CallDone, confirm.UnknownOutcomeMessage, true
		}
	default:
		o.State, o.Result, o.IsError = gateway.CallRefused, m.b.decisionFor(c).DenyMessage(), true
	}
	return o
}
