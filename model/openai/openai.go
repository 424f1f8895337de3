// Package openai is the model.Provider for OpenAI-compatible chat
// completions (OpenAI, Ollama, vLLM, ...), built on
// github.com/openai/openai-go/v3.
package openai

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	oai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/param"
	"github.com/openai/openai-go/v3/shared"

	"github.com/airlockhq/airlock/confirm"
	"github.com/airlockhq/airlock/model"
)

// Name is the provider name stored in model.Message.Provider.
const Name = "openai"

// DefaultBaseURL is the API base used when Config.BaseURL is empty.
const DefaultBaseURL = "https://api.openai.com/v1/"

// Config configures a Provider. Only what is set here is used: OPENAI_*
// environment variables (OPENAI_BASE_URL, OPENAI_API_KEY, OPENAI_ORG_ID,
// OPENAI_CUSTOM_HEADERS, ...) have no effect.
type Config struct {
	// APIKey is sent as "Authorization: Bearer <key>"; empty sends none
	// (Ollama, vLLM without a key).
	APIKey string
	// BaseURL is the API base; requests go to {BaseURL}/chat/completions.
	// Default DefaultBaseURL; for Ollama e.g. "http://localhost:11434/v1".
	BaseURL string
	Model   string // required
	// HTTPClient sends the requests; nil means a new http.Client.
	HTTPClient *http.Client
}

// Provider generates messages with a chat-completions model.
type Provider struct {
	chat  oai.ChatCompletionService
	model string
}

var _ model.Provider = (*Provider)(nil)

// New returns a Provider for cfg.
func New(cfg Config) (*Provider, error) {
	if cfg.Model == "" {
		return nil, errors.New("openai: model is required")
	}
	base := cmp.Or(cfg.BaseURL, DefaultBaseURL)
	hc := cmp.Or(cfg.HTTPClient, &http.Client{})
	opts := []option.RequestOption{
		option.WithBaseURL(base),
		option.WithHTTPClient(hc),
		// One retry layer: model.WithRetryPolicy, which honours the
		// Retry-After this package reads into model.APIError.
		option.WithMaxRetries(0),
	}
	if cfg.APIKey != "" {
		opts = append(opts, option.WithAPIKey(cfg.APIKey))
	}
	// The service is built directly, not through oai.NewClient, whose
	// DefaultClientOptions read OPENAI_* environment variables.
	return &Provider{chat: oai.NewChatCompletionService(opts...), model: cfg.Model}, nil
}

// Generate sends req and returns the model's first choice, in one try (the
// client's own retries are off; wrap the Provider in
// model.WithRetryPolicy). API errors come back as *model.APIError, with
// RetryAfter and NoRetry from the response's headers.
func (p *Provider) Generate(ctx context.Context, req model.Request) (model.Message, error) {
	params, err := toParams(p.model, req)
	if err != nil {
		return model.Message{}, err
	}
	resp, err := p.chat.New(ctx, params)
	if err != nil {
		return model.Message{}, mapError(err)
	}
	return fromResponse(resp)
}

// mapError turns an API error into a *model.APIError carrying the wait
// the server asked for (Retry-After, retry-after-ms) and whether it said a
// retry cannot help (x-should-retry: false, or the insufficient_quota 429
// of an account out of credit, which no wait mends).
func mapError(err error) error {
	var oe *oai.Error
	if errors.As(err, &oe) {
		msg := oe.Message
		if msg == "" {
			msg = http.StatusText(oe.StatusCode)
		}
		ae := &model.APIError{Status: oe.StatusCode, Message: msg, NoRetry: oe.Code == "insufficient_quota"}
		if oe.Response != nil {
			ae.RetryAfter, _ = model.ParseRetryAfter(oe.Response.Header, time.Now())
			if strings.EqualFold(oe.Response.Header.Get("X-Should-Retry"), "false") {
				ae.NoRetry = true
			}
		}
		return fmt.Errorf("openai: %w", ae)
	}
	return fmt.Errorf("openai: chat completion: %w", err)
}

func toParams(modelName string, req model.Request) (oai.ChatCompletionNewParams, error) {
	params := oai.ChatCompletionNewParams{Model: shared.ChatModel(modelName)}
	if req.System != "" {
		params.Messages = append(params.Messages, oai.SystemMessage(req.System))
	}
	for i, m := range req.Messages {
		switch m.Role {
		case model.RoleUser:
			params.Messages = append(params.Messages, oai.UserMessage(m.Text))
		case model.RoleAssistant:
			params.Messages = append(params.Messages, assistantMessage(m))
		case model.RoleTool:
			for _, r := range m.Results {
				content := r.Content
				if r.IsError {
					content = "Error: " + content
				}
				params.Messages = append(params.Messages, oai.ToolMessage(content, resultID(r)))
			}
		default:
			return params, fmt.Errorf("openai: message %d: unknown role %q", i, m.Role)
		}
	}
	for _, t := range req.Tools {
		def := shared.FunctionDefinitionParam{Name: t.Name}
		if t.Description != "" {
			def.Description = param.NewOpt(t.Description)
		}
		if len(t.Parameters) > 0 {
			var schema map[string]any
			if err := json.Unmarshal(t.Parameters, &schema); err != nil {
				return params, fmt.Errorf("openai: tool %q: parameters: %w", t.Name, err)
			}
			def.Parameters = schema
		}
		params.Tools = append(params.Tools, oai.ChatCompletionFunctionTool(def))
	}
	return params, nil
}

