// Package gemini is the model.Provider for Google's Gemini API
// (generateContent, API version v1beta), built on google.golang.org/genai.
// It keeps each reply's Content verbatim so thought signatures go back to
// the model unchanged.
package gemini

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"google.golang.org/genai"

	"github.com/airlockhq/airlock/confirm"
	"github.com/airlockhq/airlock/model"
)

// Name is the provider name stored in model.Message.Provider.
const Name = "gemini"

// DefaultBaseURL is the Gemini API endpoint used when Config.BaseURL is empty.
const DefaultBaseURL = "https://generativelanguage.googleapis.com/"

// APIVersion is the API version in the request path.
const APIVersion = "v1beta"

// Config configures a Provider. Only what is set here is used: the
// GOOGLE_API_KEY, GEMINI_API_KEY, GOOGLE_GEMINI_BASE_URL and
// GOOGLE_GENAI_USE_VERTEXAI environment variables have no effect.
type Config struct {
	APIKey  string // required
	BaseURL string // default DefaultBaseURL; requests go to {BaseURL}/v1beta/models/{Model}:generateContent
	Model   string // required, e.g. "gemini-2.5-flash"
	// HTTPClient sends the requests; nil means a new http.Client.
	HTTPClient *http.Client
}

// Provider generates messages with a Gemini model.
type Provider struct {
	client *genai.Client
	model  string
}

var _ model.Provider = (*Provider)(nil)

// New returns a Provider for cfg.
func New(ctx context.Context, cfg Config) (*Provider, error) {
	if cfg.APIKey == "" {
		return nil, errors.New("gemini: api key is required")
	}
	if cfg.Model == "" {
		return nil, errors.New("gemini: model is required")
	}
	base := cmp.Or(cfg.BaseURL, DefaultBaseURL)
	hc := cmp.Or(cfg.HTTPClient, &http.Client{})
	// Backend, key and base URL are all explicit, so genai.NewClient never
	// falls back to its environment variables for them. HTTPOptions has no
	// RetryOptions, so genai tries each request once: the one retry layer
	// is model.WithRetryPolicy, which honours the RetryInfo mapError reads.
	client, err := genai.NewClient(ctx, &genai.ClientConfig{
		Backend:    genai.BackendGeminiAPI,
		APIKey:     cfg.APIKey,
		HTTPClient: hc,
		HTTPOptions: genai.HTTPOptions{
			BaseURL:    base,
			APIVersion: APIVersion,
		},
	})
	if err != nil {
		return nil, fmt.Errorf("gemini: new client: %w", err)
	}
	return &Provider{client: client, model: cfg.Model}, nil
}

// Generate sends req and returns the model's reply, in one try (wrap the
// Provider in model.WithRetryPolicy). API errors come back as
// *model.APIError, with RetryAfter from Gemini's RetryInfo.
func (p *Provider) Generate(ctx context.Context, req model.Request) (model.Message, error) {
	contents, err := toContents(req.Messages)
	if err != nil {
		return model.Message{}, err
	}
	cfg, err := toConfig(req)
	if err != nil {
		return model.Message{}, err
	}
	resp, err := p.client.Models.GenerateContent(ctx, p.model, contents, cfg)
	if err != nil {
		return model.Message{}, mapError(err)
	}
	return fromResponse(resp)
}

// mapError turns an API error into a *model.APIError. genai.APIError has
// no response headers (no Retry-After), but Gemini puts the wait in the
// error's details, as a google.rpc.RetryInfo:
//
//	{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "33s"}
//
// which becomes APIError.RetryAfter. A google.rpc.QuotaFailure naming a
// per-day quota (quotaId "...PerDay...") sets NoRetry: no wait within a
// turn outlasts it.
func mapError(err error) error {
	var ae genai.APIError
	if errors.As(err, &ae) {
		msg := ae.Message
		if msg == "" {
			msg = ae.Status
		}
		d, _ := retryDelay(ae.Details)
		return fmt.Errorf("gemini: %w", &model.APIError{Status: ae.Code, Message: msg, RetryAfter: d, NoRetry: dailyQuota(ae.Details)})
	}
	return fmt.Errorf("gemini: generate: %w", err)
}

