package bot

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/airlockhq/airlock/card"
	"github.com/airlockhq/airlock/confirm"
	"github.com/airlockhq/airlock/gateway"
	"github.com/airlockhq/airlock/internal/jsonobj"
	"github.com/airlockhq/airlock/model"
)

// The gateway source (issue 36): agents outside Airlock ask for approval
// of their calls over HTTP (package gateway serves the API over the
// gateway.Approvals this file implements). A client's session is a
// conversation of its channel, keyed by the thread gateway/<client>/<session>
// (no Slack or Discord thread id has that form; client names hold no
// "/"), and its cards are posted at the channel's top level (threadOf).
// Requests go through the one path (request.go): the client's acts_for
// is the requester, its ask/deny/allow lists and the rules judge, cards,
// clicks, quorum, grants and card sync are the core's. Airlock runs none
// of these calls: an allowed one waits to be consumed (its run taken
// from not_started to running, once) and its outcome is reported.

// roleGateway is the stored role of a gateway request's message: no model
// reads a gateway conversation.
const roleGateway = "gateway"

// isGateway reports whether conv is a gateway client's session of the
// approval API (whose calls the client carries out; isMCP for MCP's).
func isGateway(conv confirm.Conversation) bool { return gateway.IsAPISession(conv.Thread) }

// isClientSession reports whether conv is a gateway client's session, of
// the approval API or MCP: its cards are posted at the channel's top level
// (no chat thread is the session's).
func isClientSession(conv confirm.Conversation) bool {
	_, _, ok := gateway.SessionOf(conv.Thread)
	return ok
}

// gatewayClient is the configured client whose session conv is.
func (b *Bot) gatewayClient(conv confirm.Conversation) (gateway.Client, bool) {
	name, _, ok := gateway.SessionOf(conv.Thread)
	if !ok {
		return gateway.Client{}, false
	}
	for _, c := range b.cfg.Gateway.Clients {
		if c.Name == name && c.Channel.Platform == conv.Platform && c.Channel.ID == conv.Channel {
			return c, true
		}
	}
	return gateway.Client{}, false
}

// gatewayTool is a client's tool as the core judges it: any name, asked
// about when the client's lists say so (rules may add), its arguments
// any JSON object, shown as they are. It never runs in Airlock.
type gatewayTool struct {
	client gateway.Client
	name   string
}

func (t gatewayTool) Spec() model.ToolSpec { return model.ToolSpec{Name: t.name} }
func (t gatewayTool) Confirm() bool        { return t.client.Judge(t.name) == gateway.Asks }
func (t gatewayTool) Validate(args json.RawMessage) error {
	var m map[string]json.RawMessage
	if json.Unmarshal(args, &m) != nil || m == nil {
		return errors.New("the arguments are not a JSON object")
	}
	return nil
}
func (t gatewayTool) Summary(args json.RawMessage) (string, error) {
	return t.name + " " + card.Excerpt(compactJSON(args), 300), nil
}
func (t gatewayTool) Run(context.Context, json.RawMessage, string) (string, error) {
	return "", errors.New("a gateway client's call is carried out by the client")
}

// clientName is the gateway client whose session conv is; "" for every
// other conversation (the rules' client variable).
func (b *Bot) clientName(conv confirm.Conversation) string {
	c, _ := b.gatewayClient(conv)
	return c.Name
}

// Gateway is the approval core as the gateway's API sees it.
func (b *Bot) Gateway() gateway.Approvals { return gatewayApprovals{b} }

type gatewayApprovals struct{ b *Bot }

var (
	_ gateway.Approvals = gatewayApprovals{}
	_ Source            = gatewayApprovals{}
)

// Continue: nothing to hand back; the client's long-polls read the batch.
func (gatewayApprovals) Continue(context.Context, confirm.Conversation, *confirm.Batch) error {
	return nil
}

