// Package bot owns the approval core. It takes requests for approval of
// calls from any source (request.go): it plans them (the policy, rules,
// grants, quorum), stores each as a batch, posts its card where the
// channel's routing says and keeps every card message in step with
// storage (card sync), decides clicks once in SQL, runs what was allowed
// in the model's order and gives the results back to the request's
// Source. It also takes chat turns (who may talk to it, the limits, a
// waiting card abandoned, runbook commands), decides who may decide,
// makes and honours grants, orchestrates runbook runs (one source),
// works the inbox, stores and posts answers, and owns the background
// jobs that expire, escalate and recover paused calls. Our model's turn
// loop is another source, package agent, which it builds and reaches
// through agent.Agent (and which reaches it through agent.Core).
package bot

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/airlockhq/airlock/agent"
	"github.com/airlockhq/airlock/card"
	"github.com/airlockhq/airlock/confirm"
	"github.com/airlockhq/airlock/gateway"
	"github.com/airlockhq/airlock/model"
	"github.com/airlockhq/airlock/runbook"
	"github.com/airlockhq/airlock/tools"
)

// Thread names where a conversation happens.
type Thread struct {
	Platform string
	Channel  string
	Thread   string
}

// Platform is what the bot needs from a chat platform.
type Platform interface {
	// PostCard posts an approval card in the thread and returns the
	// platform's reference to it, for updates.
	PostCard(ctx context.Context, th Thread, c card.Card) (ref string, err error)
	// UpdateCard replaces a posted card.
	UpdateCard(ctx context.Context, th Thread, ref string, c card.Card) error
	// Post posts text in the thread.
	Post(ctx context.Context, th Thread, text string) error
}

// CardFinder is implemented by platforms that can find a card, or a DM
// copy of it, that Airlock posted for a batch but never recorded (the
// process killed between the post and the write): its reference (as
// PostCard returns it), for recovery to adopt instead of posting it
// again. It looks among the messages posted since `since` in th: a
// thread's replies, or with th.Thread "" a channel's or a DM's top-level
// messages. Only a message posted by Airlock's own bot user that carries
// a button of the batch is one: buttons only Airlock's app can post, and
// never text someone (or a model, through the bot) wrote. An error
// wrapping ErrCannotLook says the place cannot be read at all.
type CardFinder interface {
	FindCard(ctx context.Context, th Thread, batchID string, since time.Time) (ref string, found bool, err error)
}

// ErrCannotLook is a platform's answer that Airlock may not read a
// place's messages (a scope or permission it lacks): recovery then posts
// the card rather than wait for a look that cannot succeed. Other errors
// of a look (a rate limit, a 5xx) leave the card to the next recovery
// pass. Platforms wrap it; classify with errors.Is.
var ErrCannotLook = errors.New("not allowed to read the messages there")

// GrantNoticer is implemented by platforms that post a grant's notice with
// a Revoke button. Others get the notice as text.
type GrantNoticer interface {
	PostGrantNotice(ctx context.Context, th Thread, n card.GrantNotice) (ref string, err error)
	UpdateGrantNotice(ctx context.Context, th Thread, ref string, n card.GrantNotice) error
}

// Metrics is everything the bot records (*metrics.Metrics has it): one
// interface, so a recorder lacking a figure is a compile error, never a
// figure silently not kept.
type Metrics interface {
	// Decision records a decision on a call that needed a person
	// (allowed, denied, expired, abandoned) and its wait since the pause.
	Decision(outcome string, wait time.Duration)
	// ToolRun records a run's outcome (succeeded, failed, unknown) and duration.
	ToolRun(tool, status string, d time.Duration)
	CallMetrics
	CardSyncMetrics
	RunbookMetrics
}

// CallMetrics records per-tool decision figures: a person's decision with
// its surface and wait, and an expiry.
type CallMetrics interface {
	CallDecided(tool, outcome, surface string, wait time.Duration)
	CallExpired(tool string)
}

// noMetrics records nothing (Config.Metrics nil).
type noMetrics struct{}

var _ Metrics = noMetrics{}

