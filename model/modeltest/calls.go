package modeltest

import (
	"encoding/json"
	"errors"
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

// CheckAPIError checks that err is a *model.APIError of HTTP status
// whose message passes message, retryable or not as said, after requests
// requests to the fake (no retries of the client library's own).
func CheckAPIError(t testing.TB, err error, status int, message func(string) bool, retryable bool, requests int) {
	t.Helper()
	var ae *model.APIError
	if !errors.As(err, &ae) {
		t.Fatalf("status %d: err %v is no model.APIError", status, err)
	}
	if ae.Status != status || !message(ae.Message) {
		t.Errorf("status %d: got %+v", status, ae)
	}
	if model.Retryable(err) != retryable {
		t.Errorf("status %d: retryable %v", status, model.Retryable(err))
	}
	if requests != 1 {
		t.Errorf("status %d: %d requests, want 1 (no library retries)", status, requests)
	}
}
