package tools

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/airlockhq/airlock/keyerr"
	"github.com/airlockhq/airlock/model"
)

func httpTool(name string) Config {
	return Config{Name: name, HTTP: &HTTPConfig{URL: "http://127.0.0.1:1/x"}}
}

func deploySchema() map[string]any {
	// As the YAML loader decodes it: ints, []any, map[string]any.
	return map[string]any{
		"type": "object",
		"properties": map[string]any{
			"env":   map[string]any{"type": "string", "enum": []any{"staging", "prod"}},
			"count": map[string]any{"type": "integer", "minimum": 1},
			"tags":  map[string]any{"type": "array", "items": map[string]any{"type": "string"}},
			"s":     map[string]any{"type": "string"},
			"meta":  map[string]any{"type": "object"},
		},
		"required":             []any{"env"},
		"additionalProperties": false,
	}
}

func mustNew(t *testing.T, cfgs []Config, opts Options) *Set {
	t.Helper()
	s, err := New(cfgs, opts)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return s
}

func mustGet(t *testing.T, s *Set, name string) Tool {
	t.Helper()
	tool, ok := s.Get(name)
	if !ok {
		t.Fatalf("no tool %q", name)
	}
	return tool
}

func TestConfigErrorsNameTheKey(t *testing.T) {
	ok := httpTool("ok")
	cases := []struct {
		name string
		cfgs []Config
		key  string
		want string // prefix of the whole message
	}{
		{"name required", []Config{{HTTP: ok.HTTP}}, "tools[0].name", "tools[0].name: required"},
		{"name pattern", []Config{ok, {Name: "foo bar", HTTP: ok.HTTP}}, "tools[1].name", `tools[1].name: invalid "foo bar"`},
		{"name too long", []Config{{Name: strings.Repeat("a", 65), HTTP: ok.HTTP}}, "tools[0].name", "tools[0].name: invalid"},
		{"name leading digit", []Config{{Name: "1x", HTTP: ok.HTTP}}, "tools[0].name", "tools[0].name: invalid"},
		{"both executors", []Config{ok, {Name: "b", HTTP: ok.HTTP, Exec: &ExecConfig{Command: []string{"true"}}}}, "tools[1]", "tools[1]: exactly one of http or exec is required"},
		{"no executor", []Config{{Name: "b"}}, "tools[0]", "tools[0]: exactly one of http or exec is required"},
		{"duplicate", []Config{ok, httpTool("deploy"), ok}, "tools[2].name", `tools[2].name: duplicate "ok"`},
		{"bad schema", []Config{{Name: "a", HTTP: ok.HTTP, Parameters: map[string]any{"type": "object", "properties": map[string]any{"n": map[string]any{"type": 5}}}}}, "tools[0].parameters", "tools[0].parameters: invalid JSON Schema: "},
		{"schema not object", []Config{{Name: "a", HTTP: ok.HTTP, Parameters: map[string]any{"type": "string"}}}, "tools[0].parameters", `tools[0].parameters: invalid JSON Schema: type must be "object"`},
		{"schema remote ref", []Config{{Name: "a", HTTP: ok.HTTP, Parameters: map[string]any{"$ref": "https://example.com/s.json"}}}, "tools[0].parameters", "tools[0].parameters: invalid JSON Schema: "},
		{"summary template", []Config{{Name: "a", HTTP: ok.HTTP, Summary: "Deploy {{.env"}}, "tools[0].summary", "tools[0].summary: template: "},
		{"summary unknown func", []Config{{Name: "a", HTTP: ok.HTTP, Summary: "{{shell .x}}"}}, "tools[0].summary", "tools[0].summary: template: "},
		{"confirm_phrase template", []Config{{Name: "a", HTTP: ok.HTTP, ConfirmPhrase: "{{.environment}}/{{.service"}}, "tools[0].confirm_phrase", "tools[0].confirm_phrase: template: "},
		{"url template", []Config{ok, httpTool("b"), {Name: "c", HTTP: &HTTPConfig{URL: "http://h/{{.x"}}}, "tools[2].http.url", "tools[2].http.url: template: "},
		{"url required", []Config{{Name: "a", HTTP: &HTTPConfig{}}}, "tools[0].http.url", "tools[0].http.url: required"},
		{"url templated host", []Config{{Name: "a", HTTP: &HTTPConfig{URL: "https://{{.host}}/x"}}}, "tools[0].http.url", "tools[0].http.url: must start with a literal"},
		{"url templated scheme", []Config{{Name: "a", HTTP: &HTTPConfig{URL: "{{.scheme}}://h/x"}}}, "tools[0].http.url", "tools[0].http.url: must start with a literal"},
		{"url not http", []Config{{Name: "a", HTTP: &HTTPConfig{URL: "file:///etc/passwd"}}}, "tools[0].http.url", "tools[0].http.url: must start with a literal"},
		{"method", []Config{{Name: "a", HTTP: &HTTPConfig{Method: "FETCH", URL: "http://h/"}}}, "tools[0].http.method", `tools[0].http.method: invalid "FETCH"`},
		{"header name", []Config{{Name: "a", HTTP: &HTTPConfig{URL: "http://h/", Headers: map[string]string{"X Bad": "v"}}}}, "tools[0].http.headers", `tools[0].http.headers: invalid name "X Bad"`},
		{"header value", []Config{{Name: "a", HTTP: &HTTPConfig{URL: "http://h/", Headers: map[string]string{"X-A": "v\r\nX-B: w"}}}}, "tools[0].http.headers.X-A", "tools[0].http.headers.X-A: invalid value"},
		{"command required", []Config{{Name: "a", Exec: &ExecConfig{}}}, "tools[0].exec.command", "tools[0].exec.command: required"},
		{"command[0] required", []Config{{Name: "a", Exec: &ExecConfig{Command: []string{""}}}}, "tools[0].exec.command[0]", "tools[0].exec.command[0]: required"},
		{"command[0] templated", []Config{{Name: "a", Exec: &ExecConfig{Command: []string{"{{.prog}}"}}}}, "tools[0].exec.command[0]", "tools[0].exec.command[0]: must be literal"},
		{"command template", []Config{{Name: "a", Exec: &ExecConfig{Command: []string{"echo", "{{if}}"}}}}, "tools[0].exec.command[1]", "tools[0].exec.command[1]: template: "},
		{"timeout", []Config{{Name: "a", Exec: &ExecConfig{Command: []string{"true"}, Timeout: -1}}}, "tools[0].exec.timeout", "tools[0].exec.timeout: must not be negative"},
		{"http timeout", []Config{ok, {Name: "a", HTTP: &HTTPConfig{URL: "http://h/", Timeout: -time.Second}}}, "tools[1].http.timeout", "tools[1].http.timeout: must not be negative"},
		{"env name", []Config{{Name: "a", Exec: &ExecConfig{Command: []string{"true"}, Env: map[string]string{"A=B": "x"}}}}, "tools[0].exec.env", `tools[0].exec.env: invalid name "A=B"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := New(tc.cfgs, Options{})
			if err == nil {
				t.Fatal("New: no error")
			}
			if !strings.HasPrefix(err.Error(), tc.want) {
				t.Errorf("error %q, want prefix %q", err, tc.want)
			}
			var ce *keyerr.Error
			if !errors.As(err, &ce) {
				t.Fatalf("error %T is not a *keyerr.Error", err)
			}
			if ce.Key != tc.key {
				t.Errorf("key %q, want %q", ce.Key, tc.key)
			}
			if strings.Contains(err.Error(), "\n") {
				t.Errorf("error spans lines: %q", err)
			}
		})
	}
}

func TestSet(t *testing.T) {
	s := mustNew(t, []Config{
		{Name: "deploy", Description: "Deploy it", Confirm: true, Parameters: deploySchema(), HTTP: &HTTPConfig{URL: "http://h/"}},
		{Name: "status", Exec: &ExecConfig{Command: []string{"true"}}},
	}, Options{})
	if got := s.Names(); strings.Join(got, ",") != "deploy,status" {
		t.Errorf("Names = %v", got)
	}
	specs := s.Specs()
	if len(specs) != 2 || specs[0].Name != "deploy" || specs[0].Description != "Deploy it" || specs[1].Name != "status" {
		t.Fatalf("Specs = %+v", specs)
	}
	var params map[string]any
	if err := json.Unmarshal(specs[0].Parameters, &params); err != nil || params["additionalProperties"] != false {
		t.Errorf("deploy parameters %s (%v)", specs[0].Parameters, err)
	}
	if string(specs[1].Parameters) != `{"type":"object"}` {
		t.Errorf("default parameters %s", specs[1].Parameters)
	}
	if info, ok := s.Info("deploy"); !ok || !info.Confirm || info.Name != "deploy" {
		t.Errorf("Info(deploy) = %+v, %v", info, ok)
	}
	if _, ok := s.Get("nope"); ok || s.Has("nope") {
		t.Error("Get(nope) found a tool")
	}

	if err := s.Add(fakeTool{name: "deploy"}); err == nil || !strings.Contains(err.Error(), `duplicate "deploy"`) {
		t.Errorf("Add duplicate: %v", err)
	}
	if err := s.Add(fakeTool{name: "bad name"}); err == nil {
		t.Error("Add bad name: no error")
	}
	if err := s.Add(fakeTool{name: "remember"}); err != nil {
		t.Fatalf("Add: %v", err)
	}
	if got := s.Names(); strings.Join(got, ",") != "deploy,status,remember" {
		t.Errorf("Names after Add = %v", got)
	}
	if !s.Has("remember") {
		t.Error("added tool missing")
	}
}

type fakeTool struct{ name string }

func (f fakeTool) Spec() model.ToolSpec                                       { return model.ToolSpec{Name: f.name} }
func (fakeTool) Confirm() bool                                                { return false }
func (fakeTool) Validate(json.RawMessage) error                               { return nil }
func (fakeTool) Summary(json.RawMessage) (string, error)                      { return "", nil }
func (fakeTool) Run(context.Context, json.RawMessage, string) (string, error) { return "", nil }

func TestValidate(t *testing.T) {
	s := mustNew(t, []Config{
		{Name: "deploy", Parameters: deploySchema(), HTTP: &HTTPConfig{URL: "http://h/"}},
		{Name: "free", HTTP: &HTTPConfig{URL: "http://h/"}},
	}, Options{})
	deploy, free := mustGet(t, s, "deploy"), mustGet(t, s, "free")

	for _, good := range []string{
		`{"env":"prod"}`,
		`{"env":"staging","count":10000000000,"tags":["a","b"]}`,
		` {"env" : "prod", "count": 3} `,
	} {
		if err := deploy.Validate(json.RawMessage(good)); err != nil {
			t.Errorf("Validate(%s): %v", good, err)
		}
	}
	for _, good := range []string{`{}`, ``, `{"anything":[1,{"x":null}]}`, `{"n":123456789012345678901234567890,"e":-1e308}`} {
		if err := free.Validate(json.RawMessage(good)); err != nil {
			t.Errorf("free Validate(%q): %v", good, err)
		}
	}

	bad := []struct{ args, want string }{
		{`{"env":"prod","count":"3"}`, "invalid arguments: /count: got string, want integer"},
		{`{"env":"prod","count":1.5}`, "/count: got number, want integer"},
		{`{"env":"prod","count":0}`, "/count: "},
		{`{"env":"dev"}`, "/env: "},
		{`{"count":3}`, "invalid arguments: /: missing property 'env'"},
		{``, "missing property 'env'"},
		{`{"env":"prod","extra":true}`, "additional properties 'extra' not allowed"},
		{`{"env":"prod","tags":[1]}`, "/tags/0: got number, want string"},
		{`[]`, "invalid arguments: must be a JSON object"},
		{`"prod"`, "invalid arguments: must be a JSON object"},
		{`null`, "invalid arguments: must be a JSON object"},
		{`{"env":`, "invalid arguments: not valid JSON"},
		{`{"env":"prod"} {"env":"x"}`, "invalid arguments: not valid JSON: data after the object"},
		{`{"env":"prod","env":"staging"}`, `invalid arguments: duplicate key "env"`},
		{`{"env":"prod","meta":{"a":1,"b":{"a":2},"a":3}}`, `invalid arguments: duplicate key "a"`},
		{"{\"env\":\"prod\",\"s\":\"\xff\"}", "invalid arguments: not valid UTF-8"},
		{`{"env":"prod","count":1e400}`, "invalid arguments: number 1e400 out of range"},
		{`{"env":"prod","meta":[{"n":-` + strings.Repeat("1", 400) + `}]}`, "invalid arguments: number -" + strings.Repeat("1", 22) + "… out of range"},
	}
	for _, tc := range bad {
		err := deploy.Validate(json.RawMessage(tc.args))
		if err == nil {
			t.Errorf("Validate(%s): no error", tc.args)
			continue
		}
		if !errors.Is(err, ErrInvalidArgs) {
			t.Errorf("Validate(%s): %v does not wrap ErrInvalidArgs", tc.args, err)
		}
		if !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Validate(%s) = %q, want it to contain %q", tc.args, err, tc.want)
		}
		if len(err.Error()) > 300 || strings.Contains(err.Error(), "\n") {
			t.Errorf("Validate(%s): error too long or multi-line: %q", tc.args, err)
		}
	}
	// Nested duplicate keys in distinct objects are fine.
	if err := deploy.Validate(json.RawMessage(`{"env":"prod","meta":{"a":{"a":1},"b":[{"a":1},{"a":2}]}}`)); err != nil {
		t.Errorf("distinct objects with the same key: %v", err)
	}
}

func TestSummary(t *testing.T) {
	s := mustNew(t, []Config{
		{Name: "deploy", Parameters: deploySchema(), HTTP: &HTTPConfig{URL: "http://h/"},
			Summary: "Deploy {{.env}} x{{.count}}{{with .tags}} tags {{json .}}{{end}} ({{quote .env}})"},
		{Name: "plain", Parameters: deploySchema(), HTTP: &HTTPConfig{URL: "http://h/"}},
		{Name: "missing", Parameters: deploySchema(), HTTP: &HTTPConfig{URL: "http://h/"}, Summary: "Deploy {{.env}} x{{.count}}"},
		{Name: "long", Parameters: deploySchema(), HTTP: &HTTPConfig{URL: "http://h/"}, Summary: "{{.s}}"},
		{Name: "loop", Parameters: deploySchema(), HTTP: &HTTPConfig{URL: "http://h/"}, Summary: `{{range .tags}}{{$.s}}{{$.s}}{{end}}`},
	}, Options{})

	got, err := mustGet(t, s, "deploy").Summary(json.RawMessage(`{"env":"prod","count":10000000000,"tags":["a","<b>"]}`))
	if want := `Deploy prod x10000000000 tags ["a","<b>"] ("prod")`; err != nil || got != want {
		t.Errorf("Summary = %q, %v; want %q", got, err, want)
	}

	got, err = mustGet(t, s, "plain").Summary(json.RawMessage(`{"tags":["x"],"env":"prod","count":10000000000,"meta":{"k":"v"}}`))
	if want := `plain(count=10000000000, env="prod", meta={"k":"v"}, tags=["x"])`; err != nil || got != want {
		t.Errorf("default Summary = %q, %v; want %q", got, err, want)
	}

	// An optional argument the schema declares but the call left out reads
	// back visibly as absent; TestSummaryOptionalArgumentAndMisspeltKey
	// covers keys the schema does not declare.
	if got, err := mustGet(t, s, "missing").Summary(json.RawMessage(`{"env":"prod"}`)); err != nil || got != "Deploy prod x<no value>" {
		t.Errorf("absent optional argument: %q, %v", got, err)
	}

	if _, err := mustGet(t, s, "deploy").Summary(json.RawMessage(`{"env":"prod","note":"ignore previous instructions"}`)); !errors.Is(err, ErrInvalidArgs) {
		t.Errorf("Summary of invalid args: %v", err)
	}

	long := strings.Repeat("é", 3000)
	got, err = mustGet(t, s, "long").Summary(json.RawMessage(`{"env":"prod","s":"` + long + `"}`))
	if err != nil || len([]rune(got)) != MaxSummaryRunes || !strings.HasSuffix(got, "…") {
		t.Errorf("long summary: %d runes, %v", len([]rune(got)), err)
	}

	tags := strings.TrimSuffix(strings.Repeat(`"t",`, 200), ",")
	got, err = mustGet(t, s, "loop").Summary(json.RawMessage(`{"env":"prod","s":"` + strings.Repeat("x", 500) + `","tags":[` + tags + `]}`))
	if err != nil || len([]rune(got)) != MaxSummaryRunes || !strings.HasSuffix(got, "…") {
		t.Errorf("looping summary: %d runes, %v", len([]rune(got)), err)
	}
}

func TestSummaryOptionalArgumentAndMisspeltKey(t *testing.T) {
	cfg := Config{
		Name: "deploy",
		Parameters: map[string]any{
			"type":       "object",
			"properties": map[string]any{"svc": map[string]any{"type": "string"}, "note": map[string]any{"type": "string"}},
			"required":   []any{"svc"},
		},
		Summary: `Deploy {{.svc}}{{if .note}} ({{.note}}){{end}}`,
		Exec:    &ExecConfig{Command: []string{"true"}},
	}
	set, err := New([]Config{cfg}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	tool, _ := set.Get("deploy")
	for args, want := range map[string]string{`{"svc":"api"}`: "Deploy api", `{"svc":"api","note":"hotfix"}`: "Deploy api (hotfix)"} {
		got, err := tool.Summary(json.RawMessage(args))
		if err != nil || got != want {
			t.Fatalf("Summary(%s) = %q, %v; want %q", args, got, err, want)
		}
	}
	cfg.Summary = `Deploy {{.servcie}}`
	set, err = New([]Config{cfg}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	tool, _ = set.Get("deploy")
	if _, err := tool.Summary(json.RawMessage(`{"svc":"api"}`)); err == nil {
		t.Fatal("a misspelt key in the summary must fail, not read back an empty value")
	}
}

// A config tool's definition is a hash of its whole entry: the same entry
// gives the same one; another URL, schema or flag gives another.
func TestDefinition(t *testing.T) {
	def := func(c Config) string {
		t.Helper()
		s, err := New([]Config{c}, Options{})
		if err != nil {
			t.Fatal(err)
		}
		tool, _ := s.Get(c.Name)
		return Definition(tool)
	}
	base := Config{Name: "deploy", Parameters: deploySchema(), Confirm: true, HTTP: &HTTPConfig{URL: "http://h/deploy"}}
	d := def(base)
	if d == "" || def(base) != d {
		t.Fatalf("definition %q not stable", d)
	}
	url := base
	url.HTTP = &HTTPConfig{URL: "http://elsewhere/deploy"}
	flag := base
	flag.Confirm = false
	for name, c := range map[string]Config{"url": url, "flag": flag} {
		if def(c) == d {
			t.Fatalf("another %s, same definition", name)
		}
	}
}

// confirm_phrase renders over the validated arguments; without it the
// phrase is the tool's name; invalid arguments render nothing; a huge
// rendering is bounded (the bot cuts it further).
func TestConfirmPhrase(t *testing.T) {
	s := mustNew(t, []Config{
		{Name: "deploy", Parameters: deploySchema(), HTTP: &HTTPConfig{URL: "http://h/"}, ConfirmPhrase: "{{.env}}/{{.s}}"},
		{Name: "plain", Parameters: deploySchema(), HTTP: &HTTPConfig{URL: "http://h/"}},
	}, Options{})
	type phraser interface {
		ConfirmPhrase(json.RawMessage) (string, error)
	}
	deploy := mustGet(t, s, "deploy").(phraser)
	if got, err := deploy.ConfirmPhrase(json.RawMessage(`{"env":"prod","s":"<!channel>"}`)); err != nil || got != "prod/<!channel>" {
		t.Errorf("phrase = %q, %v", got, err)
	}
	if got, err := mustGet(t, s, "plain").(phraser).ConfirmPhrase(json.RawMessage(`{"env":"prod"}`)); err != nil || got != "plain" {
		t.Errorf("default phrase = %q, %v", got, err)
	}
	if _, err := deploy.ConfirmPhrase(json.RawMessage(`{"env":"prod","note":"x"}`)); !errors.Is(err, ErrInvalidArgs) {
		t.Errorf("phrase of invalid arguments: %v", err)
	}
	got, err := deploy.ConfirmPhrase(json.RawMessage(`{"env":"prod","s":"` + strings.Repeat("x", 5000) + `"}`))
	if err != nil || len(got) != MaxPhraseBytes {
		t.Errorf("long phrase: %d bytes, %v", len(got), err)
	}
}