func (noMetrics) Decision(string, time.Duration)                    {}
func (noMetrics) ToolRun(string, string, time.Duration)             {}
func (noMetrics) CallDecided(string, string, string, time.Duration) {}
func (noMetrics) CallExpired(string)                                {}
func (noMetrics) CardsBehind(int)                                   {}
func (noMetrics) CardSynced(time.Duration)                          {}
func (noMetrics) PlatformRateLimited(string, string)                {}
func (noMetrics) RunbookRun(string, string)                         {}
func (noMetrics) RunbookStep(string, string, time.Duration)         {}

// Tools is what the bot needs from the tool set.
type Tools interface {
	Get(name string) (tools.Tool, bool)
	Specs() []model.ToolSpec
}

// Store is every storage role the bot uses: confirm.Store's and the
// runbook runs' (confirm.RunbookStore). One interface, so a store that
// keeps no runbook runs is a compile error, never runbooks silently off.
type Store interface {
	confirm.Store
	confirm.RunbookStore
}

// DefaultMaxCallsPerReply is the default bound on the tool calls of one
// model reply (model.max_calls_per_reply).
const DefaultMaxCallsPerReply = 32

// Config wires a Bot.
type Config struct {
	Store         Store
	Model         model.Provider
	Tools         Tools
	Policy        confirm.Policy
	Channels      *Channels // served channels, requesters, approvers, tools
	SystemPrompt  string
	MaxToolRounds int           // default 8
	Timeout       time.Duration // how long a pause waits; default 30m
	// MaxCallsPerReply bounds the tool calls of one model reply; a reply
	// with more is answered whole as invalid. Default
	// DefaultMaxCallsPerReply.
	MaxCallsPerReply int
	// DefaultApprovals is how many distinct people must allow a gated call
	// when neither its tool nor a rule says; default 1.
	DefaultApprovals int
	// SelfApproval lets requesters allow their own calls.
	SelfApproval bool
	// StepUp is what each risk tier's allows need (confirmation.step_up);
	// ConsoleURL is the web console's base URL (web.base_url), for the
	// link a refused chat Allow is sent.
	StepUp     confirm.StepUp
	ConsoleURL string
	// ModelOff: no model is configured (Model answers model.OffReply).
	// Free text is then answered with that line and changes nothing: it
	// abandons no waiting card.
	ModelOff bool
	// GrantFor is how long an "Allow for" grant lasts; 0: grants are off.
	GrantFor     time.Duration
	RemindBefore time.Duration // remind approvers this long before expiry; 0: never
	// RunningCardDelay is how long a decided batch runs before its card
	// shows the decision and "running"; a faster run updates the card once,
	// with its outcome. Default DefaultRunningCardDelay.
	RunningCardDelay time.Duration
	// Escalation steps, in order of After: at each step's time a waiting
	// card's place gets a message mentioning the step's people, and the
	// step's approvers may decide the card from then on.
	Escalation []EscalationStep
	Now        func() time.Time
	Logger     *slog.Logger
	WorkerID   string // names this process in claims
	// Redact scrubs secrets from text before it is stored, audited, shown
	// or sent to the model (tool results and errors, model answers); nil
	// leaves text as it is.
	Redact func(string) string
	// TurnsPerMinute limits each user's turns; 0: no limit.
	TurnsPerMinute int
	// PendingPerChannel limits the waiting cards of a channel; 0: no limit.
	PendingPerChannel int
	// MaxHistoryMessages bounds the messages sent to the model; default 100.
	MaxHistoryMessages int
	// MaxMessageChars cuts longer messages sent to the model; default 8000.
	MaxMessageChars int
	// SingleProcess says no other process shares the database (SQLite):
	// conversations are then locked in memory only, without a lease row
	// written and deleted around every turn and decision.
	SingleProcess bool
	// Metrics records decisions and runs; nil records nothing.
	Metrics Metrics
	// Trace, when set, is called at named points of the confirmation path
	// ("decided", "ran"); crash tests use it to stop the process there.
	Trace func(point string)
	// Tracer records OpenTelemetry spans: airlock.turn, airlock.resume,
	// airlock.approval_wait and airlock.tool_run (see tracing.go). Spans
	// carry ids, names and outcomes, never arguments, results or text.
	// nil records nothing.
	Tracer trace.Tracer
	// RunbookEval resolves runbook steps' expressions; nil: the compiled
	// definitions' CEL (see runbook.go).
	RunbookEval runbook.Evaluator
	// Runbooks are the compiled runbooks (channels[].runbooks narrows
	// which are offered where).
	Runbooks []*runbook.Runbook
	// Gateway lists the agents outside Airlock that may ask for approval
	// (gateway.go).
	Gateway gateway.Config
	// StepSecret is the value of a secret reference a runbook step's
	// arguments keep as text (config.Config.StepSecret): put in, in
	// memory only, right before the step's tool (or its preview) runs;
	// nil knows none, and a step holding one does not run.
	StepSecret func(ref string) (string, bool)
}

