package gemini_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"reflect"
	"strings"
	"testing"

	"github.com/airlockhq/airlock/confirm"
	"github.com/airlockhq/airlock/model"
	"github.com/airlockhq/airlock/model/gemini"
	"github.com/airlockhq/airlock/model/modeltest"
)

const (
	testKey   = "test-key"
	testModel = "gemini-test"
	wantPath  = "/v1beta/models/" + testModel + ":generateContent"
)

type (
	answer   = modeltest.GeminiReply
	received = modeltest.GeminiRequest
)

// fakeGemini answers generateContent requests with queued answers.
type fakeGemini struct{ *modeltest.GeminiServer }

func newFake(t *testing.T, answers ...answer) fakeGemini {
	t.Helper()
	return fakeGemini{modeltest.NewGeminiServer(t, modeltest.GeminiQueue(answers...))}
}

func (f fakeGemini) requests() []received { return f.Requests() }

func (f fakeGemini) provider(t *testing.T) *gemini.Provider {
	t.Helper()
	p, err := gemini.New(context.Background(), gemini.Config{APIKey: testKey, BaseURL: f.URL, Model: testModel, HTTPClient: f.Client()})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// reply wraps a candidate content in a generateContent response.
func reply(content string) answer { return modeltest.GeminiContentReply(content) }

func checkRequest(t *testing.T, r received) {
	t.Helper()
	if r.Method != http.MethodPost || r.Path != wantPath {
		t.Errorf("request %s %s, want POST %s", r.Method, r.Path, wantPath)
	}
	if got := r.Header.Get("x-goog-api-key"); got != testKey && !strings.Contains(r.Query, "key="+testKey) {
		t.Errorf("api key header %q, query %q; want %q", got, r.Query, testKey)
	}
}

// get walks a decoded JSON value: string keys index objects, ints arrays.
func get(t *testing.T, v any, path ...any) any {
	t.Helper()
	for _, p := range path {
		switch k := p.(type) {
		case string:
			m, ok := v.(map[string]any)
			if !ok {
				t.Fatalf("at %v: %T is not an object", path, v)
			}
			v = m[k]
		case int:
			a, ok := v.([]any)
			if !ok || k >= len(a) {
				t.Fatalf("at %v: %v is not an array with index %d", path, v, k)
			}
			v = a[k]
		}
	}
	return v
}

func TestTextReply(t *testing.T) {
	f := newFake(t, reply(`{"role":"model","parts":[{"text":"let me think","thought":true},{"text":"Hello, "},{"text":"world."}]}`))
	p := f.provider(t)
	schema := `{"type":"object","properties":{"env":{"type":"string"}},"required":["env"]}`
	msg, err := p.Generate(context.Background(), model.Request{
		System:   "You are Airlock.",
		Messages: []model.Message{{Role: model.RoleUser, Author: "U1", Text: "hi"}},
		Tools:    []model.ToolSpec{{Name: "deploy", Description: "Deploy it.", Parameters: json.RawMessage(schema)}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if msg.Role != model.RoleAssistant || msg.Text != "Hello, world." || len(msg.ToolCalls) != 0 || msg.Provider != "gemini" {
		t.Fatalf("message %+v", msg)
	}
	if len(msg.Raw) == 0 {
		t.Fatal("raw not kept")
	}
	reqs := f.requests()
	if len(reqs) != 1 {
		t.Fatalf("%d requests, want 1", len(reqs))
	}
	r := reqs[0]
	checkRequest(t, r)
	if got := get(t, r.Body, "contents", 0, "role"); got != "user" {
		t.Errorf("role %v", got)
	}
	if got := get(t, r.Body, "contents", 0, "parts", 0, "text"); got != "hi" {
		t.Errorf("user text %v", got)
	}
	if got := get(t, r.Body, "systemInstruction", "parts", 0, "text"); got != "You are Airlock." {
		t.Errorf("system %v", got)
	}
	decl := get(t, r.Body, "tools", 0, "functionDeclarations", 0)
	if get(t, decl, "name") != "deploy" || get(t, decl, "description") != "Deploy it." {
		t.Errorf("declaration %v", decl)
	}
	if got := get(t, decl, "parametersJsonSchema"); !reflect.DeepEqual(got, modeltest.DecodeJSON(t, schema)) {
		t.Errorf("schema %v", got)
	}
}

func TestFunctionCalls(t *testing.T) {
	f := newFake(t, reply(`{"role":"model","parts":[
		{"text":"Deploying."},
		{"functionCall":{"id":"call-a","name":"deploy","args":{"env":"prod","replicas":3}}},
		{"functionCall":{"name":"notify","args":{"channel":"#ops"}}},
		{"functionCall":{"name":"status"}}]}`))
	msg := modeltest.Generate(t, f.provider(t), model.Request{Messages: []model.Message{{Role: model.RoleUser, Text: "ship it"}}})
	if msg.Text != "Deploying." {
		t.Errorf("text %q", msg.Text)
	}
	want := []confirm.ToolCall{
		{ID: "call-a", Name: "deploy", Args: json.RawMessage(`{"env":"prod","replicas":3}`)},
		{Name: "notify", Args: json.RawMessage(`{"channel":"#ops"}`)},
		{Name: "status", Args: json.RawMessage(`{}`)},
	}
	if len(msg.ToolCalls) != len(want) {
		t.Fatalf("calls %+v", msg.ToolCalls)
	}
	for i, c := range msg.ToolCalls {
		if c.ID != want[i].ID || c.Name != want[i].Name || string(c.Args) != string(want[i].Args) {
			t.Errorf("call %d: %s %s %s, want %s %s %s", i, c.ID, c.Name, c.Args, want[i].ID, want[i].Name, want[i].Args)
		}
	}
	if keys := confirm.Keys(msg.ToolCalls); !reflect.DeepEqual(keys, []string{"call-a", "#1", "#2"}) {
		t.Errorf("keys %v", keys)
	}
}

// Args are one encoding of the call's args without HTML escaping, and the
// args sent back are the same object: from Raw as the reply came, after
// storage as JSON, and rebuilt from Args when there is no Raw.
func TestFunctionCallArgsNotEscaped(t *testing.T) {
	const args = `{"cmd":"a && b <c>"}`
	done := reply(`{"role":"model","parts":[{"text":"Done."}]}`)
	f := newFake(t, reply(`{"role":"model","parts":[{"functionCall":{"id":"c1","name":"run","args":{"cmd": "a && b <c>"}}}]}`), done, done, done)
	p := f.provider(t)
	user := model.Message{Role: model.RoleUser, Text: "run it"}
	first := modeltest.Generate(t, p, model.Request{Messages: []model.Message{user}})
	if len(first.ToolCalls) != 1 {
		t.Fatalf("calls %+v", first.ToolCalls)
	}
	if got := string(first.ToolCalls[0].Args); got != args {
		t.Errorf("args %s, want %s", got, args)
	}
	loaded := modeltest.StoredCopy(t, first)
	rebuilt := first
	rebuilt.Raw = nil
	results := model.Message{Role: model.RoleTool, Results: []model.ToolResult{{CallID: "c1", Key: "c1", Name: "run", Content: "ok"}}}
	sentBack := []struct {
		name string
		msg  model.Message
	}{{"fresh", first}, {"stored", loaded}, {"rebuilt", rebuilt}}
	for _, s := range sentBack {
		if _, err := p.Generate(context.Background(), model.Request{Messages: []model.Message{user, s.msg, results}}); err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
	}
	reqs := f.requests()
	if len(reqs) != 1+len(sentBack) {
		t.Fatalf("%d requests", len(reqs))
	}
	for i, s := range sentBack {
		call := get(t, reqs[1+i].Body, "contents", 1, "parts", 0, "functionCall")
		if get(t, call, "id") != "c1" || get(t, call, "name") != "run" {
			t.Errorf("%s: call %v", s.name, call)
		}
		if got := get(t, call, "args"); !reflect.DeepEqual(got, modeltest.DecodeJSON(t, args)) {
			t.Errorf("%s: args sent back %v, want %s", s.name, got, args)
		}
	}
}

func TestThoughtSignatureRoundTrip(t *testing.T) {
	content := `{"role":"model","parts":[
		{"text":"I should check first.","thought":true,"thoughtSignature":"dGhvdWdodC1zaWc="},
		{"functionCall":{"name":"status","args":{"env":"prod","deep":{"n":1.5,"list":[1,"two",null,true]}}},"thoughtSignature":"Y2FsbC1zaWctMQ=="},
		{"functionCall":{"id":"c2","name":"deploy","args":{"env":"prod"}}}]}`
	f := newFake(t, reply(content), reply(`{"role":"model","parts":[{"text":"Done."}]}`))
	p := f.provider(t)
	user := model.Message{Role: model.RoleUser, Text: "deploy prod"}
	first := modeltest.Generate(t, p, model.Request{Messages: []model.Message{user}})
	if first.Text != "" || len(first.ToolCalls) != 2 {
		t.Fatalf("first %+v", first)
	}
	// The message goes through storage as JSON.
	loaded := modeltest.StoredCopy(t, first)
	keys := confirm.Keys(loaded.ToolCalls)
	results := model.Message{Role: model.RoleTool, Results: []model.ToolResult{
		{Key: keys[0], Name: "status", Content: "all green"},
		{CallID: "c2", Key: keys[1], Name: "deploy", Content: "denied", IsError: true},
	}}
	second := modeltest.Generate(t, p, model.Request{Messages: []model.Message{user, loaded, results}})
	if second.Text != "Done." {
		t.Fatalf("second %+v", second)
	}
	reqs := f.requests()
	if len(reqs) != 2 {
		t.Fatalf("%d requests", len(reqs))
	}
	checkRequest(t, reqs[1])
	contents := get(t, reqs[1].Body, "contents").([]any)
	if len(contents) != 3 {
		t.Fatalf("%d contents: %s", len(contents), reqs[1].Raw)
	}
	if got, want := contents[1], modeltest.DecodeJSON(t, content); !reflect.DeepEqual(got, want) {
		gb, _ := json.Marshal(got)
		wb, _ := json.Marshal(want)
		t.Errorf("assistant content sent back changed:\n got %s\nwant %s", gb, wb)
	}
	if get(t, contents[1], "parts", 1, "thoughtSignature") != "Y2FsbC1zaWctMQ==" {
		t.Errorf("thought signature lost: %s", reqs[1].Raw)
	}
	if get(t, contents[2], "role") != "user" {
		t.Errorf("function responses role %v", get(t, contents[2], "role"))
	}
	wantParts := modeltest.DecodeJSON(t, `[
		{"functionResponse":{"name":"status","response":{"output":"all green"}}},
		{"functionResponse":{"id":"c2","name":"deploy","response":{"error":"denied"}}}]`)
	if got := get(t, contents[2], "parts"); !reflect.DeepEqual(got, wantParts) {
		gb, _ := json.Marshal(got)
		t.Errorf("function responses %s", gb)
	}
}

func TestAssistantFromOtherProvider(t *testing.T) {
	f := newFake(t, reply(`{"role":"model","parts":[{"text":"ok"}]}`))
	msgs := []model.Message{
		{Role: model.RoleUser, Text: "go"},
		{Role: model.RoleAssistant, Text: "Calling.", Provider: "openai", Raw: json.RawMessage(`{"role":"assistant"}`), ToolCalls: []confirm.ToolCall{
			{ID: "call_1", Name: "a", Args: json.RawMessage(`{"x":1}`)},
			{Name: "b", Args: json.RawMessage(`{}`)},
		}},
		{Role: model.RoleTool, Results: []model.ToolResult{
			{CallID: "call_1", Key: "call_1", Name: "a", Content: "A"},
			{Key: "#1", Name: "b", Content: "B"},
		}},
	}
	if _, err := f.provider(t).Generate(context.Background(), model.Request{Messages: msgs}); err != nil {
		t.Fatal(err)
	}
	body := f.requests()[0].Body
	want := modeltest.DecodeJSON(t, `{"role":"model","parts":[
		{"text":"Calling."},
		{"functionCall":{"id":"call_1","name":"a","args":{"x":1}}},
		{"functionCall":{"name":"b"}}]}`) // genai omits empty args
	if got := get(t, body, "contents", 1); !reflect.DeepEqual(got, want) {
		gb, _ := json.Marshal(got)
		t.Errorf("assistant content %s", gb)
	}
	wantResp := modeltest.DecodeJSON(t, `{"role":"user","parts":[
		{"functionResponse":{"id":"call_1","name":"a","response":{"output":"A"}}},
		{"functionResponse":{"name":"b","response":{"output":"B"}}}]}`)
	if got := get(t, body, "contents", 2); !reflect.DeepEqual(got, wantResp) {
		gb, _ := json.Marshal(got)
		t.Errorf("responses %s", gb)
	}
}

func TestAPIErrors(t *testing.T) {
	for _, tc := range []struct {
		status    int
		body      string
		retryable bool
	}{
		{429, `{"error":{"code":429,"message":"Resource has been exhausted","status":"RESOURCE_EXHAUSTED"}}`, true},
		{500, `{"error":{"code":500,"message":"Internal error","status":"INTERNAL"}}`, true},
		{503, `{"error":{"code":503,"message":"overloaded","status":"UNAVAILABLE"}}`, true},
		{400, `{"error":{"code":400,"message":"Invalid JSON payload","status":"INVALID_ARGUMENT"}}`, false},
	} {
		f := newFake(t, answer{Status: tc.status, Body: tc.body})
		_, err := f.provider(t).Generate(context.Background(), model.Request{Messages: []model.Message{{Role: model.RoleUser, Text: "hi"}}})
		modeltest.CheckAPIError(t, err, tc.status, func(m string) bool { return m != "" }, tc.retryable, len(f.requests()))
	}
}

func TestEmptyReplies(t *testing.T) {
	for name, a := range map[string]answer{
		"blocked":       {Status: 200, Body: `{"promptFeedback":{"blockReason":"SAFETY"}}`},
		"no candidates": {Status: 200, Body: `{"candidates":[]}`},
		"no content":    {Status: 200, Body: `{"candidates":[{"finishReason":"SAFETY"}]}`},
		"only thoughts": reply(`{"role":"model","parts":[{"text":"hmm","thought":true}]}`),
	} {
		f := newFake(t, a)
		_, err := f.provider(t).Generate(context.Background(), model.Request{Messages: []model.Message{{Role: model.RoleUser, Text: "hi"}}})
		if err == nil {
			t.Errorf("%s: no error", name)
			continue
		}
		if model.Retryable(err) {
			t.Errorf("%s: retryable %v", name, err)
		}
		if name == "blocked" && !strings.Contains(err.Error(), "SAFETY") {
			t.Errorf("%s: %v does not name the reason", name, err)
		}
	}
}

func TestEnvironmentIgnored(t *testing.T) {
	// Every variable the client library would read, set to mislead it.
	for k, v := range map[string]string{
		"GOOGLE_API_KEY":              "env-google-key",
		"GEMINI_API_KEY":              "env-gemini-key",
		"GOOGLE_GENAI_USE_VERTEXAI":   "true",
		"GOOGLE_GENAI_USE_ENTERPRISE": "true",
		"GOOGLE_GEMINI_BASE_URL":      "http://127.0.0.1:1/",
		"GOOGLE_VERTEX_BASE_URL":      "http://127.0.0.1:1/",
		"GOOGLE_CLOUD_PROJECT":        "env-project",
		"GOOGLE_CLOUD_LOCATION":       "us-central1",
	} {
		t.Setenv(k, v)
	}
	f := newFake(t, reply(`{"role":"model","parts":[{"text":"hi"}]}`))
	msg := modeltest.Generate(t, f.provider(t), model.Request{Messages: []model.Message{{Role: model.RoleUser, Text: "hi"}}})
	if msg.Text != "hi" {
		t.Fatalf("text %q", msg.Text)
	}
	r := f.requests()[0]
	checkRequest(t, r)
	if got := r.Header.Get("x-goog-api-key"); got != testKey {
		t.Errorf("api key %q, want the configured one", got)
	}
}

func TestNewNeedsKeyAndModel(t *testing.T) {
	t.Setenv("GOOGLE_API_KEY", "env-google-key")
	if _, err := gemini.New(context.Background(), gemini.Config{Model: "m"}); err == nil {
		t.Error("no error without api key")
	}
	if _, err := gemini.New(context.Background(), gemini.Config{APIKey: "k"}); err == nil {
		t.Error("no error without model")
	}
}

func TestContextCancelled(t *testing.T) {
	f := newFake(t, reply(`{"role":"model","parts":[{"text":"hi"}]}`))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := f.provider(t).Generate(ctx, model.Request{Messages: []model.Message{{Role: model.RoleUser, Text: "hi"}}})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err %v, want context.Canceled", err)
	}
}
