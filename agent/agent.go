// Package agent is our model's turn loop as a source of approval
// requests: it asks the model with the conversation's history (bounded
// and arranged as providers require), hands a reply with tool calls to
// the approval core as a request, and asks the model again once the
// request's results are in (Continue). The core (package bot) decides who
// may ask and who may decide, plans, shows and decides the request, runs
// what was allowed and stores and posts the answers; this package only
// talks to the model.
package agent

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/airlockhq/airlock/confirm"
	"github.com/airlockhq/airlock/model"
)

// Requester is the person a reply's calls are asked for: the author of
// the turn the model answers. Roles are known only while the turn is
// handled (a continuation after a click knows the user only).
type Requester struct {
	User  string
	Roles []string
}

// Core is what the agent needs of the approval core.
type Core interface {
	// Specs are the tools offered to the model in the conversation.
	Specs(conv confirm.Conversation) []model.ToolSpec
	// Say posts the bot's own line in the conversation's thread.
	Say(ctx context.Context, conv confirm.Conversation, text string) error
	// Request asks for approval of the reply's calls, stored with the
	// reply: the batch, and whether a person must decide (its card is
	// then posted, and the results come back through Continue).
	Request(ctx context.Context, conv confirm.Conversation, requester Requester, reply model.Message) (batch *confirm.Batch, paused bool, err error)
	// Finish runs a batch nothing waited on and stores its results;
	// waits: they are not all in yet (a call started a runbook run,
	// whose end continues the model).
	Finish(ctx context.Context, conv confirm.Conversation, batch *confirm.Batch) (waits bool, err error)
	// Answer stores the messages that end the turn and posts the last
	// one's text in the thread.
	Answer(ctx context.Context, conv confirm.Conversation, msgs ...model.Message) error
}

// Messages is the store role the agent reads the history with.
type Messages interface {
	Messages(ctx context.Context, conversationID int64) ([]confirm.Message, error)
}

// Config wires an Agent. Every field is required (the bot fills in the
// defaults of its own config).
type Config struct {
	Core               Core
	Messages           Messages
	Model              model.Provider
	SystemPrompt       string
	MaxToolRounds      int // tool rounds a turn may take
	MaxCallsPerReply   int // calls one reply may hold
	MaxHistoryMessages int // messages sent to the model
	MaxMessageChars    int // longer texts are cut for the model
	Logger             *slog.Logger
}

// Agent is our model's turn loop.
type Agent struct {
	cfg Config
	log *slog.Logger
}

// New returns the agent; a missing part is an error.
func New(cfg Config) (*Agent, error) {
	if cfg.Core == nil || cfg.Messages == nil || cfg.Model == nil || cfg.Logger == nil {
		return nil, fmt.Errorf("agent: core, messages, model and logger are required")
	}
	if cfg.MaxToolRounds <= 0 || cfg.MaxCallsPerReply <= 0 || cfg.MaxHistoryMessages <= 0 || cfg.MaxMessageChars <= 0 {
		return nil, fmt.Errorf("agent: the bounds must be positive")
	}
	return &Agent{cfg: cfg, log: cfg.Logger}, nil
}

