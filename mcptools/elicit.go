package mcptools

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/airlockhq/airlock/confirm"
)

// Questions (MCP elicitation). Airlock declares the form-mode elicitation
// capability to its servers when it has an Asker. A server's question
// during a call goes to the Asker with the call it belongs to:
//   - on protocol 2026-07-28, the question comes back in the call's own
//     result (input required, SEP-2322) and is answered within the call:
//     the call is known for certain;
//   - on older protocols the server sends elicitation/create on its own,
//     which the SDK's client does not tie to a request: it belongs to the
//     one call of that server in flight; with several in flight it cannot
//     be told, and the question is declined, and logged.
//
// While a question waits, the call's timeout is paused: the time a person
// takes is not the server's. URL-mode questions are declined and logged.

// Asker answers a server's question asked during a call Airlock made:
// the bot posts it where the call's conversation is and waits for a
// person. It returns decline or cancel when nobody can answer.
type Asker interface {
	Ask(ctx context.Context, q confirm.Elicitation) confirm.ElicitAnswer
}

// WithAsker declares the elicitation capability (form mode) and hands the
// servers' questions to a.
func WithAsker(a Asker) Option { return func(o *options) { o.asker = a } }

// errCallTimeout is the cause of a call cut at its server's timeout.
var errCallTimeout = errors.New("call timeout")

// inflight is one tools/call of a server's, while it runs.
type inflight struct {
	tool string // Airlock's name
	key  string // the idempotency key
	dl   *deadline
}

type inflightKey struct{}

// withCall marks ctx as the context of call: a question answered within
// the call (multi round-trip) comes with it.
func withCall(ctx context.Context, c *inflight) context.Context {
	return context.WithValue(ctx, inflightKey{}, c)
}

// callOf is the call whose context ctx is; nil for none.
func callOf(ctx context.Context) *inflight {
	c, _ := ctx.Value(inflightKey{}).(*inflight)
	return c
}

// begin records a call in flight; the returned func forgets it.
func (s *server) begin(c *inflight) func() {
	s.inflightMu.Lock()
	if s.inflight == nil {
		s.inflight = map[*inflight]struct{}{}
	}
	s.inflight[c] = struct{}{}
	s.inflightMu.Unlock()
	return func() {
		s.inflightMu.Lock()
		delete(s.inflight, c)
		s.inflightMu.Unlock()
	}
}

// asking is the call a question belongs to: the only one in flight; nil
// and how many are in flight otherwise.
func (s *server) asking() (*inflight, int) {
	s.inflightMu.Lock()
	defer s.inflightMu.Unlock()
	if len(s.inflight) != 1 {
		return nil, len(s.inflight)
	}
	for c := range s.inflight {
		return c, 1
	}
	return nil, 0
}

// elicit is the session's elicitation handler.
func (s *server) elicit(ctx context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
	decline := &mcp.ElicitResult{Action: confirm.ElicitDecline}
	p := req.Params
	if p.Mode == "url" || p.URL != "" {
		s.log.Warn("mcp server asked for a URL elicitation; declined: Airlock has no page to send a person to")
		return decline, nil
	}
	call, n := callOf(ctx), 1
	if call == nil {
		call, n = s.asking()
	}
	if call != nil && call.key == "" {
		s.log.Warn("mcp server asked a question during a preview; declined", "tool", call.tool)
		return decline, nil
	}
	if call == nil {
		s.log.Warn("mcp server asked a question; declined: Airlock cannot tell which call asked", "calls_in_flight", n)
		return decline, nil
	}
	schema, err := json.Marshal(p.RequestedSchema)
	if err != nil {
		s.log.Warn("mcp server's question has a schema Airlock cannot read; declined", "tool", call.tool, "err", err)
		return decline, nil
	}
	call.dl.pause()
	defer call.dl.resume()
	ans := s.m.asker.Ask(ctx, confirm.Elicitation{Server: s.cfg.Name, Tool: call.tool, IdempotencyKey: call.key,
		Message: p.Message, Schema: schema})
	switch ans.Action {
	case confirm.ElicitAccept:
		return &mcp.ElicitResult{Action: ans.Action, Content: ans.Content}, nil
	case confirm.ElicitDecline:
		return decline, nil
	}
	return &mcp.ElicitResult{Action: confirm.ElicitCancel}, nil
}

// deadline is a call's timeout that a question pauses: fire runs once
// the time not paused reaches the timeout.
type deadline struct {
	mu      sync.Mutex
	left    time.Duration
	since   time.Time
	timer   *time.Timer
	paused  int
	stopped bool
	fire    func()
}

func newDeadline(d time.Duration, fire func()) *deadline {
	return &deadline{left: d, since: time.Now(), timer: time.AfterFunc(d, fire), fire: fire}
}

func (dl *deadline) pause() {
	dl.mu.Lock()
	defer dl.mu.Unlock()
	dl.paused++
	if dl.paused == 1 && dl.timer.Stop() {
		dl.left -= time.Since(dl.since)
	}
}

func (dl *deadline) resume() {
	dl.mu.Lock()
	defer dl.mu.Unlock()
	dl.paused--
	if dl.paused == 0 && !dl.stopped {
		dl.since = time.Now()
		dl.timer = time.AfterFunc(max(dl.left, 0), dl.fire)
	}
}

func (dl *deadline) stop() {
	dl.mu.Lock()
	defer dl.mu.Unlock()
	dl.stopped = true
	dl.timer.Stop()
}
