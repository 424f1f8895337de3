package mcpserver

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/airlockhq/airlock/gateway"
)

const (
	aliceToken = "alice-token-0123456789abcdefghijklmnop"
	bobToken   = "bob-token-0123456789abcdefghijklmnopqr"
)

// waitingTools is a core whose calls wait until decided.
type waitingTools struct {
	decided atomic.Bool
	mu      sync.Mutex
	calls   []string // client/session/tool
	left    []string // client/id told Left
}

func (w *waitingTools) Left(_ context.Context, c gateway.Client, id string) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.left = append(w.left, c.Name+"/"+id)
	return nil
}

func (w *waitingTools) lefts() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.left...)
}

func (w *waitingTools) Offered(c gateway.Client) []gateway.Tool {
	return []gateway.Tool{{Name: "deploy", Description: "Deploy", InputSchema: json.RawMessage(`{"type":"object"}`)}}
}

func (w *waitingTools) Call(_ context.Context, c gateway.Client, session, tool string, _ json.RawMessage) (gateway.Outcome, error) {
	w.mu.Lock()
	w.calls = append(w.calls, c.Name+"/"+session+"/"+tool)
	w.mu.Unlock()
	return w.Outcome(context.Background(), c, "b1")
}

func (w *waitingTools) Outcome(context.Context, gateway.Client, string) (gateway.Outcome, error) {
	if w.decided.Load() {
		return gateway.Outcome{ID: "b1", State: gateway.CallDone, Result: "deployed"}, nil
	}
	return gateway.Outcome{ID: "b1", State: gateway.CallWaiting, CardURL: "https://slack.example/archives/C0OPS/p1"}, nil
}

func newServer(t *testing.T, tools gateway.Tools, hold time.Duration, rpm int) string {
	t.Helper()
	cfg := gateway.Config{MCP: gateway.MCP{Path: "/mcp", Hold: hold}, Clients: []gateway.Client{
		{Name: "alice", Token: aliceToken, ActsFor: "U1", Channel: gateway.ChannelRef{Platform: "slack", ID: "C1"}},
		{Name: "bob", Token: bobToken, ActsFor: "U2", Channel: gateway.ChannelRef{Platform: "slack", ID: "C1"}},
	}}
	cfg.SetDefaults()
	if rpm > 0 {
		cfg.Clients[0].RequestsPerMinute = rpm
	}
	s := &Server{Config: cfg, Tools: tools, ProgressEvery: 100 * time.Millisecond}
	srv := httptest.NewServer(s.Handler())
	t.Cleanup(srv.Close)
	return srv.URL
}

type bearer struct {
	token string
	next  http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.next.RoundTrip(r)
}

func connect(t *testing.T, url, token string, opts *mcp.ClientOptions) *mcp.ClientSession {
	t.Helper()
	c := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "1"}, opts)
	cs, err := c.Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: &http.Client{Transport: bearer{token, http.DefaultTransport}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// A held call tells a client that sent a progressToken that it waits,
// then, at the hold, says where it waits and that nothing ran; a call
// decided while held returns the result.
func TestHeldCallProgressAndHold(t *testing.T) {
	tools := &waitingTools{}
	url := newServer(t, tools, 700*time.Millisecond, 0)
	var progress atomic.Int32
	cs := connect(t, url, aliceToken, &mcp.ClientOptions{ProgressNotificationHandler: func(context.Context, *mcp.ProgressNotificationClientRequest) {
		progress.Add(1)
	}})
	params := &mcp.CallToolParams{Name: "deploy", Arguments: map[string]any{}}
	params.SetProgressToken("p1")
	res, err := cs.CallTool(t.Context(), params)
	if err != nil || !res.IsError {
		t.Fatalf("%v %v", res, err)
	}
	txt := res.Content[0].(*mcp.TextContent).Text
	if want := "Waiting for approval in https://slack.example/archives/C0OPS/p1 (request b1). Nothing ran."; !strings.HasPrefix(txt, want) {
		t.Fatalf("at the hold: %q", txt)
	}
	if progress.Load() < 2 {
		t.Fatalf("%d progress notifications in 700 ms at 100 ms", progress.Load())
	}
	go func() { time.Sleep(300 * time.Millisecond); tools.decided.Store(true) }()
	res, err = cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "deploy", Arguments: map[string]any{}})
	if err != nil || res.IsError || res.Content[0].(*mcp.TextContent).Text != "deployed" {
		t.Fatalf("decided while held: %v %v", res, err)
	}
	if tools.calls[0] != "alice/"+cs.ID()+"/deploy" {
		t.Fatalf("the core was asked as %q, want the client and its MCP session", tools.calls[0])
	}
}

// An MCP session is the client's that opened it: bob's token on alice's
// session is refused, and no call is made.
func TestSessionBoundToItsClient(t *testing.T) {
	tools := &waitingTools{}
	url := newServer(t, tools, time.Second, 0)
	cs := connect(t, url, aliceToken, nil)
	body := `{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"deploy","arguments":{}}}`
	req, _ := http.NewRequest("POST", url, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+bobToken)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Session-Id", cs.ID())
	req.Header.Set("Mcp-Protocol-Version", "2025-06-18")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden || len(tools.calls) != 0 {
		t.Fatalf("bob on alice's session: %d, %d calls", resp.StatusCode, len(tools.calls))
	}
}

// Past its requests a minute, a client's call is refused, saying which
// setting, and the core is not asked.
func TestCallsAMinute(t *testing.T) {
	tools := &waitingTools{}
	tools.decided.Store(true)
	url := newServer(t, tools, time.Second, 2)
	cs := connect(t, url, aliceToken, nil)
	for i := range 3 {
		res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "deploy", Arguments: map[string]any{}})
		if err != nil {
			t.Fatal(err)
		}
		txt := res.Content[0].(*mcp.TextContent).Text
		if refused := strings.Contains(txt, "requests_per_minute"); refused != (i == 2) || refused && !res.IsError {
			t.Fatalf("call %d: %q", i+1, txt)
		}
	}
	if len(tools.calls) != 2 {
		t.Fatalf("the core was asked %d times", len(tools.calls))
	}
}

// A client that stops waiting (its call cancelled) is recorded as gone,
// so the card can say so; the call is not refused or run for it.
func TestCancelledCallIsRecorded(t *testing.T) {
	tools := &waitingTools{}
	url := newServer(t, tools, 5*time.Second, 0)
	cs := connect(t, url, aliceToken, nil)
	ctx, cancel := context.WithTimeout(t.Context(), 400*time.Millisecond)
	defer cancel()
	if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "deploy", Arguments: map[string]any{}}); err == nil {
		t.Fatal("a cancelled call returned")
	}
	deadline := time.Now().Add(5 * time.Second)
	for len(tools.lefts()) == 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if got := tools.lefts(); len(got) != 1 || got[0] != "alice/b1" {
		t.Fatalf("told Left: %v", got)
	}
}