const (
	retryInfoType    = "type.googleapis.com/google.rpc.RetryInfo"
	quotaFailureType = "type.googleapis.com/google.rpc.QuotaFailure"
)

// retryDelay reads the retryDelay of a RetryInfo detail: a protobuf
// Duration in JSON, decimal seconds with an "s" suffix ("33s", "1.5s").
func retryDelay(details []map[string]any) (time.Duration, bool) {
	for _, d := range details {
		if d["@type"] != retryInfoType {
			continue
		}
		s, _ := d["retryDelay"].(string)
		secs, ok := strings.CutSuffix(strings.TrimSpace(s), "s")
		if !ok {
			continue
		}
		f, err := strconv.ParseFloat(secs, 64)
		if err != nil || f < 0 || f > (24*time.Hour).Seconds() {
			continue
		}
		return time.Duration(f * float64(time.Second)), true
	}
	return 0, false
}

// dailyQuota reports whether a QuotaFailure detail names a per-day quota.
func dailyQuota(details []map[string]any) bool {
	for _, d := range details {
		if d["@type"] != quotaFailureType {
			continue
		}
		vs, _ := d["violations"].([]any)
		for _, v := range vs {
			m, _ := v.(map[string]any)
			if id, _ := m["quotaId"].(string); strings.Contains(id, "PerDay") {
				return true
			}
		}
	}
	return false
}

func toConfig(req model.Request) (*genai.GenerateContentConfig, error) {
	cfg := &genai.GenerateContentConfig{}
	if req.System != "" {
		cfg.SystemInstruction = &genai.Content{Role: genai.RoleUser, Parts: []*genai.Part{{Text: req.System}}}
	}
	if len(req.Tools) > 0 {
		decls := make([]*genai.FunctionDeclaration, 0, len(req.Tools))
		for _, t := range req.Tools {
			d := &genai.FunctionDeclaration{Name: t.Name, Description: t.Description}
			if len(t.Parameters) > 0 {
				if !json.Valid(t.Parameters) {
					return nil, fmt.Errorf("gemini: tool %q: parameters are not valid json", t.Name)
				}
				d.ParametersJsonSchema = t.Parameters
			}
			decls = append(decls, d)
		}
		cfg.Tools = []*genai.Tool{{FunctionDeclarations: decls}}
	}
	return cfg, nil
}

// toContents maps the conversation to Gemini contents.
func toContents(msgs []model.Message) ([]*genai.Content, error) {
	out := make([]*genai.Content, 0, len(msgs))
	for i, m := range msgs {
		switch m.Role {
		case model.RoleUser:
			out = append(out, &genai.Content{Role: genai.RoleUser, Parts: []*genai.Part{{Text: m.Text}}})
		case model.RoleAssistant:
			c, err := assistantContent(m)
			if err != nil {
				return nil, fmt.Errorf("gemini: message %d: %w", i, err)
			}
			if c != nil {
				out = append(out, c)
			}
		case model.RoleTool:
			parts := make([]*genai.Part, 0, len(m.Results))
			for _, r := range m.Results {
				resp := map[string]any{"output": r.Content}
				if r.IsError {
					resp = map[string]any{"error": r.Content}
				}
				parts = append(parts, &genai.Part{FunctionResponse: &genai.FunctionResponse{
					ID:       r.CallID,
					Name:     r.Name,
					Response: resp,
				}})
			}
			if len(parts) > 0 {
				out = append(out, &genai.Content{Role: genai.RoleUser, Parts: parts})
			}
		default:
			return nil, fmt.Errorf("gemini: message %d: unknown role %q", i, m.Role)
		}
	}
	return out, nil
}