// Request binds the request to the session's approval of the same tool
// and arguments that is pending, or allowed and not consumed; else asks
// the core for a new one, whose card it posts.
func (g gatewayApprovals) Request(ctx context.Context, c gateway.Client, r gateway.Request) (gateway.Approval, error) {
	b := g.b
	args, ok := jsonobj.Canonical(r.Args)
	if !ok {
		return gateway.Approval{}, errors.New("args: not JSON")
	}
	conv, p, unlock, err := b.clientSession(ctx, c, gateway.SessionThread(c.Name, r.Session))
	if err != nil {
		return gateway.Approval{}, err
	}
	defer unlock()
	if bound, err := g.bound(ctx, conv, r.Tool, args); err != nil || bound != nil {
		if err != nil {
			return gateway.Approval{}, err
		}
		return g.approval(ctx, conv, bound), g.addCallback(ctx, c, conv, bound.ID, r.CallbackURL)
	}
	body, _ := json.Marshal(map[string]any{"client": c.Name, "session": r.Session, "call_id": r.CallID, "tool": r.Tool, "args": args})
	reply := model.Message{Role: model.RoleAssistant, Text: r.Reason, ToolCalls: []confirm.ToolCall{{ID: r.CallID, Name: r.Tool, Args: args}}}
	batch, err := b.request(ctx, approvalRequest{conv: conv, requester: asker{User: c.ActsFor}, reply: reply,
		stored: confirm.Message{Role: roleGateway, Body: body},
		shape: func(ctx context.Context, batch *confirm.Batch) error {
			if err := b.clientLists(c, r.Tool)(ctx, batch); err != nil {
				return err
			}
			if batch.Status == confirm.BatchDecided {
				// Decided as it is made (no list or rule asks, a grant, a
				// deny): stored done, as finishGateway would leave it, in
				// the one transaction that stores it.
				batch.Status = confirm.BatchDone
			}
			return nil
		}})
	if err != nil {
		return gateway.Approval{}, err
	}
	if batch.Status == confirm.BatchPending {
		if err := b.postCard(ctx, conv, p, batch, r.Reason); err != nil {
			b.log.Warn("gateway: post a card; card sync and recovery go on with it", "batch", batch.ID, "err", err)
		}
		b.startPreviews(ctx, conv, batch)
	} else if err := b.finishGateway(ctx, conv, batch.ID); err != nil {
		return gateway.Approval{}, err
	}
	return g.approval(ctx, conv, batch), g.addCallback(ctx, c, conv, batch.ID, r.CallbackURL)
}

// addCallback registers the request's callback_url (checked by the API
// against the client's callback_urls) with its approval; the callbacks
// job queues it once the approval is decided.
func (g gatewayApprovals) addCallback(ctx context.Context, c gateway.Client, conv confirm.Conversation, batchID, url string) error {
	if url == "" {
		return nil
	}
	return g.b.store.AddCallback(ctx, confirm.Callback{BatchID: batchID, URL: url, Client: c.Name, ConversationID: conv.ID})
}

// JobCallbacks names the job that queues the callbacks of decided
// approvals in the events outbox (callbacksJob).
const JobCallbacks = "gateway-callbacks"

