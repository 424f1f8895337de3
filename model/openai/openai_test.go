package openai_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"sync"
	"testing"

	"github.com/airlockhq/airlock/confirm"
	"github.com/airlockhq/airlock/model"
	"github.com/airlockhq/airlock/model/modeltest"
	"github.com/airlockhq/airlock/model/openai"
)

const testKey = "sk-test"

type answer struct {
	status int
	body   string
}

type received struct {
	method string
	path   string
	header http.Header
	body   map[string]any
}

// fakeOpenAI answers chat-completions requests with queued answers.
type fakeOpenAI struct {
	t       *testing.T
	srv     *httptest.Server
	mu      sync.Mutex
	answers []answer
	got     []received
}

func newFake(t *testing.T, answers ...answer) *fakeOpenAI {
	t.Helper()
	f := &fakeOpenAI{t: t, answers: answers}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeOpenAI) serve(w http.ResponseWriter, r *http.Request) {
	raw, err := io.ReadAll(r.Body)
	if err != nil {
		f.t.Errorf("read body: %v", err)
	}
	rec := received{method: r.Method, path: r.URL.Path, header: r.Header.Clone()}
	if err := json.Unmarshal(raw, &rec.body); err != nil {
		f.t.Errorf("request body is not json: %v: %s", err, raw)
	}
	f.mu.Lock()
	f.got = append(f.got, rec)
	a := answer{500, `{"error":{"message":"no answer queued","type":"server_error","param":null,"code":null}}`}
	if len(f.answers) > 0 {
		a, f.answers = f.answers[0], f.answers[1:]
	}
	f.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(a.status)
	_, _ = io.WriteString(w, a.body)
}

func (f *fakeOpenAI) requests() []received {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]received(nil), f.got...)
}