// Converse asks the model and acts on its reply until the model answers in
// text, pauses on a gated call, or the turn runs out of tool rounds. hist,
// when not nil, is the conversation's history as the caller just loaded
// it, used for the first request.
func (a *Agent) Converse(ctx context.Context, conv confirm.Conversation, requester Requester, hist []model.Message) error {
	for first := true; ; first = false {
		if !first || hist == nil {
			var err error
			if hist, err = a.History(ctx, conv.ID); err != nil {
				return err
			}
		}
		gctx := model.WithWaitNotice(ctx, func(wait time.Duration, err error) {
			what := "the model's rate limit"
			if !model.RateLimited(err) {
				what = "the model to recover"
			}
			if perr := a.cfg.Core.Say(ctx, conv, fmt.Sprintf("Waiting %s for %s…", wait.Round(time.Second), what)); perr != nil {
				a.log.Error("post in thread", "err", perr)
			}
		})
		reply, err := a.cfg.Model.Generate(gctx, model.Request{System: a.cfg.SystemPrompt, Messages: hist, Tools: a.cfg.Core.Specs(conv)})
		if err != nil {
			a.log.Error("model request failed", "conversation", conv.ID, "err", err)
			msg := "I could not reach the model, so I stopped here. Nothing was lost: write again to retry."
			if perr := a.cfg.Core.Say(ctx, conv, msg); perr != nil {
				a.log.Error("post in thread", "err", perr)
			}
			return nil // told in the thread and logged; the history is intact for a retry
		}
		reply.Role = model.RoleAssistant
		if len(reply.ToolCalls) == 0 {
			return a.cfg.Core.Answer(ctx, conv, reply)
		}
		if len(reply.ToolCalls) > a.cfg.MaxCallsPerReply {
			return a.stopForCalls(ctx, conv, reply)
		}
		if err := confirm.CheckRounds(roundsThisTurn(hist), a.cfg.MaxToolRounds); err != nil {
			return a.stopForRounds(ctx, conv, reply)
		}
		batch, paused, err := a.cfg.Core.Request(ctx, conv, requester, reply)
		if err != nil {
			return err
		}
		if paused {
			return nil // its card asks a person; the model goes on with the results (Continue)
		}
		// Nothing waited on a person: the batch runs now.
		waits, err := a.cfg.Core.Finish(ctx, conv, batch)
		if err != nil {
			return err
		}
		if waits {
			return nil // it waits on a runbook run; the model goes on when the run has ended
		}
	}
}

// stopForRounds answers every call of a reply past the round limit without
// running it, so the history stays whole, and says so in the thread.
func (a *Agent) stopForRounds(ctx context.Context, conv confirm.Conversation, reply model.Message) error {
	return a.stopUnrun(ctx, conv, reply,
		fmt.Sprintf("Not executed: this turn reached its limit of %d tool rounds.", a.cfg.MaxToolRounds),
		fmt.Sprintf("I stopped: this turn reached its limit of %d tool rounds (model.max_tool_rounds). Nothing more was run.", a.cfg.MaxToolRounds))
}

// stopForCalls answers a reply with more calls than model.max_calls_per_reply
// whole as invalid: no call runs, no card asks anyone, every call gets the
// same error result, and the thread is told in one line.
func (a *Agent) stopForCalls(ctx context.Context, conv confirm.Conversation, reply model.Message) error {
	why := fmt.Sprintf("too many calls in one reply: %d, at most %d", len(reply.ToolCalls), a.cfg.MaxCallsPerReply)
	a.log.Warn("reply refused: "+why, "conversation", conv.ID)
	return a.stopUnrun(ctx, conv, reply, "Not executed: "+why+".",
		"I stopped: the model asked for "+why+" (model.max_calls_per_reply). Nothing was run.")
}

// stopUnrun answers every call of a reply with result without running it,
// so the history stays whole, ends the turn with notice and posts it (as
// an answer).
func (a *Agent) stopUnrun(ctx context.Context, conv confirm.Conversation, reply model.Message, result, notice string) error {
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
	return a.cfg.Core.Answer(ctx, conv, reply, results, model.Message{Role: model.RoleAssistant, Text: notice})
}

// Continue asks the model to answer the results of batch, unless a newer
// turn moved the conversation on.
func (a *Agent) Continue(ctx context.Context, conv confirm.Conversation, batch *confirm.Batch) error {
	// Continue only when this batch's results end the conversation: a newer
	// turn may already have moved it on.
	hist, err := a.History(ctx, conv.ID)
	if err != nil {
		return err
	}
	if !EndsWithResults(hist) {
		return nil
	}
	return a.Converse(ctx, conv, Requester{User: batch.RequestedBy}, hist)
}
