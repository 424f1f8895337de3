package mcptools

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/airlockhq/airlock/internal/testkit"
	"github.com/airlockhq/airlock/tools"
)

// serverEnv makes the test binary an MCP server over stdio (TestMain).
const serverEnv = "AIRLOCK_MCPTEST_SERVER"

func TestMain(m *testing.M) {
	switch os.Getenv(serverEnv) {
	case "hang": // reads its input, never answers
		_, _ = io.Copy(io.Discard, os.Stdin)
		os.Exit(0)
	case "1":
		srv := newTestServer(&recorder{}, nil)
		if err := srv.Run(context.Background(), &mcp.StdioTransport{}); err != nil {
			fmt.Fprintln(os.Stderr, "test server:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	minBackoff, maxBackoff = 50*time.Millisecond, 500*time.Millisecond
	os.Exit(m.Run())
}

// call is one tools/call the test server received.
type call struct {
	Tool string
	Args json.RawMessage
	Meta map[string]any
}

// recorder keeps the calls a test server received.
type recorder struct {
	mu    sync.Mutex
	calls []call
}

func (r *recorder) add(req *mcp.CallToolRequest) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, call{Tool: req.Params.Name, Args: bytes.Clone(req.Params.Arguments), Meta: req.Params.GetMeta()})
}

func (r *recorder) of(tool string) []call {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.DeleteFunc(slices.Clone(r.calls), func(c call) bool { return c.Tool != tool })
}

type itemArgs struct {
	ID string `json:"id" jsonschema:"the item's id"`
}

type envArgs struct {
	Name string `json:"name"`
}

type countOut struct {
	N     int    `json:"n"`
	Label string `json:"label"`
}

// hooks let a test see and end the block tool.
type hooks struct {
	started chan struct{} // receives a value when the block tool starts
	release chan struct{} // closed: the block tool returns
}

func newHooks() *hooks {
	return &hooks{started: make(chan struct{}, 1), release: make(chan struct{})}
}

// newTestServer is the MCP server the tests talk to. The block tool waits
// for its context to end, or h.release to close.
func newTestServer(rec *recorder, h *hooks) *mcp.Server {
	srv := mcp.NewServer(&mcp.Implementation{Name: "airlock-test", Version: "1"}, nil)
	yes, no := true, false
	mcp.AddTool(srv, &mcp.Tool{
		Name: "delete_item", Description: "Deletes an item for good.",
		Annotations: &mcp.ToolAnnotations{DestructiveHint: &yes},
	}, func(ctx context.Context, req *mcp.CallToolRequest, in itemArgs) (*mcp.CallToolResult, any, error) {
		rec.add(req)
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "deleted " + in.ID}}}, nil, nil
	})
	mcp.AddTool(srv, &mcp.Tool{
		Name: "get_item", Title: "Get item", Description: "Reads an item.",
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true, DestructiveHint: &no},
	}, func(ctx context.Context, req *mcp.CallToolRequest, in itemArgs) (*mcp.CallToolResult, any, error) {
		rec.add(req)
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "item " + in.ID}}}, nil, nil
	})
	mcp.AddTool(srv, &mcp.Tool{Name: "fail", Description: "Always fails."},
		func(ctx context.Context, req *mcp.CallToolRequest, in struct{}) (*mcp.CallToolResult, any, error) {
			rec.add(req)
			return nil, nil, errors.New("quota exceeded for project p1")
		})
	mcp.AddTool(srv, &mcp.Tool{Name: "mixed", Description: "Text, an image and structured content."},
		func(ctx context.Context, req *mcp.CallToolRequest, in struct{}) (*mcp.CallToolResult, countOut, error) {
			rec.add(req)
			return &mcp.CallToolResult{Content: []mcp.Content{
				&mcp.TextContent{Text: "first"},
				&mcp.ImageContent{MIMEType: "image/png", Data: []byte{1, 2, 3, 4}},
				&mcp.TextContent{Text: "second"},
			}}, countOut{N: 2, Label: "two"}, nil
		})
	mcp.AddTool(srv, &mcp.Tool{Name: "count", Description: "Structured output only."},
		func(ctx context.Context, req *mcp.CallToolRequest, in struct{}) (*mcp.CallToolResult, countOut, error) {
			rec.add(req)
			return nil, countOut{N: 3, Label: "three"}, nil
		})
	mcp.AddTool(srv, &mcp.Tool{Name: "block", Description: "Blocks until cancelled."},
		func(ctx context.Context, req *mcp.CallToolRequest, in struct{}) (*mcp.CallToolResult, any, error) {
			rec.add(req)
			fmt.Fprintln(os.Stderr, "block: started")
			var release chan struct{}
			if h != nil {
				h.started <- struct{}{}
				release = h.release
			}
			select {
			case <-ctx.Done():
				return nil, nil, ctx.Err()
			case <-release:
				return nil, nil, errors.New("released")
			}
		})
	mcp.AddTool(srv, &mcp.Tool{Name: "env", Description: "Reads an environment variable."},
		func(ctx context.Context, req *mcp.CallToolRequest, in envArgs) (*mcp.CallToolResult, any, error) {
			v, ok := os.LookupEnv(in.Name)
			if !ok {
				v = "<unset>"
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: v}}}, nil, nil
		})
	mcp.AddTool(srv, &mcp.Tool{Name: "pid", Description: "The server's process id."},
		func(ctx context.Context, req *mcp.CallToolRequest, in struct{}) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: strconv.Itoa(os.Getpid())}}}, nil, nil
		})
	mcp.AddTool(srv, &mcp.Tool{Name: "parts", Description: "Returns the given text parts."},
		func(ctx context.Context, req *mcp.CallToolRequest, in struct {
			Parts   []string `json:"parts"`
			IsError bool     `json:"is_error"`
		}) (*mcp.CallToolResult, any, error) {
			res := &mcp.CallToolResult{IsError: in.IsError}
			for _, p := range in.Parts {
				res.Content = append(res.Content, &mcp.TextContent{Text: p})
			}
			return res, nil, nil
		})
	mcp.AddTool(srv, &mcp.Tool{Name: "ask", Description: "Asks which environment (elicitation), then says the answer."},
		func(ctx context.Context, req *mcp.CallToolRequest, in struct {
			URL bool `json:"url,omitempty"`
		}) (*mcp.CallToolResult, any, error) {
			rec.add(req)
			if r, ok := req.Params.InputResponses["env"].(*mcp.ElicitResult); ok {
				text := r.Action
				if r.Action == "accept" {
					text += " " + fmt.Sprint(r.Content["env"])
				}
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}}, nil, nil
			}
			p := &mcp.ElicitParams{Message: "Which environment?", RequestedSchema: json.RawMessage(
				`{"type":"object","properties":{"env":{"type":"string","enum":["prod","staging"]}},"required":["env"]}`)}
			if in.URL {
				p = &mcp.ElicitParams{Mode: "url", Message: "Sign in", URL: "https://example.invalid/signin", ElicitationID: "e1"}
			}
			return &mcp.CallToolResult{InputRequests: mcp.InputRequestMap{"env": p}}, nil, nil
		})
	mcp.AddTool(srv, &mcp.Tool{Name: "say", Description: "Writes a line to stderr."},
		func(ctx context.Context, req *mcp.CallToolRequest, in struct {
			Text string `json:"text"`
		}) (*mcp.CallToolResult, any, error) {
			fmt.Fprintln(os.Stderr, in.Text)
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "said"}}}, nil, nil
		})
	return srv
}

