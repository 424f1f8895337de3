package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/airlockhq/airlock/internal/testkit"
	"github.com/airlockhq/airlock/model/modeltest"
)

// stdioServerEnv makes the test binary an MCP server over stdio that
// writes its token (CHILD_TOKEN) to stderr, as servers that log their
// config do (TestMain).
const stdioServerEnv = "AIRLOCK_TEST_MCP_STDIO"

// serveLeakyStdio is that server.
func serveLeakyStdio() {
	tok := os.Getenv("CHILD_TOKEN")
	fmt.Fprintf(os.Stderr, "starting with token=%s (base64 %s)\n", tok, base64.StdEncoding.EncodeToString([]byte(tok)))
	srv := mcp.NewServer(&mcp.Implementation{Name: "leaky", Version: "1"}, nil)
	mcp.AddTool(srv, &mcp.Tool{Name: "ping", Description: "Answers pong."},
		func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "pong"}}}, nil, nil
		})
	if err := srv.Run(context.Background(), &mcp.StdioTransport{}); err != nil {
		fmt.Fprintln(os.Stderr, "leaky server:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

// TestMCPStderrTokenNotLogged: an MCP stdio server that prints its own
// token (given through ${ENV} in its env) on stderr, plain and base64,
// leaves neither in Airlock's log; the line is logged, scrubbed.
func TestMCPStderrTokenNotLogged(t *testing.T) {
	const token = "ghp_e2eTOKEN0123456789abcdef"
	t.Setenv("AIRLOCK_TEST_CHILD_TOKEN", token)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	model := modeltest.NewOpenAIServer(t, func(modeltest.OpenAIRequest) modeltest.OpenAIReply { return modeltest.TextReply("hi") })
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "airlock.yaml")
	cfg := fmt.Sprintf(`
storage: {dsn: %q}
listen: 127.0.0.1:0
log: {level: info}
model: {provider: openai, name: fake, base_url: %q}
mcp_servers:
  - name: leaky
    command: [%q]
    env: {%s: "1", CHILD_TOKEN: "${AIRLOCK_TEST_CHILD_TOKEN}"}
`, filepath.Join(dir, "airlock.db"), model.BaseURL(), exe, stdioServerEnv)
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stderr testkit.Buffer
	done := make(chan int, 1)
	go func() { done <- run(ctx, []string{"run", "-config", cfgPath}, nil, &testkit.Buffer{}, &stderr) }()
	deadline := time.Now().Add(20 * time.Second)
	for !strings.Contains(stderr.String(), "starting with token") || !strings.Contains(stderr.String(), "airlock running") {
		if time.Now().After(deadline) {
			t.Fatalf("no stderr line logged:\n%s", stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	cancel()
	<-done
	log := stderr.String()
	for _, leak := range []string{token, base64.StdEncoding.EncodeToString([]byte(token))} {
		if strings.Contains(log, leak) {
			t.Errorf("the log holds the token (%q):\n%s", leak, log)
		}
	}
	if !strings.Contains(log, "starting with token=[redacted] (base64 [redacted])") {
		t.Errorf("the stderr line is not logged scrubbed:\n%s", log)
	}
}

// TestEndToEndSecretsNotToTheModel: through the real binary, a service
// that echoes the token Airlock sends it (given through ${ENV}) base64-,
// URL- and JSON-escaped, or places it across the 16 KiB cap, and an MCP
// server that splits it across two text parts, get no form or part of it
// to the model.
func TestEndToEndSecretsNotToTheModel(t *testing.T) {
	skipShort(t)
	const token = "svc_e2e/TOKEN+0123456789&x"
	goJSON, _ := json.Marshal(token)
	echo := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/encoded":
			fmt.Fprintf(w, "b64=%s b64url=%s q=%s p=%s json=%s",
				base64.StdEncoding.EncodeToString([]byte(token)), base64.RawURLEncoding.EncodeToString([]byte(token)),
				url.QueryEscape(token), url.PathEscape(token), goJSON)
		case "/big":
			// The token from the header starts 5 bytes before the cap.
			fmt.Fprint(w, strings.Repeat("a", 16<<10-5)+strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")+"tail")
		}
	}))
	// Closed after Airlock is stopped (cleanups run last-registered
	// first): a server closed before waits for Airlock's open streams.
	t.Cleanup(echo.Close)
	srv := mcp.NewServer(&mcp.Implementation{Name: "ops", Version: "1"}, nil)
	mcp.AddTool(srv, &mcp.Tool{Name: "split", Description: "Splits.", Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
		func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "key " + token[:9]}, &mcp.TextContent{Text: token[9:] + " end"}}}, nil, nil
		})
	mcpSrv := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	t.Cleanup(mcpSrv.Close)

	var mu sync.Mutex
	var seen []string // tool results the model got
	model := modeltest.NewOpenAIServer(t, func(req modeltest.OpenAIRequest) modeltest.OpenAIReply {
		last := req.Messages[len(req.Messages)-1]
		switch {
		case last.Role == "tool":
			mu.Lock()
			seen = append(seen, last.Content)
			mu.Unlock()
			return modeltest.TextReply("model got it")
		case strings.Contains(last.Content, "encoded"):
			return modeltest.CallsReply(modeltest.OpenAIToolCall{ID: "c1", Name: "fetch", Arguments: `{"path":"encoded"}`})
		case strings.Contains(last.Content, "big"):
			return modeltest.CallsReply(modeltest.OpenAIToolCall{ID: "c2", Name: "fetch", Arguments: `{"path":"big"}`})
		case strings.Contains(last.Content, "split"):
			return modeltest.CallsReply(modeltest.OpenAIToolCall{ID: "c3", Name: "ops__split", Arguments: `{}`})
		}
		return modeltest.TextReply("hello")
	})
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "airlock.yaml")
	cfg := fmt.Sprintf(`
storage: {dsn: %q}
model: {provider: openai, name: fake, base_url: %q, max_message_chars: 100000}
channels: [{platform: shell, id: "*", approvers: [local]}]
tools:
  - name: fetch
    description: Fetch a page.
    parameters: {type: object, properties: {path: {type: string, enum: [encoded, big]}}, required: [path]}
    http:
      method: GET
      url: "%s/{{.path}}"
      headers: {Authorization: "Bearer ${AIRLOCK_TEST_SVC_TOKEN}"}
mcp_servers:
  - name: ops
    url: %q
    trust_annotations: true
`, filepath.Join(dir, "airlock.db"), model.BaseURL(), echo.URL, mcpSrv.URL)
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	p := startChatWith(t, airlockBinary(t), cfgPath, "AIRLOCK_TEST_SVC_TOKEN="+token)
	for _, msg := range []string{"encoded", "big", "split"} {
		p.send(msg)
		p.waitFor("model got it")
	}
	mu.Lock()
	defer mu.Unlock()
	if len(seen) != 3 {
		t.Fatalf("the model got %d tool results, want 3", len(seen))
	}
	forms := []string{token, base64.StdEncoding.EncodeToString([]byte(token)), base64.RawURLEncoding.EncodeToString([]byte(token)),
		url.QueryEscape(token), url.PathEscape(token), strings.Trim(string(goJSON), `"`), token[:5], token[9:]}
	for i, got := range seen {
		for _, f := range forms {
			if strings.Contains(got, f) {
				t.Errorf("tool result %d holds %q:\n%s", i+1, f, got[max(0, len(got)-300):])
			}
		}
		// The cut result has no room for the marker: the token is dropped.
		if !strings.Contains(got, "[redacted]") && i != 1 || i == 1 && !strings.Contains(got, "[output truncated") {
			t.Errorf("tool result %d has no marker: %s", i+1, got)
		}
	}
}