// assistantContent returns the stored Content of a Gemini reply verbatim,
// or builds one from the message's text and calls. It returns nil for an
// empty message, which Gemini would reject.
func assistantContent(m model.Message) (*genai.Content, error) {
	if m.Provider == Name && len(m.Raw) > 0 {
		var c genai.Content
		if err := json.Unmarshal(m.Raw, &c); err != nil {
			return nil, fmt.Errorf("decode raw content: %w", err)
		}
		if c.Role == "" {
			c.Role = genai.RoleModel
		}
		return &c, nil
	}
	var parts []*genai.Part
	if m.Text != "" {
		parts = append(parts, &genai.Part{Text: m.Text})
	}
	for _, call := range m.ToolCalls {
		parts = append(parts, &genai.Part{FunctionCall: &genai.FunctionCall{
			ID:   call.ID,
			Name: call.Name,
			Args: argsMap(call.Args),
		}})
	}
	if len(parts) == 0 {
		return nil, nil
	}
	return &genai.Content{Role: genai.RoleModel, Parts: parts}, nil
}

// argsMap decodes call arguments for Gemini, which needs a JSON object.
// Arguments that are not an object (possible when the conversation began
// with another provider) are passed on under "arguments" rather than lost.
func argsMap(args json.RawMessage) map[string]any {
	if len(args) == 0 || string(args) == "null" {
		return nil
	}
	var m map[string]any
	if err := json.Unmarshal(args, &m); err == nil {
		return m
	}
	return map[string]any{"arguments": string(args)}
}

func fromResponse(resp *genai.GenerateContentResponse) (model.Message, error) {
	if resp == nil || len(resp.Candidates) == 0 || resp.Candidates[0] == nil {
		if resp != nil && resp.PromptFeedback != nil && resp.PromptFeedback.BlockReason != "" {
			return model.Message{}, fmt.Errorf("gemini: prompt blocked: %s", resp.PromptFeedback.BlockReason)
		}
		return model.Message{}, errors.New("gemini: reply has no candidates")
	}
	cand := resp.Candidates[0]
	if cand.Content == nil || len(cand.Content.Parts) == 0 {
		return model.Message{}, fmt.Errorf("gemini: reply has no content (finish reason %s)", finishReason(cand))
	}
	msg := model.Message{Role: model.RoleAssistant, Provider: Name}
	var text strings.Builder
	for _, part := range cand.Content.Parts {
		if part == nil {
			continue
		}
		if part.Text != "" && !part.Thought {
			text.WriteString(part.Text)
		}
		if fc := part.FunctionCall; fc != nil {
			args, err := encodeArgs(fc.Args)
			if err != nil {
				return model.Message{}, fmt.Errorf("gemini: encode args of %q: %w", fc.Name, err)
			}
			msg.ToolCalls = append(msg.ToolCalls, confirm.ToolCall{ID: fc.ID, Name: fc.Name, Args: args})
		}
	}
	msg.Text = text.String()
	if msg.Text == "" && len(msg.ToolCalls) == 0 {
		return model.Message{}, fmt.Errorf("gemini: reply has no text and no function calls (finish reason %s)", finishReason(cand))
	}
	raw, err := json.Marshal(cand.Content)
	if err != nil {
		return model.Message{}, fmt.Errorf("gemini: encode content: %w", err)
	}
	msg.Raw = raw
	return msg, nil
}

// encodeArgs is the one encoding of a call's decoded args kept as its
// Args: "{}" for none, else encoding/json's, without HTML escaping (so
// approvers see "a && b <c>", not "a \u0026\u0026 b \u003cc\u003e") and
// without the encoder's trailing newline.
func encodeArgs(args map[string]any) (json.RawMessage, error) {
	if args == nil {
		return json.RawMessage("{}"), nil
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(args); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

func finishReason(c *genai.Candidate) string {
	if c.FinishReason == "" {
		return "unspecified"
	}
	if c.FinishMessage != "" {
		return string(c.FinishReason) + ": " + c.FinishMessage
	}
	return string(c.FinishReason)
}
