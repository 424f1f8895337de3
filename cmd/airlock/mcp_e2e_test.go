package main

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/airlockhq/airlock/model/modeltest"
)

type itemArgs struct {
	ID string `json:"id"`
}

// mcpCalls records the tools/call requests an MCP test server received.
type mcpCalls struct {
	mu    sync.Mutex
	calls []string // tool, then the idempotency key from _meta
}

func (m *mcpCalls) add(req *mcp.CallToolRequest) {
	m.mu.Lock()
	defer m.mu.Unlock()
	key, _ := req.Params.GetMeta()["dev.airlock/idempotency-key"].(string)
	m.calls = append(m.calls, req.Params.Name+" "+key)
}

func (m *mcpCalls) list() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]string(nil), m.calls...)
}

// newMCPServer serves a destructive and a read-only tool over streamable
// HTTP on 127.0.0.1, with the official SDK.
func newMCPServer(t *testing.T, rec *mcpCalls) *httptest.Server {
	srv := mcp.NewServer(&mcp.Implementation{Name: "ops", Version: "1"}, nil)
	yes := true
	mcp.AddTool(srv, &mcp.Tool{Name: "delete_item", Description: "Deletes an item for good.", Annotations: &mcp.ToolAnnotations{DestructiveHint: &yes}},
		func(ctx context.Context, req *mcp.CallToolRequest, in itemArgs) (*mcp.CallToolResult, any, error) {
			rec.add(req)
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "deleted " + in.ID}}}, nil, nil
		})
	mcp.AddTool(srv, &mcp.Tool{Name: "get_item", Title: "Get item", Description: "Reads an item.", Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
		func(ctx context.Context, req *mcp.CallToolRequest, in itemArgs) (*mcp.CallToolResult, any, error) {
			rec.add(req)
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "item " + in.ID}}}, nil, nil
		})
	hs := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	t.Cleanup(hs.Close)
	return hs
}

// TestEndToEndMCP: through the real binary's terminal, an MCP server's
// destructive tool waits for Allow and runs once with the idempotency key
// in _meta; its read-only tool runs without a card only because the
// operator trusts the server's annotations; invalid arguments never reach
// the server; `airlock tools` lists both with why.
func TestEndToEndMCP(t *testing.T) {
	skipShort(t)
	rec := &mcpCalls{}
	server := newMCPServer(t, rec)
	model := modeltest.NewOpenAIServer(t, func(req modeltest.OpenAIRequest) modeltest.OpenAIReply {
		last := req.Messages[len(req.Messages)-1]
		switch {
		case last.Role == "tool":
			return modeltest.TextReply("model saw: " + last.Content)
		case strings.Contains(last.Content, "look"):
			return modeltest.CallsReply(modeltest.OpenAIToolCall{ID: "c1", Name: "ops__get_item", Arguments: `{"id":"42"}`})
		case strings.Contains(last.Content, "bad"):
			return modeltest.CallsReply(modeltest.OpenAIToolCall{ID: "c2", Name: "ops__delete_item", Arguments: `{"id":42}`})
		case strings.Contains(last.Content, "delete"):
			return modeltest.CallsReply(modeltest.OpenAIToolCall{ID: "c3", Name: "ops__delete_item", Arguments: `{"id":"42"}`})
		}
		return modeltest.TextReply("hello")
	})
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "airlock.yaml")
	cfg := fmt.Sprintf(`
storage: {dsn: %q}
model: {provider: openai, name: fake, base_url: %q}
channels: [{platform: shell, id: "*", approvers: [local]}]
mcp_servers:
  - name: ops
    url: %q
    trust_annotations: true
    summaries:
      delete_item: "Delete item {{.id}} for good"
`, filepath.Join(dir, "airlock.db"), model.BaseURL(), server.URL)
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}

	out, err := exec.Command(airlockBinary(t), "tools", "-config", cfgPath).CombinedOutput()
	if err != nil {
		t.Fatalf("airlock tools: %v\n%s", err, out)
	}
	for _, want := range []string{"ops__delete_item", "mcp:ops", "ops__get_item"} {
		if !bytes.Contains(out, []byte(want)) {
			t.Fatalf("airlock tools lacks %q:\n%s", want, out)
		}
	}
	for _, line := range strings.Split(string(out), "\n") {
		// The approval column, and the server's own reason for the flag.
		if strings.HasPrefix(line, "ops__delete_item") && (!strings.Contains(line, " always ") || !strings.Contains(line, "not annotated readOnlyHint")) ||
			strings.HasPrefix(line, "ops__get_item") && (!strings.Contains(line, " no ") || !strings.Contains(line, "readOnlyHint, trusted")) {
			t.Fatalf("airlock tools: wrong approval in %q\n%s", line, out)
		}
	}

	p := startChat(t, cfgPath)
	p.send("look at item 42")
	if got := p.waitFor("model saw:") + p.waitFor("\n"); !strings.Contains(got, "item 42") || strings.Contains(got, "APPROVAL NEEDED") {
		t.Fatalf("the trusted read-only tool:\n%s", got)
	}
	p.send("bad delete")
	if got := p.waitFor("model saw:") + p.waitFor("\n"); !strings.Contains(got, "invalid arguments") || strings.Contains(got, "APPROVAL NEEDED") {
		t.Fatalf("invalid arguments:\n%s", got)
	}
	p.send("delete item 42")
	card := p.waitFor("/allow N")
	if !strings.Contains(card, "Delete item 42 for good") {
		t.Fatalf("card:\n%s", card)
	}
	if n := len(rec.list()); n != 1 {
		t.Fatalf("the server saw %d calls before Allow: %v", n, rec.list())
	}
	p.send("/allow 1")
	if got := p.waitFor("model saw:") + p.waitFor("\n"); !strings.Contains(got, "deleted 42") {
		t.Fatalf("after Allow:\n%s", got)
	}
	calls := rec.list()
	if len(calls) != 2 || !strings.HasPrefix(calls[1], "delete_item ") || !strings.HasSuffix(calls[1], "/c3") {
		t.Fatalf("server calls: %v (want get_item, then delete_item once with <batch>/c3 in _meta)", calls)
	}
}
