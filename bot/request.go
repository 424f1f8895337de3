package bot

import (
	"context"
	"errors"
	"fmt"

	"github.com/airlockhq/airlock/agent"
	"github.com/airlockhq/airlock/confirm"
	"github.com/airlockhq/airlock/model"
)

// The approval core takes requests for approval of calls from any source
// and gives each request's results back to the source it came from. Our
// model's turn loop is one source (turn.go: a reply whose calls need a
// person), runbooks another (runbook.go: a step's one call); agents
// outside Airlock will be the next. Whatever the source, a request is
// planned by the same policy, rules, grants and quorum (planBatch),
// stored as one batch, shown on the same card, decided by the same
// clicks and run in the model's order (run.go); only where its results
// go differs (Source).

// approvalRequest is one request for approval of calls.
type approvalRequest struct {
	conv      confirm.Conversation
	requester asker
	// reply holds the calls as they will run (a step's secrets put in,
	// in memory): the policy, the rules and the tools' schemas judge
	// them.
	reply model.Message
	// stored is the message the batch is stored with: the reply itself
	// for the model, the step's call with its secrets still references
	// (and the role the model never sees) for a runbook.
	stored confirm.Message
	// shape, when set, is the source's own part of the plan, applied to
	// each planned batch before it is stored: it may only add to what the
	// core asks (a runbook step's confirm and approvals; a gateway
	// client's deny list), or store a batch decided as it is made as done
	// (the gateway: nothing of it runs in Airlock), and an error refuses
	// the request with nothing stored.
	shape func(ctx context.Context, batch *confirm.Batch) error
}

// request plans r, stores its batch and records the grants it used. A
// grant revoked or expired after it was looked up is caught by the
// transaction storing the batch: the request is planned again (up to
// maxPlanAttempts). The batch is pending when a person must decide; the
// caller posts its card (postCard) or, when nothing waits, runs it.
func (b *Bot) request(ctx context.Context, r approvalRequest) (*confirm.Batch, error) {
	for attempt := 1; ; attempt++ {
		batch, used, err := b.planBatch(ctx, r.conv, r.requester, r.reply)
		if err != nil {
			return nil, err
		}
		if r.shape != nil {
			if err := r.shape(ctx, batch); err != nil {
				return nil, err
			}
		}
		err = b.store.CreateBatch(ctx, batch, r.stored)
		if errors.Is(err, confirm.ErrGrantInactive) && attempt < maxPlanAttempts {
			b.log.Info("a grant ended while its batch was planned; planning again", "conversation", r.conv.ID, "err", err)
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("store batch: %w", err)
		}
		b.notePauseDecisions(ctx, r.conv, batch, used)
		return batch, nil
	}
}

// maxPlanAttempts bounds how often a request is planned again because a
// grant ended meanwhile (each attempt sees the grants ended before it).
const maxPlanAttempts = 4

// A Source is where a request came from, and where its results go once
// its calls are decided and run.
type Source interface {
	// Continue takes a request's batch, completed: every call decided,
	// the allowed ones run, one result per call stored.
	Continue(ctx context.Context, conv confirm.Conversation, batch *confirm.Batch) error
}

// The sources of this bot's requests: our model's turn loop (package
// agent) and runbooks.
var (
	_ Source = (*agent.Agent)(nil)
	_ Source = runbookSource{}
)

// runbookSource is the runbook engine: a completed step's batch goes to
// the engine, which records the step and advances the run.
type runbookSource struct{ b *Bot }

// Continue hands the step's batch to the engine.
func (s runbookSource) Continue(ctx context.Context, _ confirm.Conversation, batch *confirm.Batch) error {
	s.b.runbookEngine().KickStep(ctx, batch.ID)
	return nil
}

// sourceOf is the source of a stored batch: a runbook step's (its call
// carries the step's idempotency key), else the model's.
func (b *Bot) sourceOf(conv confirm.Conversation, batch *confirm.Batch) Source {
	if isGateway(conv) {
		return gatewayApprovals{b}
	}
	if isMCP(conv) {
		return mcpSource{}
	}
	if stepBatch(batch) {
		return runbookSource{b}
	}
	return b.agent
}

// agentCore is the approval core as our model's turn loop sees it.
type agentCore struct{ b *Bot }

var _ agent.Core = agentCore{}

func (c agentCore) Specs(conv confirm.Conversation) []model.ToolSpec { return c.b.specsFor(conv) }

func (c agentCore) Say(ctx context.Context, conv confirm.Conversation, text string) error {
	p, err := c.b.platform(conv.Platform)
	if err != nil {
		return err
	}
	return p.Post(ctx, threadOf(conv), text)
}

// Request plans and stores the reply's calls (pause); when a person must
// decide, it posts the card and starts the previews.
func (c agentCore) Request(ctx context.Context, conv confirm.Conversation, requester agent.Requester, reply model.Message) (*confirm.Batch, bool, error) {
	b := c.b
	p, err := b.platform(conv.Platform)
	if err != nil {
		return nil, false, err
	}
	batch, paused, err := b.pause(ctx, conv, asker{User: requester.User, Roles: requester.Roles}, reply)
	if err != nil || !paused {
		return batch, paused, err
	}
	err = b.postCard(ctx, conv, p, batch, reply.Text)
	b.startPreviews(ctx, conv, batch)
	return batch, true, err
}

// Finish runs a batch as pause stored it (nothing waited on a person).
func (c agentCore) Finish(ctx context.Context, conv confirm.Conversation, batch *confirm.Batch) (bool, error) {
	done, err := c.b.finishBatch(ctx, conv, batch.ID, batch)
	if err != nil {
		return false, err
	}
	return done == nil && awaitsRunbook(batch), nil
}

func (c agentCore) Answer(ctx context.Context, conv confirm.Conversation, msgs ...model.Message) error {
	p, err := c.b.platform(conv.Platform)
	if err != nil {
		return err
	}
	return c.b.answer(ctx, conv, p, msgs...)
}
