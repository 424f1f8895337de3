// Package model owns the conversation format Airlock keeps and the interface
// to LLM providers; subpackages speak each provider's wire format.
package model

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"

	"github.com/airlockhq/airlock/confirm"
)

// Role of a message.
type Role string

const (
	RoleUser      Role = "user"      // a person in the thread
	RoleAssistant Role = "assistant" // the model
	RoleTool      Role = "tool"      // tool results, one per call of the previous assistant message
)

// Message is one message of a conversation, as stored (JSON) and as sent to
// a provider.
type Message struct {
	Role Role `json:"role"`
	// Author is the platform user id of a user message.
	Author string `json:"author,omitempty"`
	// Aside marks a user message said in the thread but not addressed to
	// the bot: kept as context for the next turn.
	Aside bool   `json:"aside,omitempty"`
	Text  string `json:"text,omitempty"`
	// ToolCalls of an assistant message, in the model's order.
	ToolCalls []confirm.ToolCall `json:"tool_calls,omitempty"`
	// Results of a tool message, one per call, in the model's order.
	Results []ToolResult `json:"results,omitempty"`
	// Provider and Raw keep an assistant message exactly as the provider
	// returned it (for Gemini, the Content with its thought signatures).
	// Gemini sends Raw back verbatim when Provider is its own name (thought
	// signatures must return); OpenAI rebuilds the message from Text and
	// ToolCalls, since a response's extra fields are not valid in a request.
	Provider string          `json:"provider,omitempty"`
	Raw      json.RawMessage `json:"raw,omitempty"`
}

// ToolResult answers one tool call.
type ToolResult struct {
	CallID  string `json:"call_id,omitempty"` // the id as the model gave it
	Key     string `json:"key"`
	Name    string `json:"name"`
	Content string `json:"content"`
	IsError bool   `json:"is_error,omitempty"`
}

// ToolSpec is a tool as the model sees it.
type ToolSpec struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Parameters  json.RawMessage `json:"parameters,omitempty"` // JSON Schema of the arguments
}

// Request is one generation request.
type Request struct {
	System   string
	Messages []Message
	Tools    []ToolSpec
}

// Provider generates the model's next message.
type Provider interface {
	// Generate returns an assistant message: text, tool calls, or both.
	Generate(ctx context.Context, req Request) (Message, error)
}

// APIError is an error answer from a provider's API.
type APIError struct {
	Status  int
	Message string
}

func (e *APIError) Error() string {
	return fmt.Sprintf("model api: status %d: %s", e.Status, e.Message)
}

// Retryable reports whether the error is worth a retry: 429, 5xx, and
// network errors (a model request has no side effects). A cancelled or
// expired context is not.
func Retryable(err error) bool {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	var ae *APIError
	if errors.As(err, &ae) {
		return ae.Status == 429 || ae.Status >= 500
	}
	var ne net.Error
	return errors.As(err, &ne)
}
