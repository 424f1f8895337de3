package mcptools

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/airlockhq/airlock/confirm"
	"github.com/airlockhq/airlock/tools"
)

// asker answers every question with its answer after wait, and keeps
// what it was asked.
type asker struct {
	mu     sync.Mutex
	asked  []confirm.Elicitation
	answer confirm.ElicitAnswer
	wait   time.Duration
	gate   chan struct{} // when set, each question waits for a value
}

func (a *asker) Ask(ctx context.Context, q confirm.Elicitation) confirm.ElicitAnswer {
	a.mu.Lock()
	a.asked = append(a.asked, q)
	a.mu.Unlock()
	if a.gate != nil {
		<-a.gate
	}
	time.Sleep(a.wait)
	return a.answer
}

func (a *asker) questions() []confirm.Elicitation {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]confirm.Elicitation(nil), a.asked...)
}

func startAsking(t *testing.T, cfg Config, a Asker) (*tools.Set, *Manager) {
	t.Helper()
	set := &tools.Set{}
	m := startWith(context.Background(), []Config{cfg}, set, nil, memDial(newTestServer(&recorder{}, nil)), options{asker: a})
	t.Cleanup(func() { m.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := m.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	return set, m
}

// A server's question during a call reaches the Asker with the call's
// tool and idempotency key, the message and the schema; the answer goes
// back to the server. The person's time does not count against the
// server's timeout.
func TestQuestionGoesToTheAskerWithItsCall(t *testing.T) {
	cfg := memConfig("mem")
	cfg.Timeout = 300 * time.Millisecond
	a := &asker{answer: confirm.ElicitAnswer{Action: confirm.ElicitAccept, Content: map[string]any{"env": "staging"}}, wait: 600 * time.Millisecond}
	set, _ := startAsking(t, cfg, a)
	out, err := mustTool(t, set, "mem__ask").Run(context.Background(), json.RawMessage(`{}`), "batch1/call_1")
	if err != nil || out != "accept staging" {
		t.Fatalf("Run = %q, %v; want the answer, the wait not counted as the call's time", out, err)
	}
	qs := a.questions()
	if len(qs) != 1 || qs[0].Server != "mem" || qs[0].Tool != "mem__ask" || qs[0].IdempotencyKey != "batch1/call_1" ||
		qs[0].Message != "Which environment?" || !strings.Contains(string(qs[0].Schema), `"enum":["prod","staging"]`) {
		t.Fatalf("asked %+v", qs)
	}
}

// Without an Asker no capability is declared: the server's question fails
// and nothing is asked.
func TestNoAskerNoQuestions(t *testing.T) {
	set := &tools.Set{}
	startManager(t, []Config{memConfig("mem")}, set, nil, memDial(newTestServer(&recorder{}, nil)))
	if _, err := mustTool(t, set, "mem__ask").Run(context.Background(), json.RawMessage(`{}`), "b/k"); err == nil {
		t.Fatal("a question without an Asker succeeded")
	}
}

// A server configured with elicitation: false is asked nothing: its
// question fails, and the Asker is never reached.
func TestElicitationOff(t *testing.T) {
	cfg := memConfig("mem")
	off := false
	cfg.Elicitation = &off
	a := &asker{answer: confirm.ElicitAnswer{Action: confirm.ElicitAccept, Content: map[string]any{"env": "prod"}}}
	set, _ := startAsking(t, cfg, a)
	if out, err := mustTool(t, set, "mem__ask").Run(context.Background(), json.RawMessage(`{}`), "b/k"); err == nil || len(a.questions()) != 0 {
		t.Fatalf("Run = %q, %v, asked %d; want an error, nobody asked", out, err, len(a.questions()))
	}
}

// A URL-mode question is declined without asking anyone.
func TestURLQuestionDeclined(t *testing.T) {
	a := &asker{answer: confirm.ElicitAnswer{Action: confirm.ElicitAccept}}
	set, _ := startAsking(t, memConfig("mem"), a)
	out, err := mustTool(t, set, "mem__ask").Run(context.Background(), json.RawMessage(`{"url":true}`), "b/k")
	if err != nil || out != "decline" || len(a.questions()) != 0 {
		t.Fatalf("Run = %q, %v, asked %d; want declined unasked", out, err, len(a.questions()))
	}
}

// A question answered within its call (multi round-trip) is tied to its
// own call, even with another call of the server in flight.
func TestQuestionTiedToItsOwnCall(t *testing.T) {
	a := &asker{answer: confirm.ElicitAnswer{Action: confirm.ElicitAccept, Content: map[string]any{"env": "prod"}}}
	set, m := startAsking(t, memConfig("mem"), a)
	other := m.servers[0].begin(&inflight{tool: "mem__get_item", key: "b2/call_1"})
	defer other()
	out, err := mustTool(t, set, "mem__ask").Run(context.Background(), json.RawMessage(`{}`), "b1/call_1")
	if qs := a.questions(); err != nil || out != "accept prod" || len(qs) != 1 || qs[0].IdempotencyKey != "b1/call_1" {
		t.Fatalf("Run = %q, %v, asked %+v", out, err, qs)
	}
}

// A question a server sends on its own (older protocols) belongs to the
// one call of that server in flight; with two in flight, or during a
// preview, it cannot be tied to a call: declined, never sent to the
// wrong conversation.
func TestQuestionOutsideACall(t *testing.T) {
	a := &asker{answer: confirm.ElicitAnswer{Action: confirm.ElicitAccept, Content: map[string]any{"env": "prod"}}}
	_, m := startAsking(t, memConfig("mem"), a)
	srv := m.servers[0]
	req := &mcp.ElicitRequest{Params: &mcp.ElicitParams{Message: "Which environment?", RequestedSchema: map[string]any{"type": "object"}}}
	ask := func() string {
		res, err := srv.elicit(context.Background(), req)
		if err != nil {
			t.Fatal(err)
		}
		return res.Action
	}
	if got := ask(); got != "decline" || len(a.questions()) != 0 {
		t.Fatalf("no call in flight: %s, asked %d", got, len(a.questions()))
	}
	one := srv.begin(&inflight{tool: "mem__ask", key: "b1/call_1", dl: newDeadline(time.Minute, func() {})})
	if got := ask(); got != "accept" || len(a.questions()) != 1 || a.questions()[0].IdempotencyKey != "b1/call_1" {
		t.Fatalf("one call in flight: %s, asked %+v", got, a.questions())
	}
	two := srv.begin(&inflight{tool: "mem__get_item", key: "b2/call_1"})
	if got := ask(); got != "decline" || len(a.questions()) != 1 {
		t.Fatalf("two calls in flight: %s, asked %d", got, len(a.questions()))
	}
	one()
	two()
	preview := srv.begin(&inflight{tool: "mem__ask"})
	defer preview()
	if got := ask(); got != "decline" || len(a.questions()) != 1 {
		t.Fatalf("a preview in flight: %s, asked %d", got, len(a.questions()))
	}
}

// A paused deadline fires only once the time not paused reaches it.
func TestDeadlinePause(t *testing.T) {
	fired := make(chan time.Time, 2)
	start := time.Now()
	dl := newDeadline(100*time.Millisecond, func() { fired <- time.Now() })
	defer dl.stop()
	time.Sleep(50 * time.Millisecond)
	dl.pause()
	time.Sleep(200 * time.Millisecond)
	select {
	case <-fired:
		t.Fatal("fired while paused")
	default:
	}
	dl.resume()
	at := <-fired
	if at.Sub(start) < 250*time.Millisecond {
		t.Fatalf("fired after %s; want the pause added", at.Sub(start))
	}
}
