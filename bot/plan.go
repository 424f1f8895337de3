package bot

// How the approval core plans a request (request.go): which calls a
// person must decide, by the policy, the rules, the tools' flags, the
// grants and the quorum; and the words of its card that come from the
// request (intro, summaries).

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/airlockhq/airlock/confirm"
	"github.com/airlockhq/airlock/internal/ids"
	"github.com/airlockhq/airlock/model"
	"github.com/airlockhq/airlock/tools"
)

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
	base := confirm.Request{Platform: conv.Platform, Channel: conv.Channel, Requester: requester.User, Client: b.clientName(conv), Now: now}
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
	if isClientSession(conv) {
		return // the client is told through the API or MCP, the audit keeps it; the channel is not a session's thread
	}
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
	if c, ok := b.gatewayClient(conv); ok {
		if !isMCP(conv) {
			return gatewayTool{client: c, name: name}, true // the client's tool, not one of ours
		}
		if t, ok := b.offeredMCP(c, name); ok {
			return t, true // one of ours, as the client is offered it
		}
		// Else a step of a runbook the client started: the run's own
		// tool, offered as the channel offers it (the client's calls of
		// tools it is not offered never get here: mcpCore.Call refuses).
	}
	if isRunbookTool(name) {
		return b.runbookToolIn(conv, name) // channels[].runbooks, not channels[].tools
	}
	if !b.cfg.Channels.ToolAllowed(conv.Platform, conv.Channel, conv.DM, name) {
		return nil, false
	}
	return b.cfg.Tools.Get(name)
}

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
