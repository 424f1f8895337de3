package modeltest

import (
	"encoding/json"
	"testing"

	"github.com/airlockhq/airlock/confirm"
	"github.com/airlockhq/airlock/model"
)

// ToolCall is a tool call as a model sends it, with args as the JSON
// text of its arguments.
func ToolCall(id, name, args string) confirm.ToolCall {
	return confirm.ToolCall{ID: id, Name: name, Args: json.RawMessage(args)}
}

// LastToolResults is the results of req's last tool message: what the
// model was told its calls did. t fails without one.
func LastToolResults(t testing.TB, req model.Request) []model.ToolResult {
	t.Helper()
	for i := len(req.Messages) - 1; i >= 0; i-- {
		if req.Messages[i].Role == model.RoleTool {
			return req.Messages[i].Results
		}
	}
	t.Fatal("no tool results sent to the model")
	return nil
}