// memDial serves srv over in-memory transports, a new pair per attempt.
func memDial(srv *mcp.Server) dialFunc {
	return func(cfg Config, _ *slog.Logger) (mcp.Transport, error) {
		ct, st := mcp.NewInMemoryTransports()
		if _, err := srv.Connect(context.Background(), st, nil); err != nil {
			return nil, err
		}
		return ct, nil
	}
}

func newLog() (*slog.Logger, *testkit.Buffer) {
	b := &testkit.Buffer{}
	return slog.New(slog.NewTextHandler(b, &slog.HandlerOptions{Level: slog.LevelDebug})), b
}

// startManager starts a manager, waits until it is ready and closes it at
// the end of the test.
func startManager(t *testing.T, cfgs []Config, set *tools.Set, log *slog.Logger, dial dialFunc) *Manager {
	t.Helper()
	m := start(context.Background(), cfgs, set, log, dial)
	t.Cleanup(func() { m.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := m.WaitReady(ctx); err != nil {
		t.Fatalf("WaitReady: %v", err)
	}
	return m
}

func mustTool(t *testing.T, set *tools.Set, name string) tools.Tool {
	t.Helper()
	tool, ok := set.Get(name)
	if !ok {
		t.Fatalf("tool %s not in the set; have %v", name, set.Names())
	}
	return tool
}

func ptr[T any](v T) *T { return &v }
