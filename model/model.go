// Package model owns the conversation format Airlock keeps and the interface
// to LLM providers; subpackages speak each provider's wire format.
package model

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

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
	// RetryAfter is how long the provider asked to wait before the next
	// try: the Retry-After or retry-after-ms header (OpenAI-compatible
	// servers), or the RetryInfo retryDelay of the error details (Gemini).
	// 0 when it said nothing (a "Retry-After: 0" reads as nothing too).
	RetryAfter time.Duration
	// NoRetry is set when the provider said that trying again cannot help
	// although the status alone would be retried: "x-should-retry: false",
	// OpenAI's insufficient_quota (billing) 429, Gemini's per-day quota.
	NoRetry bool
}

func (e *APIError) Error() string {
	if e.RetryAfter > 0 {
		return fmt.Sprintf("model api: status %d: %s (retry after %s)", e.Status, e.Message, e.RetryAfter)
	}
	return fmt.Sprintf("model api: status %d: %s", e.Status, e.Message)
}

// Retryable reports whether the error is worth a retry: 429, 5xx, and
// network errors (a model request has no side effects). A cancelled or
// expired context is not, nor an APIError marked NoRetry.
func Retryable(err error) bool {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	var ae *APIError
	if errors.As(err, &ae) {
		return !ae.NoRetry && (ae.Status == 429 || ae.Status >= 500)
	}
	var ne net.Error
	return errors.As(err, &ne)
}

// RateLimited reports whether err is a rate-limit answer (HTTP 429; for
// Gemini, RESOURCE_EXHAUSTED), as opposed to a server error or a network
// failure. A WithWaitNotice hook can use it to word its notice.
func RateLimited(err error) bool {
	var ae *APIError
	return errors.As(err, &ae) && ae.Status == 429
}

// RetryAfter returns the wait the provider asked for in err, found in the
// *APIError it wraps: both providers (model/openai from the Retry-After and
// retry-after-ms headers of openai.Error's http.Response, model/gemini from
// the RetryInfo in genai.APIError's Details; genai.APIError carries no
// headers) fill APIError.RetryAfter. ok is false when there is none.
func RetryAfter(err error) (d time.Duration, ok bool) {
	var ae *APIError
	if errors.As(err, &ae) && ae.RetryAfter > 0 {
		return ae.RetryAfter, true
	}
	return 0, false
}

// ParseRetryAfter reads the wait a response asks for from its headers:
// retry-after-ms (milliseconds, as Azure OpenAI and OpenAI's SDKs use),
// else Retry-After as delay-seconds (fractions allowed) or as an HTTP date,
// which is measured from now. A date in the past gives 0 and true.
// Negative, malformed or absurd (over a day) values are ignored.
func ParseRetryAfter(h http.Header, now time.Time) (time.Duration, bool) {
	const most = 24 * time.Hour
	if v := strings.TrimSpace(h.Get("Retry-After-Ms")); v != "" {
		if ms, err := strconv.ParseFloat(v, 64); err == nil && ms >= 0 && ms <= float64(most/time.Millisecond) {
			return time.Duration(ms * float64(time.Millisecond)), true
		}
	}
	v := strings.TrimSpace(h.Get("Retry-After"))
	if v == "" {
		return 0, false
	}
	if s, err := strconv.ParseFloat(v, 64); err == nil {
		if s >= 0 && s <= most.Seconds() {
			return time.Duration(s * float64(time.Second)), true
		}
		return 0, false
	}
	t, err := http.ParseTime(v)
	if err != nil {
		return 0, false
	}
	d := t.Sub(now)
	switch {
	case d < 0:
		return 0, true
	case d > most:
		return 0, false
	}
	return d, true
}
