package bench

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/airlockhq/airlock/confirm"
	"github.com/airlockhq/airlock/model"
	"github.com/airlockhq/airlock/tools"
)

// instantModel answers at once: a call of the bench tool to a person's
// message, and a short text to the tool's result. It keeps nothing, so it
// adds nothing to the memory per card (modeltest.Scripted records every
// request).
type instantModel struct{}

func (instantModel) Generate(_ context.Context, req model.Request) (model.Message, error) {
	if n := len(req.Messages); n > 0 && req.Messages[n-1].Role == model.RoleTool {
		return model.Message{Role: model.RoleAssistant, Text: modelAnswer}, nil
	}
	return model.Message{Role: model.RoleAssistant, Text: "I'll run the bench tool.",
		ToolCalls: []confirm.ToolCall{{ID: "call_bench", Name: toolName, Args: json.RawMessage(`{"target":"bench"}`)}}}, nil
}

// countingTool is an instant gated tool counting its runs per batch.
type countingTool struct {
	mu   sync.Mutex
	runs map[string]int // batch id -> runs
	n    atomic.Int64
}

func (t *countingTool) Spec() model.ToolSpec {
	return model.ToolSpec{Name: toolName, Description: "Does nothing, at once.", Parameters: json.RawMessage(`{"type":"object"}`)}
}
func (t *countingTool) Confirm() bool                           { return true }
func (t *countingTool) Validate(json.RawMessage) error          { return nil }
func (t *countingTool) Summary(json.RawMessage) (string, error) { return "Run the bench tool", nil }
func (t *countingTool) Run(_ context.Context, _ json.RawMessage, key string) (string, error) {
	batch, _, _ := strings.Cut(key, "/")
	t.mu.Lock()
	t.runs[batch]++
	t.mu.Unlock()
	t.n.Add(1)
	return `{"ok":true}`, nil
}

type toolSet struct{ t *countingTool }

func (s toolSet) Get(name string) (tools.Tool, bool) { return s.t, name == toolName }
func (s toolSet) Specs() []model.ToolSpec            { return []model.ToolSpec{s.t.Spec()} }
