package main

import (
	"context"
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

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
	var stderr syncBuffer
	done := make(chan int, 1)
	go func() { done <- run(ctx, []string{"run", "-config", cfgPath}, nil, &syncBuffer{}, &stderr) }()
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