// EscalationStep is one `confirmation.escalation` step.
type EscalationStep struct {
	After     time.Duration     // since the pause
	Mention   confirm.Approvers // mentioned where the card is
	Approvers confirm.Approvers // may decide the card once the step fired
}

// Defaults of the history bounds.
const (
	DefaultMaxHistoryMessages = 100
	DefaultMaxMessageChars    = 8000
)

// Bot runs conversations.
type Bot struct {
	cfg         Config
	store       Store
	now         func() time.Time
	log         *slog.Logger
	mu          sync.Mutex
	platforms   map[string]Platform
	turns       keyedMutex
	stopping    bool                     // Shutdown began; guarded by mu
	work        sync.WaitGroup           // turns, clicks and sweeps in progress
	sweeping    sync.Mutex               // the sweep and escalate jobs take turns, as in Sweep
	tracing     bool                     // cfg.Tracer records (not a no-op)
	links       linkCache                // permalinks of threads and cards
	convs       convCache                // conversations by id (their rows never change)
	posted      postedCache              // each batch's card messages, as this process posted them
	stepDecided cache[string, time.Time] // when a finished step's call was decided, by batch (run messages)
	cs          *cardSync                // the card-sync job's wake-up and the platforms' rate limits
	hs          *homes                   // the home views opened
	rb          *runbook.Engine          // runbook runs (runbook.go)
	agent       *agent.Agent             // our model's turn loop, one source of requests
	inboxOnce   sync.Once
	inboxID     string   // this process's holder name in the inbox (inboxWorker)
	running     sync.Map // idempotency key -> confirm.Call, while its tool runs here (question.go)
}

// New checks the config and returns a Bot. Register platforms before use.
func New(cfg Config) (*Bot, error) {
	if cfg.Store == nil || cfg.Model == nil || cfg.Tools == nil {
		return nil, errors.New("bot: store, model and tools are required")
	}
	if cfg.Policy == nil {
		cfg.Policy = confirm.FromToolFlag()
	}
	if cfg.Channels == nil {
		cfg.Channels = NewChannels(nil)
	}
	if cfg.DefaultApprovals <= 0 {
		cfg.DefaultApprovals = 1
	}
	if cfg.MaxToolRounds <= 0 {
		cfg.MaxToolRounds = confirm.DefaultMaxToolRounds
	}
	if cfg.MaxCallsPerReply <= 0 {
		cfg.MaxCallsPerReply = DefaultMaxCallsPerReply
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 30 * time.Minute
	}
	if cfg.RunningCardDelay <= 0 {
		cfg.RunningCardDelay = DefaultRunningCardDelay
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Metrics == nil {
		cfg.Metrics = noMetrics{}
	}
	if cfg.Tracer == nil {
		cfg.Tracer = noop.NewTracerProvider().Tracer("")
	}
	if cfg.Redact == nil {
		cfg.Redact = func(s string) string { return s }
	}
	if cfg.MaxHistoryMessages <= 0 {
		cfg.MaxHistoryMessages = DefaultMaxHistoryMessages
	}
	if cfg.MaxMessageChars <= 0 {
		cfg.MaxMessageChars = DefaultMaxMessageChars
	}
	if cfg.WorkerID == "" {
		cfg.WorkerID = "airlock"
	}
	_, off := cfg.Tracer.(noop.Tracer)
	b := &Bot{cfg: cfg, store: cfg.Store, now: cfg.Now, log: cfg.Logger, platforms: map[string]Platform{}, tracing: !off, cs: newCardSync(),
		hs: &homes{at: map[string]time.Time{}, users: map[string][]string{}}}
	b.rb = newRunbookEngine(b)
	a, err := agent.New(agent.Config{Core: agentCore{b}, Messages: cfg.Store, Model: cfg.Model, SystemPrompt: cfg.SystemPrompt,
		MaxToolRounds: cfg.MaxToolRounds, MaxCallsPerReply: cfg.MaxCallsPerReply,
		MaxHistoryMessages: cfg.MaxHistoryMessages, MaxMessageChars: cfg.MaxMessageChars, Logger: cfg.Logger})
	if err != nil {
		return nil, fmt.Errorf("bot: %w", err)
	}
	b.agent = a
	return b, nil
}

// Channels returns the channel lookup, for platforms to install their
// group resolvers.
func (b *Bot) Channels() *Channels { return b.cfg.Channels }

// Register makes a platform known under its name ("shell", "slack", ...).
func (b *Bot) Register(name string, p Platform) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.platforms[name] = p
}