func (f *fakeOpenAI) provider(t *testing.T, key string) *openai.Provider {
	t.Helper()
	p, err := openai.New(openai.Config{APIKey: key, BaseURL: f.srv.URL + "/v1", Model: "gpt-test", HTTPClient: f.srv.Client()})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func completion(message string) answer {
	return answer{200, `{"id":"chatcmpl-1","object":"chat.completion","created":1700000000,"model":"gpt-test","choices":[{"index":0,"message":` +
		message + `,"logprobs":null,"finish_reason":"stop"}],"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}`}
}

func checkRequest(t *testing.T, r received, key string) {
	t.Helper()
	if r.method != http.MethodPost || r.path != "/v1/chat/completions" {
		t.Errorf("request %s %s, want POST /v1/chat/completions", r.method, r.path)
	}
	want := ""
	if key != "" {
		want = "Bearer " + key
	}
	if got := r.header.Get("Authorization"); got != want {
		t.Errorf("Authorization %q, want %q", got, want)
	}
}

func jsonEqual(t *testing.T, what string, got any, want string) {
	t.Helper()
	if w := modeltest.DecodeJSON(t, want); !reflect.DeepEqual(got, w) {
		gb, _ := json.Marshal(got)
		wb, _ := json.Marshal(w)
		t.Errorf("%s:\n got %s\nwant %s", what, gb, wb)
	}
}

func TestToolCallsReply(t *testing.T) {
	message := `{"role":"assistant","content":null,"refusal":null,"annotations":[],"tool_calls":[` +
		`{"id":"call_A","type":"function","function":{"name":"deploy","arguments":"{\"env\": \"prod\",  \"replicas\":3.50}"}},` +
		`{"id":"call_B","type":"function","function":{"name":"notify","arguments":"{}"}}]}`
	f := newFake(t, completion(message))
	msg, err := f.provider(t, testKey).Generate(context.Background(), model.Request{
		Messages: []model.Message{{Role: model.RoleUser, Text: "ship"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if msg.Role != model.RoleAssistant || msg.Text != "" || msg.Provider != "openai" {
		t.Fatalf("message %+v", msg)
	}
	want := []confirm.ToolCall{
		{ID: "call_A", Name: "deploy", Args: json.RawMessage(`{"env": "prod",  "replicas":3.50}`)},
		{ID: "call_B", Name: "notify", Args: json.RawMessage(`{}`)},
	}
	if len(msg.ToolCalls) != 2 {
		t.Fatalf("calls %+v", msg.ToolCalls)
	}
	for i, c := range msg.ToolCalls {
		if c.ID != want[i].ID || c.Name != want[i].Name || string(c.Args) != string(want[i].Args) {
			t.Errorf("call %d: %s %s %s, want %s %s %s", i, c.ID, c.Name, c.Args, want[i].ID, want[i].Name, want[i].Args)
		}
	}
	if string(msg.Raw) != message {
		t.Errorf("raw %s\nwant %s", msg.Raw, message)
	}
	if _, err := json.Marshal(msg); err != nil {
		t.Errorf("message does not encode: %v", err)
	}
	checkRequest(t, f.requests()[0], testKey)
}

func TestOddArguments(t *testing.T) {
	message := `{"role":"assistant","content":"Trying.","tool_calls":[` +
		`{"id":"c1","type":"function","function":{"name":"a","arguments":""}},` +
		`{"id":"c2","type":"function","function":{"name":"b","arguments":"{\"x\": 1"}}]}`
	f := newFake(t, completion(message))
	msg := modeltest.Generate(t, f.provider(t, testKey), model.Request{Messages: []model.Message{{Role: model.RoleUser, Text: "go"}}})
	if msg.Text != "Trying." {
		t.Errorf("text %q", msg.Text)
	}
	if got := string(msg.ToolCalls[0].Args); got != `{}` {
		t.Errorf("empty arguments became %s", got)
	}
	if got := string(msg.ToolCalls[1].Args); got != `"{\"x\": 1"` {
		t.Errorf("broken arguments became %s", got)
	}
	if _, err := json.Marshal(msg); err != nil {
		t.Errorf("message does not encode: %v", err)
	}
}

// Args are the arguments string exactly as the server sent it, and the
// history sends that same string back, also once the message has been
// stored as JSON (which compacts Args and escapes <, > and & in them).
func TestArgumentsExactBytes(t *testing.T) {
	const exact = `{"cmd":  "a && b <c>",   "n": 1}`
	const broken = `{"cmd": "a && b <c>"` // not JSON: validation answers the model
	srv := modeltest.NewOpenAIServer(t, modeltest.OpenAIScript(t,
		modeltest.CallsReply(
			modeltest.OpenAIToolCall{ID: "call_1", Name: "run", Arguments: exact},
			modeltest.OpenAIToolCall{ID: "call_2", Name: "run", Arguments: broken},
		),
		modeltest.TextReply("Done."),
		modeltest.TextReply("Done."),
	))
	p, err := openai.New(openai.Config{BaseURL: srv.BaseURL(), Model: "gpt-fake"})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	user := model.Message{Role: model.RoleUser, Text: "run it"}
	first, err := p.Generate(ctx, model.Request{Messages: []model.Message{user}})
	if err != nil {
		t.Fatal(err)
	}
	if len(first.ToolCalls) != 2 {
		t.Fatalf("calls %+v", first.ToolCalls)
	}
	if got := string(first.ToolCalls[0].Args); got != exact {
		t.Errorf("args %s\nwant %s", got, exact)
	}
	if got, want := string(first.ToolCalls[1].Args), `"{\"cmd\": \"a && b <c>\""`; got != want {
		t.Errorf("broken args %s, want %s", got, want)
	}
	loaded := modeltest.StoredCopy(t, first)
	results := model.Message{Role: model.RoleTool, Results: []model.ToolResult{
		{CallID: "call_1", Key: "call_1", Name: "run", Content: "ok"},
		{CallID: "call_2", Key: "call_2", Name: "run", Content: "invalid arguments", IsError: true},
	}}
	sentBack := []struct {
		name string
		msg  model.Message
	}{{"fresh", first}, {"stored", loaded}}
	for _, s := range sentBack {
		if _, err := p.Generate(ctx, model.Request{Messages: []model.Message{user, s.msg, results}}); err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
	}
	reqs := srv.Requests()
	if len(reqs) != 1+len(sentBack) {
		t.Fatalf("%d requests", len(reqs))
	}
	for i, s := range sentBack {
		m := reqs[1+i].Messages
		if len(m) != 4 || m[1].Role != "assistant" || len(m[1].ToolCalls) != 2 {
			t.Fatalf("%s: messages %+v", s.name, m)
		}
		for j, want := range []string{exact, broken} {
			if got := m[1].ToolCalls[j].Arguments; got != want {
				t.Errorf("%s: call %d arguments sent back %q, want %q", s.name, j, got, want)
			}
		}
	}
}

func TestRequestMapping(t *testing.T) {
	f := newFake(t, completion(`{"role":"assistant","content":"Done."}`))
	schema := `{"type":"object","properties":{"env":{"type":"string"}},"required":["env"]}`
	req := model.Request{
		System: "You are Airlock.",
		Tools:  []model.ToolSpec{{Name: "deploy", Description: "Deploy it.", Parameters: json.RawMessage(schema)}, {Name: "status"}},
		Messages: []model.Message{
			{Role: model.RoleUser, Author: "U1", Text: "deploy prod"},
			{Role: model.RoleAssistant, Text: "On it.", Provider: "openai", Raw: json.RawMessage(`{"role":"assistant"}`), ToolCalls: []confirm.ToolCall{
				{ID: "call_X", Name: "deploy", Args: json.RawMessage(`{"env":"prod"}`)},
				{ID: "call_Y", Name: "status", Args: json.RawMessage(`{ }`)},
			}},
			{Role: model.RoleTool, Results: []model.ToolResult{
				{CallID: "call_X", Key: "call_X", Name: "deploy", Content: "denied by U2", IsError: true},
				{CallID: "call_Y", Key: "call_Y", Name: "status", Content: "green"},
			}},
			// A turn that came from Gemini: calls without ids.
			{Role: model.RoleAssistant, Provider: "gemini", Raw: json.RawMessage(`{"role":"model","parts":[]}`), ToolCalls: []confirm.ToolCall{
				{Name: "status", Args: json.RawMessage(`{"env":"dev"}`)},
				{Name: "status", Args: json.RawMessage(`{"env":"qa"}`)},
			}},
			{Role: model.RoleTool, Results: []model.ToolResult{
				{Key: "#0", Name: "status", Content: "dev ok"},
				{Key: "#1", Name: "status", Content: "qa ok"},
			}},
		},
	}
	msg := modeltest.Generate(t, f.provider(t, testKey), req)
	if msg.Text != "Done." || len(msg.ToolCalls) != 0 {
		t.Fatalf("message %+v", msg)
	}
	r := f.requests()[0]
	checkRequest(t, r, testKey)
	if r.body["model"] != "gpt-test" {
		t.Errorf("model %v", r.body["model"])
	}
	jsonEqual(t, "messages", r.body["messages"], `[
		{"role":"system","content":"You are Airlock."},
		{"role":"user","content":"deploy prod"},
		{"role":"assistant","content":"On it.","tool_calls":[
			{"id":"call_X","type":"function","function":{"name":"deploy","arguments":"{\"env\":\"prod\"}"}},
			{"id":"call_Y","type":"function","function":{"name":"status","arguments":"{ }"}}]},
		{"role":"tool","tool_call_id":"call_X","content":"Error: denied by U2"},
		{"role":"tool","tool_call_id":"call_Y","content":"green"},
		{"role":"assistant","tool_calls":[
			{"id":"call_airlock_0","type":"function","function":{"name":"status","arguments":"{\"env\":\"dev\"}"}},
			{"id":"call_airlock_1","type":"function","function":{"name":"status","arguments":"{\"env\":\"qa\"}"}}]},
		{"role":"tool","tool_call_id":"call_airlock_0","content":"dev ok"},
		{"role":"tool","tool_call_id":"call_airlock_1","content":"qa ok"}]`)
	jsonEqual(t, "tools", r.body["tools"], `[
		{"type":"function","function":{"name":"deploy","description":"Deploy it.","parameters":`+schema+`}},
		{"type":"function","function":{"name":"status"}}]`)
}

func TestEnvironmentIgnored(t *testing.T) {
	// Every variable the client library would read, set to mislead it.
	for k, v := range map[string]string{
		"OPENAI_BASE_URL":       "http://127.0.0.1:1/v1",
		"OPENAI_API_KEY":        "sk-from-env",
		"OPENAI_ADMIN_KEY":      "sk-admin-from-env",
		"OPENAI_ORG_ID":         "org-env",
		"OPENAI_PROJECT_ID":     "proj-env",
		"OPENAI_CUSTOM_HEADERS": "X-From-Env: yes",
	} {
		t.Setenv(k, v)
	}
	f := newFake(t, completion(`{"role":"assistant","content":"hi"}`), completion(`{"role":"assistant","content":"hi"}`))
	if _, err := f.provider(t, testKey).Generate(context.Background(), model.Request{Messages: []model.Message{{Role: model.RoleUser, Text: "hi"}}}); err != nil {
		t.Fatal(err)
	}
	// Without a configured key, none is sent: the env key is not used either.
	if _, err := f.provider(t, "").Generate(context.Background(), model.Request{Messages: []model.Message{{Role: model.RoleUser, Text: "hi"}}}); err != nil {
		t.Fatal(err)
	}
	reqs := f.requests()
	if len(reqs) != 2 {
		t.Fatalf("%d requests reached the configured server, want 2", len(reqs))
	}
	checkRequest(t, reqs[0], testKey)
	checkRequest(t, reqs[1], "")
	for _, r := range reqs {
		for _, h := range []string{"OpenAI-Organization", "OpenAI-Project", "X-From-Env"} {
			if v := r.header.Get(h); v != "" {
				t.Errorf("header %s: %q taken from the environment", h, v)
			}
		}
	}
}

func TestAPIErrors(t *testing.T) {
	for _, tc := range []struct {
		status    int
		retryable bool
	}{
		{429, true},
		{500, true},
		{502, true},
		{400, false},
		{401, false},
	} {
		f := newFake(t, answer{tc.status, `{"error":{"message":"boom","type":"x","param":null,"code":null}}`})
		_, err := f.provider(t, testKey).Generate(context.Background(), model.Request{Messages: []model.Message{{Role: model.RoleUser, Text: "hi"}}})
		modeltest.CheckAPIError(t, err, tc.status, func(m string) bool { return m == "boom" }, tc.retryable, len(f.requests()))
	}
}

func TestEmptyReplies(t *testing.T) {
	for name, a := range map[string]answer{
		"no choices": {200, `{"id":"x","object":"chat.completion","created":1,"model":"m","choices":[]}`},
		"empty":      completion(`{"role":"assistant","content":""}`),
	} {
		f := newFake(t, a)
		_, err := f.provider(t, testKey).Generate(context.Background(), model.Request{Messages: []model.Message{{Role: model.RoleUser, Text: "hi"}}})
		if err == nil || model.Retryable(err) {
			t.Errorf("%s: err %v, want a final error", name, err)
		}
	}
}

func TestNewNeedsModel(t *testing.T) {
	if _, err := openai.New(openai.Config{APIKey: "k"}); err == nil {
		t.Error("no error without model")
	}
}