// assistantMessage rebuilds an assistant message from its text and calls.
// Raw is not sent back: a reply carries response-only fields that some
// compatible servers reject in a request. Only the calls' arguments strings
// are taken from it (sentArguments).
func assistantMessage(m model.Message) oai.ChatCompletionMessageParamUnion {
	var a oai.ChatCompletionAssistantMessageParam
	if m.Text != "" || len(m.ToolCalls) == 0 {
		a.Content.OfString = param.NewOpt(m.Text)
	}
	keys := confirm.Keys(m.ToolCalls)
	sent := sentArguments(m)
	for i, c := range m.ToolCalls {
		id := c.ID
		if id == "" {
			id = fallbackID(keys[i])
		}
		args := string(c.Args)
		if len(c.Args) == 0 || args == "null" {
			args = "{}"
		}
		if sent[i] != "" {
			args = sent[i]
		}
		a.ToolCalls = append(a.ToolCalls, oai.ChatCompletionMessageToolCallUnionParam{
			OfFunction: &oai.ChatCompletionMessageFunctionToolCallParam{
				ID:       id,
				Function: oai.ChatCompletionMessageFunctionToolCallFunctionParam{Name: c.Name, Arguments: args},
			},
		})
	}
	return oai.ChatCompletionMessageParamUnion{OfAssistant: &a}
}

// sentArguments returns, for each call of an OpenAI reply, the arguments
// string exactly as the server sent it, taken from Raw; "" where Raw has
// none that matches the call. Args alone cannot give it back once the
// message has been stored: encoding/json compacts a json.RawMessage and
// escapes <, > and & in it, and arguments that are not JSON are kept in
// Args as a JSON string. Raw keeps them as string values, which survive.
// A Raw call is used only when its id and name are the call's and its
// arguments read as the call's Args (up to that re-encoding).
func sentArguments(m model.Message) []string {
	out := make([]string, len(m.ToolCalls))
	if m.Provider != Name || len(m.Raw) == 0 {
		return out
	}
	var raw struct {
		ToolCalls []struct {
			ID       string `json:"id"`
			Function struct {
				Name      string `json:"name"`
				Arguments string `json:"arguments"`
			} `json:"function"`
		} `json:"tool_calls"`
	}
	if err := json.Unmarshal(m.Raw, &raw); err != nil || len(raw.ToolCalls) != len(m.ToolCalls) {
		return out
	}
	for i, rc := range raw.ToolCalls {
		c := m.ToolCalls[i]
		s := rc.Function.Arguments
		if rc.ID == c.ID && rc.Function.Name == c.Name && strings.TrimSpace(s) != "" && sameJSON(args(s), c.Args) {
			out[i] = s
		}
	}
	return out
}

// sameJSON reports whether a and b are the same JSON text once compacted
// and HTML-escaped, which is all json.Marshal changes in a json.RawMessage.
func sameJSON(a, b []byte) bool {
	ca, okA := canonical(a)
	cb, okB := canonical(b)
	return okA && okB && bytes.Equal(ca, cb)
}

func canonical(b []byte) ([]byte, bool) {
	var compact, escaped bytes.Buffer
	if err := json.Compact(&compact, b); err != nil {
		return nil, false
	}
	json.HTMLEscape(&escaped, compact.Bytes())
	return escaped.Bytes(), true
}

// resultID is the tool_call_id answering a call: the model's id, or the
// same stand-in assistantMessage gave a call without one.
func resultID(r model.ToolResult) string {
	if r.CallID != "" {
		return r.CallID
	}
	if strings.HasPrefix(r.Key, confirm.PositionKeyPrefix) {
		return fallbackID(r.Key)
	}
	return r.Key
}

// fallbackID is the id sent for a call the model gave no id (a position
// key "#N"; a conversation begun with Gemini, say).
func fallbackID(key string) string {
	return "call_airlock_" + strings.TrimPrefix(key, confirm.PositionKeyPrefix)
}

func fromResponse(resp *oai.ChatCompletion) (model.Message, error) {
	if resp == nil || len(resp.Choices) == 0 {
		return model.Message{}, errors.New("openai: reply has no choices")
	}
	choice := resp.Choices[0]
	m := choice.Message
	msg := model.Message{Role: model.RoleAssistant, Text: m.Content, Provider: Name}
	if msg.Text == "" && m.Refusal != "" {
		msg.Text = m.Refusal
	}
	for _, tc := range m.ToolCalls {
		if tc.Type != "" && tc.Type != "function" {
			return model.Message{}, fmt.Errorf("openai: tool call %q of unsupported type %q", tc.ID, tc.Type)
		}
		msg.ToolCalls = append(msg.ToolCalls, confirm.ToolCall{
			ID:   tc.ID,
			Name: tc.Function.Name,
			Args: args(tc.Function.Arguments),
		})
	}
	if msg.Text == "" && len(msg.ToolCalls) == 0 {
		return model.Message{}, fmt.Errorf("openai: reply has no text and no tool calls (finish reason %q)", choice.FinishReason)
	}
	if raw := m.RawJSON(); raw != "" {
		msg.Raw = json.RawMessage(raw)
	} else {
		raw, err := json.Marshal(m)
		if err != nil {
			return model.Message{}, fmt.Errorf("openai: encode message: %w", err)
		}
		msg.Raw = raw
	}
	return msg, nil
}

// args keeps the model's argument bytes exactly, as long as they are JSON
// (confirm.ToolCall.Args must be, to be stored). An empty string becomes
// "{}"; text that is not JSON is kept as a JSON string (<, > and & not
// escaped), which argument validation then rejects. Either way the exact
// text goes back to the server in the history (sentArguments).
func args(s string) json.RawMessage {
	if strings.TrimSpace(s) == "" {
		return json.RawMessage("{}")
	}
	if json.Valid([]byte(s)) {
		return json.RawMessage(s)
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s) // a string always encodes
	return bytes.TrimSuffix(b.Bytes(), []byte("\n"))
}