func (b *Bot) platform(name string) (Platform, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	p, ok := b.platforms[name]
	if !ok {
		return nil, fmt.Errorf("bot: no platform %q registered", name)
	}
	return p, nil
}

// conversation loads a conversation by id; rows never change, so they are
// cached.
func (b *Bot) conversation(ctx context.Context, id int64) (confirm.Conversation, error) {
	if c, ok := b.convs.get(id); ok {
		return c, nil
	}
	c, err := b.store.ConversationByID(ctx, id)
	if err != nil {
		return c, err
	}
	b.convs.put(id, c)
	return c, nil
}

// approversOf is who may approve in the conversation's channel.
func (b *Bot) approversOf(conv confirm.Conversation) confirm.Approvers {
	return b.cfg.Channels.For(conv.Platform, conv.Channel, conv.DM)
}

// cardOf builds the card of a batch of the conversation.
// Every adapter renders it, so nothing on it carries a secret (scrubCard).
func (b *Bot) cardOf(conv confirm.Conversation, batch *confirm.Batch, intro string) card.Card {
	c := scrubCard(cardWith(batch, intro, b.approversOf(conv), b.cfg.GrantFor, cardExtras{
		extendBy:   b.cfg.Timeout,
		editable:   func(tool string) bool { _, ok := b.offered(conv, tool); return ok },
		escalation: b.cfg.Escalation,
		now:        b.now(), selfApproval: b.cfg.SelfApproval,
		stepUp: b.cfg.StepUp,
	}), b.cfg.Redact)
	c.PageURL = b.consoleURL(batch.ID)
	if name, session, ok := gateway.SessionOf(conv.Thread); ok {
		c.Client = &card.Client{Name: name, Session: b.cfg.Redact(session), LeftAt: batch.ClientLeftAt}
		for i := range c.Calls {
			if isGateway(conv) { // the client carries it out; over MCP, Airlock does
				c.Calls[i].CarriedBy = name
			}
		}
	}
	return b.withStep(c, batch)
}

func threadOf(c confirm.Conversation) Thread {
	if isClientSession(c) {
		return Thread{Platform: c.Platform, Channel: c.Channel} // a gateway session's cards are the channel's
	}
	return Thread{Platform: c.Platform, Channel: c.Channel, Thread: c.Thread}
}

func storedMessage(m model.Message) (confirm.Message, error) {
	body, err := json.Marshal(m)
	if err != nil {
		return confirm.Message{}, fmt.Errorf("encode message: %w", err)
	}
	return confirm.Message{Role: string(m.Role), Body: body}, nil
}

// storedMessages are msgs as the store keeps them.
func storedMessages(msgs []model.Message) ([]confirm.Message, error) {
	stored := make([]confirm.Message, 0, len(msgs))
	for _, m := range msgs {
		sm, err := storedMessage(m)
		if err != nil {
			return nil, err
		}
		stored = append(stored, sm)
	}
	return stored, nil
}

func (b *Bot) append(ctx context.Context, convID int64, msgs ...model.Message) error {
	stored, err := storedMessages(msgs)
	if err != nil {
		return err
	}
	if err := b.store.AppendMessages(ctx, convID, stored...); err != nil {
		return fmt.Errorf("append messages: %w", err)
	}
	return nil
}
