package modeltest

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// OpenAIRequest is a chat-completions request as the fake server decoded it.
type OpenAIRequest struct {
	Path     string // "/v1/chat/completions" or "/chat/completions"
	APIKey   string // from "Authorization: Bearer <key>"; empty without one
	Header   http.Header
	Body     []byte // the request body as received
	Model    string
	Messages []OpenAIMessage
	Tools    []OpenAITool
}

// OpenAIMessage is one message of a request.
type OpenAIMessage struct {
	Role       string // system, developer, user, assistant, tool
	Content    string // string content, or the text parts joined
	ToolCalls  []OpenAIToolCall
	ToolCallID string // of a tool message
}

// OpenAIToolCall is a function tool call, in a request's assistant message
// or in a reply.
type OpenAIToolCall struct {
	ID        string
	Name      string
	Arguments string // the JSON text of the arguments, sent as is
}

// OpenAITool is a function tool offered in a request.
type OpenAITool struct {
	Name        string
	Description string
	Parameters  json.RawMessage
}

// OpenAIReply is what the fake answers to one request.
type OpenAIReply struct {
	Text      string
	ToolCalls []OpenAIToolCall
	// OmitIDs sends the tool calls without ids. Otherwise a call with an
	// empty ID gets "call_<n>", unique on the server.
	OmitIDs bool
	// FinishReason defaults to "tool_calls" with calls, else "stop".
	FinishReason string
	// Status, when not 0 or 200, answers with an OpenAI error body of this
	// HTTP status and ErrorMessage instead of a completion.
	Status       int
	ErrorMessage string
	// Raw, when set, is written as the whole 200 response body instead.
	Raw json.RawMessage
	// Header is added to the response, error or not: "Retry-After",
	// "retry-after-ms", "x-should-retry", ...
	Header http.Header
}

// TextReply answers with text.
func TextReply(text string) OpenAIReply { return OpenAIReply{Text: text} }

// CallsReply answers with tool calls.
func CallsReply(calls ...OpenAIToolCall) OpenAIReply { return OpenAIReply{ToolCalls: calls} }

// ErrorReply answers with an API error of the given HTTP status.
func ErrorReply(status int, message string) OpenAIReply {
	return OpenAIReply{Status: status, ErrorMessage: message}
}

// RateLimitReply answers 429 with a "Retry-After: <retryAfter>" header
// (seconds or an HTTP date; none when empty).
func RateLimitReply(retryAfter, message string) OpenAIReply {
	r := ErrorReply(http.StatusTooManyRequests, message)
	if retryAfter != "" {
		r.Header = http.Header{"Retry-After": {retryAfter}}
	}
	return r
}

// OpenAIScript returns a handler that answers with replies in order. Past
// the last reply it answers 500 and marks t failed.
func OpenAIScript(t testing.TB, replies ...OpenAIReply) func(OpenAIRequest) OpenAIReply {
	return inOrder[OpenAIRequest](replies, func() OpenAIReply {
		t.Errorf("modeltest: openai fake: unexpected request, script exhausted")
		return ErrorReply(http.StatusInternalServerError, "modeltest: script exhausted")
	})
}

// inOrder is a fake's handler that answers with replies in order, and
// with exhausted() past the last.
func inOrder[Req, Reply any](replies []Reply, exhausted func() Reply) func(Req) Reply {
	var mu sync.Mutex
	return func(Req) Reply {
		mu.Lock()
		defer mu.Unlock()
		if len(replies) == 0 {
			return exhausted()
		}
		r := replies[0]
		replies = replies[1:]
		return r
	}
}

// OpenAIServer is a fake OpenAI chat-completions API on 127.0.0.1. It
// serves POST {URL}/v1/chat/completions and POST {URL}/chat/completions, so
// configure the client with BaseURL() (URL + "/v1", like
// https://api.openai.com/v1) or with URL itself.
type OpenAIServer struct {
	*httptest.Server

	t       testing.TB
	handler func(OpenAIRequest) OpenAIReply

	mu       sync.Mutex
	requests []OpenAIRequest
	nextID   int
}

// NewOpenAIServer starts a fake answering each request with handler's reply
// and closes it when the test ends. handler runs on the server's goroutine:
// it may call t.Errorf but not t.Fatal. A nil handler answers "ok".
func NewOpenAIServer(t testing.TB, handler func(req OpenAIRequest) OpenAIReply) *OpenAIServer {
	t.Helper()
	if handler == nil {
		handler = func(OpenAIRequest) OpenAIReply { return TextReply("ok") }
	}
	s := &OpenAIServer{t: t, handler: handler}
	s.Server = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.Close)
	return s
}

// BaseURL is the base URL to configure: URL + "/v1".
func (s *OpenAIServer) BaseURL() string { return s.URL + "/v1" }

// Requests returns the requests received so far, in order.
func (s *OpenAIServer) Requests() []OpenAIRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]OpenAIRequest(nil), s.requests...)
}