// callbacksJob queues each due callback (its approval decided) in the
// events outbox, with the approval object as its body: once, whatever the
// replicas (QueueCallback's conditional update decides). The outbox's
// deliverer signs and sends it, retrying until accepted.
func (b *Bot) callbacksJob(ctx context.Context) error {
	due, err := b.store.DueCallbacks(ctx, 100)
	if err != nil {
		return err
	}
	var errs []error
	for _, cb := range due {
		batch, err := b.store.Batch(ctx, cb.BatchID)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		conv, err := b.conversation(ctx, batch.ConversationID)
		if err != nil || len(batch.Calls) != 1 {
			errs = append(errs, fmt.Errorf("callback of %s: %w", cb.BatchID, err))
			continue
		}
		body, _ := json.Marshal(gatewayApprovals{b}.approval(ctx, conv, batch))
		if _, err := b.store.QueueCallback(ctx, cb, gateway.CallbackTarget(cb.Client), body); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// clientSession is the conversation of a client's session (thread: of
// the approval API or MCP), its platform, and the session held (the
// caller releases it with unlock): two racing identical requests do not
// both create.
func (b *Bot) clientSession(ctx context.Context, c gateway.Client, thread string) (confirm.Conversation, Platform, func(), error) {
	conv, err := b.store.Conversation(ctx, c.Channel.Platform, c.Channel.ID, thread, false)
	if err != nil {
		return conv, nil, nil, err
	}
	p, err := b.platform(conv.Platform)
	if err != nil {
		return conv, nil, nil, err
	}
	unlock, err := b.lockConversation(ctx, conv.ID)
	if err != nil {
		return conv, nil, nil, err
	}
	return conv, p, unlock, nil
}

// clientLists is the request's shape for a client's call of tool: a tool
// on its deny list, or off its allow list, is refused like a rule's deny,
// without a card (its ask list is the tool's Confirm).
func (b *Bot) clientLists(c gateway.Client, tool string) func(context.Context, *confirm.Batch) error {
	return func(_ context.Context, batch *confirm.Batch) error {
		call := &batch.Calls[0]
		if c.Judge(tool) == gateway.Denied && call.Decision != confirm.DecisionInvalid {
			now := b.now().UTC()
			call.Decision, call.DecidedBy, call.DecidedAt = confirm.DecisionDeniedByRule, PolicyActor, &now
			call.DenyMessage = fmt.Sprintf("Not allowed: %s is on this client's deny list (gateway.clients[].deny), or off its allow list.", tool)
			call.Flagged = false
			batch.Status = confirm.BatchDecided
		}
		return nil
	}
}

// bound is the session's batch a request of tool with args (canonical,
// as stored) binds to: its call pending, or allowed and not consumed.
func (g gatewayApprovals) bound(ctx context.Context, conv confirm.Conversation, tool string, args []byte) (*confirm.Batch, error) {
	id, err := g.b.store.BindableBatch(ctx, conv.ID, tool, args)
	if err != nil || id == "" {
		return nil, err
	}
	return g.b.store.Batch(ctx, id)
}

// find is the client's batch id, or gateway.ErrNotFound (another
// client's, or no gateway batch, is not found either).
func (g gatewayApprovals) find(ctx context.Context, c gateway.Client, id string) (*confirm.Batch, confirm.Conversation, error) {
	batch, err := g.b.store.Batch(ctx, id)
	if errors.Is(err, confirm.ErrNotFound) {
		return nil, confirm.Conversation{}, gateway.ErrNotFound
	}
	if err != nil {
		return nil, confirm.Conversation{}, err
	}
	conv, err := g.b.conversation(ctx, batch.ConversationID)
	if err != nil {
		return nil, conv, err
	}
	if owner, ok := g.b.gatewayClient(conv); !ok || !isGateway(conv) || owner.Name != c.Name || len(batch.Calls) != 1 {
		return nil, conv, gateway.ErrNotFound // an MCP call is Airlock's to run: never consumed over the API
	}
	return batch, conv, nil
}

func (g gatewayApprovals) Get(ctx context.Context, c gateway.Client, id string) (gateway.Approval, error) {
	batch, conv, err := g.find(ctx, c, id)
	if err != nil {
		return gateway.Approval{}, err
	}
	a := g.approval(ctx, conv, batch)
	a.CardURL = g.b.cardURL(ctx, conv, batch)
	return a, nil
}

// approval is approvalOf with the grant that allowed the call, if one
// did, named in its reason.
func (g gatewayApprovals) approval(ctx context.Context, conv confirm.Conversation, batch *confirm.Batch) gateway.Approval {
	a := approvalOf(conv, batch)
	if c := batch.Calls[0]; c.Decision == confirm.DecisionAllowedByGrant && c.GrantID != "" {
		if gr, err := g.b.store.Grant(ctx, c.GrantID); err == nil {
			a.Reason = fmt.Sprintf("a grant of %s by %s until %s (grant %s)", gr.Tool, gr.CreatedBy, gr.ExpiresAt.UTC().Format(time.RFC3339), gr.ID)
		}
	}
	return a
}

// cardURL is a link to the batch's card (a Slack permalink, a Discord
// jump URL), cached; "" before the card is posted or where the platform
// cannot say.
func (b *Bot) cardURL(ctx context.Context, conv confirm.Conversation, batch *confirm.Batch) string {
	p, err := b.platform(conv.Platform)
	r, ok := p.(Router)
	if err != nil || !ok || batch.CardRef == "" {
		return ""
	}
	first, _, _ := strings.Cut(batch.CardRef, ",")
	return b.link(ctx, r, threadOf(conv), first)
}

// Consume takes the allowed call's run from not_started to running: one
// conditional UPDATE, whose affected row decides.
func (g gatewayApprovals) Consume(ctx context.Context, c gateway.Client, id string) (gateway.Approval, error) {
	batch, conv, err := g.find(ctx, c, id)
	if err != nil {
		return gateway.Approval{}, err
	}
	call := batch.Calls[0]
	if !call.Decision.Allowed() {
		return approvalOf(conv, batch), gateway.ErrNotConsumable
	}
	won, err := g.b.store.StartRun(ctx, batch.ID, call.Key)
	if err != nil {
		return gateway.Approval{}, err
	}
	if !won {
		return approvalOf(conv, batch), gateway.ErrNotConsumable
	}
	g.b.refreshCard(ctx, conv, batch.ID)
	return approvalOf(conv, batch), nil
}

// Result records a consumed call's outcome (scrubbed and cut like any
// result), then completes its batch.
func (g gatewayApprovals) Result(ctx context.Context, c gateway.Client, id string, ok bool, output string) error {
	batch, conv, err := g.find(ctx, c, id)
	if err != nil {
		return err
	}
	call := batch.Calls[0]
	if call.Run != confirm.RunRunning {
		return gateway.ErrNotConsumable
	}
	status := confirm.RunSucceeded
	if !ok {
		status = confirm.RunFailed
	}
	if err := g.b.store.FinishRun(ctx, batch.ID, call.Key, status, g.b.scrub(output)); err != nil {
		return err
	}
	g.b.refreshCard(ctx, conv, batch.ID)
	return nil
}

// Pending counts the client's waiting approvals, over all its sessions.
func (g gatewayApprovals) Pending(ctx context.Context, c gateway.Client) (int, error) {
	return g.b.store.PendingInThreads(ctx, c.Channel.Platform, c.Channel.ID, gateway.SessionThread(c.Name, ""))
}

// finishGateway completes a gateway batch as soon as it is decided:
// claimed and done, the card updated. Airlock runs nothing of it, so
// nothing is left for it to do; the call goes on without the batch. An
// allowed call is consumed (its run from not_started to running) and its
// outcome reported (Result) on the done batch, which may be never: the
// card then says so. Nothing decided lingers for recovery or the sweep,
// however many approvals a client never consumes; binding finds the live
// calls by their own index (BindableBatch).
func (b *Bot) finishGateway(ctx context.Context, conv confirm.Conversation, batchID string) error {
	batch, err := b.store.Batch(ctx, batchID)
	if err != nil || batch.Status != confirm.BatchDecided {
		return err
	}
	won, err := b.store.ClaimBatch(ctx, batchID, b.cfg.WorkerID)
	if err != nil || !won {
		return err
	}
	body, _ := json.Marshal(map[string]any{"gateway": "done"})
	if _, err := b.store.CompleteBatch(ctx, batchID, confirm.Message{Role: roleGateway, Body: body}); err != nil {
		return err
	}
	b.refreshCard(ctx, conv, batchID)
	return nil
}

// approvalOf is a gateway batch of the session conv as the API shows it.
func approvalOf(conv confirm.Conversation, batch *confirm.Batch) gateway.Approval {
	c := batch.Calls[0]
	_, session, _ := gateway.SessionOf(conv.Thread)
	a := gateway.Approval{ID: batch.ID, Args: c.RunArgs(), DecidedBy: c.DecidedBy, ExpiresAt: batch.ExpiresAt, Session: session, CallID: c.CallID}
	switch {
	case c.Decision == confirm.DecisionPending:
		a.Status = gateway.StatusPending
	case c.Decision.Allowed():
		a.Status = gateway.StatusAllowed
		switch c.Decision {
		case confirm.DecisionAllowedByPolicy:
			a.Reason = "no rule asks"
		case confirm.DecisionAllowedByGrant:
			a.Reason = "a grant covers it (" + c.GrantID + ")"
		default:
			a.Reason = "allowed by " + c.DecidedBy
		}
	case c.Decision == confirm.DecisionExpired:
		a.Status, a.Reason = gateway.StatusExpired, "nobody decided in time"
	default:
		a.Status = gateway.StatusDenied
		a.Reason = card.OneLine(c.DenyMessage)
		if c.DenyReason != "" {
			a.Reason = card.OneLine(c.DenyReason)
		}
	}
	return a
}