func (s *OpenAIServer) serve(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || (r.URL.Path != "/v1/chat/completions" && r.URL.Path != "/chat/completions") {
		s.t.Errorf("modeltest: openai fake: unexpected %s %s", r.Method, r.URL.Path)
		writeOpenAIError(w, http.StatusNotFound, "modeltest: no such endpoint "+r.URL.Path)
		return
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		writeOpenAIError(w, http.StatusBadRequest, "modeltest: read body: "+err.Error())
		return
	}
	req, err := decodeOpenAIRequest(body)
	if err != nil {
		s.t.Errorf("modeltest: openai fake: %v", err)
		writeOpenAIError(w, http.StatusBadRequest, "modeltest: "+err.Error())
		return
	}
	req.Path = r.URL.Path
	req.Header = r.Header.Clone()
	req.APIKey, _ = strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")

	s.mu.Lock()
	s.requests = append(s.requests, req)
	s.mu.Unlock()

	reply := s.handler(req)
	for k, vs := range reply.Header {
		for _, v := range vs {
			w.Header().Add(k, v)
		}
	}
	if reply.Status != 0 && reply.Status != http.StatusOK {
		writeOpenAIError(w, reply.Status, reply.ErrorMessage)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	if len(reply.Raw) > 0 {
		_, _ = w.Write(reply.Raw)
		return
	}
	_ = json.NewEncoder(w).Encode(s.completion(req.Model, reply))
}

func (s *OpenAIServer) completion(model string, reply OpenAIReply) map[string]any {
	msg := map[string]any{"role": "assistant", "content": nil, "refusal": nil}
	if reply.Text != "" {
		msg["content"] = reply.Text
	}
	finish := reply.FinishReason
	if len(reply.ToolCalls) > 0 {
		calls := make([]map[string]any, 0, len(reply.ToolCalls))
		s.mu.Lock()
		for _, c := range reply.ToolCalls {
			call := map[string]any{
				"type":     "function",
				"function": map[string]any{"name": c.Name, "arguments": c.Arguments},
			}
			if !reply.OmitIDs {
				if c.ID == "" {
					s.nextID++
					c.ID = fmt.Sprintf("call_%d", s.nextID)
				}
				call["id"] = c.ID
			}
			calls = append(calls, call)
		}
		s.mu.Unlock()
		msg["tool_calls"] = calls
		if finish == "" {
			finish = "tool_calls"
		}
	}
	if finish == "" {
		finish = "stop"
	}
	s.mu.Lock()
	s.nextID++
	id := fmt.Sprintf("chatcmpl-fake-%d", s.nextID)
	s.mu.Unlock()
	return map[string]any{
		"id":      id,
		"object":  "chat.completion",
		"created": time.Now().Unix(),
		"model":   model,
		"choices": []any{map[string]any{
			"index":         0,
			"message":       msg,
			"logprobs":      nil,
			"finish_reason": finish,
		}},
		"usage": map[string]any{"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0},
	}
}

func writeOpenAIError(w http.ResponseWriter, status int, message string) {
	if message == "" {
		message = http.StatusText(status)
	}
	typ := "invalid_request_error"
	switch {
	case status == http.StatusTooManyRequests:
		typ = "rate_limit_error"
	case status >= 500:
		typ = "server_error"
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{
		"error": map[string]any{"message": message, "type": typ, "param": nil, "code": nil},
	})
}

type wireRequest struct {
	Model    string `json:"model"`
	Messages []struct {
		Role       string          `json:"role"`
		Content    json.RawMessage `json:"content"`
		ToolCallID string          `json:"tool_call_id"`
		ToolCalls  []struct {
			ID       string `json:"id"`
			Type     string `json:"type"`
			Function struct {
				Name      string `json:"name"`
				Arguments string `json:"arguments"`
			} `json:"function"`
		} `json:"tool_calls"`
	} `json:"messages"`
	Tools []struct {
		Type     string `json:"type"`
		Function struct {
			Name        string          `json:"name"`
			Description string          `json:"description"`
			Parameters  json.RawMessage `json:"parameters"`
		} `json:"function"`
	} `json:"tools"`
}

func decodeOpenAIRequest(body []byte) (OpenAIRequest, error) {
	var w wireRequest
	if err := json.Unmarshal(body, &w); err != nil {
		return OpenAIRequest{}, fmt.Errorf("decode request: %w", err)
	}
	req := OpenAIRequest{Body: body, Model: w.Model}
	for i, m := range w.Messages {
		content, err := decodeContent(m.Content)
		if err != nil {
			return OpenAIRequest{}, fmt.Errorf("message %d: %w", i, err)
		}
		msg := OpenAIMessage{Role: m.Role, Content: content, ToolCallID: m.ToolCallID}
		for _, c := range m.ToolCalls {
			msg.ToolCalls = append(msg.ToolCalls, OpenAIToolCall{ID: c.ID, Name: c.Function.Name, Arguments: c.Function.Arguments})
		}
		req.Messages = append(req.Messages, msg)
	}
	for _, t := range w.Tools {
		req.Tools = append(req.Tools, OpenAITool{Name: t.Function.Name, Description: t.Function.Description, Parameters: t.Function.Parameters})
	}
	return req, nil
}

// decodeContent reads string, null or text-part array content.
func decodeContent(raw json.RawMessage) (string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return "", nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		return s, nil
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if err := json.Unmarshal(raw, &parts); err != nil {
		return "", fmt.Errorf("content is neither a string nor parts: %s", raw)
	}
	var b strings.Builder
	for _, p := range parts {
		b.WriteString(p.Text)
	}
	return b.String(), nil
}
