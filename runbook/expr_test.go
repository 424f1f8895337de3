package runbook

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

const argsExample = `
- name: args
  parameters:
    type: object
    properties:
      service: {type: string}
      count: {type: integer}
      flag: {type: boolean}
      tags: {type: array}
  steps:
    - id: first
      tool: t
    - id: second
      tool: t
      args:
        typed_int: "{{ params.count }}"
        typed_bool: "{{ params.flag }}"
        typed_list: "{{ params.tags }}"
        typed_map: "{{ {'a': params.count + 1, 'b': [steps.first.outcome]} }}"
        text: "svc {{ params.service }} x{{ params.count }} {{ params.flag }} {{ params.tags }}"
        spaced: " {{ params.count }}"
        result_text: "got {{ steps.first.result.message }}"
        result_typed: "{{ steps.first.result.message }}"
        nested: {list: ["{{ params.count }}", "n={{ params.count }}", 7, true, null], deep: {k: "{{ run.requester }}"}}
        plain: hello
        number: 3
        when_at: "{{ now }}"
        literal_braces: '{{ "{{" }} not an expression }}'
      when: 'steps.first.outcome == "succeeded"'
      retry: {attempts: 3, until: 'steps.second.result.status == "up"'}
`

func argsVars(result any) Vars {
	return Vars{
		Params: map[string]any{"service": "api", "count": int64(2), "flag": true, "tags": []any{"a", "b"}},
		Steps:  map[string]StepState{"first": {Outcome: Succeeded, Result: result}},
		Run:    RunInfo{ID: "r1", Name: "args", Requester: "U1"},
		Now:    time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC),
	}
}

func TestArgsTypedInterpolatedNested(t *testing.T) {
	r := mustCompile(t, argsExample)
	raw, err := r.Step("second").Args(argsVars(map[string]any{"message": "ok"}))
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal(raw, &got); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"typed_int":      2.0,
		"typed_bool":     true,
		"typed_list":     []any{"a", "b"},
		"typed_map":      map[string]any{"a": 3.0, "b": []any{"succeeded"}},
		"text":           `svc api x2 true ["a","b"]`,
		"spaced":         " 2",
		"result_text":    "got ok",
		"result_typed":   "ok",
		"nested":         map[string]any{"list": []any{2.0, "n=2", 7.0, true, nil}, "deep": map[string]any{"k": "U1"}},
		"plain":          "hello",
		"number":         3.0,
		"when_at":        "2026-01-02T03:04:05Z",
		"literal_braces": "{{ not an expression }}",
	}
	for k, w := range want {
		g, _ := json.Marshal(got[k])
		wj, _ := json.Marshal(w)
		if string(g) != string(wj) {
			t.Errorf("%s: got %s, want %s", k, g, wj)
		}
	}
	if len(got) != len(want) {
		t.Errorf("got %d keys: %s", len(got), raw)
	}
}

// A tool's result is hostile text: what it holds is data, never an
// expression, whether it lands in a typed value or inside text.
func TestArgsResultsCannotInjectExpressions(t *testing.T) {
	r := mustCompile(t, argsExample)
	evil := `{{ params.service }} ${HOME} {{ run.requester }}`
	for _, result := range []any{
		map[string]any{"message": evil},
		map[string]any{"message": map[string]any{"x": evil}},
	} {
		raw, err := r.Step("second").Args(argsVars(result))
		if err != nil {
			t.Fatal(err)
		}
		var got map[string]any
		_ = json.Unmarshal(raw, &got)
		rt, _ := json.Marshal(got["result_typed"])
		if !strings.Contains(string(rt), `{{ params.service }} ${HOME} {{ run.requester }}`) {
			t.Fatalf("result_typed: %s", rt)
		}
		if txt, _ := got["result_text"].(string); !strings.Contains(txt, "{{ params.service }}") || strings.Contains(txt, "got api") {
			t.Fatalf("result_text: %q", txt)
		}
	}
	// A parameter's text is data too.
	v := argsVars(map[string]any{"message": "ok"})
	v.Params["service"] = "{{ run.requester }}"
	raw, err := r.Step("second").Args(v)
	if err != nil || !strings.Contains(string(raw), `"svc {{ run.requester }} x2`) {
		t.Fatalf("%s %v", raw, err)
	}
}

func TestArgsErrorsNameTheStepAndKey(t *testing.T) {
	r := mustCompile(t, argsExample)
	// No message in the result: the key is missing.
	_, err := r.Step("second").Args(argsVars(map[string]any{"other": 1}))
	var ee *EvalError
	if !errors.As(err, &ee) || ee.Step != "second" || !strings.HasPrefix(ee.Key, "args.result_") || !strings.Contains(err.Error(), "no such key") {
		t.Fatalf("%v", err)
	}
	if !strings.HasPrefix(err.Error(), "step second: args.result_") {
		t.Fatalf("message %q", err.Error())
	}
	// A nested key is named with its path.
	v := argsVars(map[string]any{"message": "ok"})
	v.Run.Requester = ""
	delete(v.Params, "count")
	_, err = r.Step("second").Args(v)
	if !errors.As(err, &ee) || !strings.Contains(ee.Key, "args.") {
		t.Fatalf("%v", err)
	}
}

func TestArgsCostLimit(t *testing.T) {
	src := strings.Replace(argsExample, `plain: hello`, `plain: "{{ [1,2,3,4,5,6,7,8,9,10].map(a, [1,2,3,4,5,6,7,8,9,10].map(b, [1,2,3,4,5,6,7,8,9,10].map(c, [1,2,3,4,5,6,7,8,9,10].map(d, a+b+c+d)))) }}"`, 1)
	r := mustCompile(t, src)
	_, err := r.Step("second").Args(argsVars(map[string]any{"message": "ok"}))
	if err == nil || !strings.Contains(err.Error(), "args.plain") || !strings.Contains(err.Error(), "cost") {
		t.Fatalf("%v", err)
	}
}

func TestWhenAndDone(t *testing.T) {
	r := mustCompile(t, argsExample)
	s := r.Step("second")
	v := argsVars("text")
	if ok, err := s.When(v); err != nil || !ok {
		t.Fatalf("when: %v %v", ok, err)
	}
	v.Steps["first"] = StepState{Outcome: Failed}
	if ok, err := s.When(v); err != nil || ok {
		t.Fatalf("when after a failure: %v %v", ok, err)
	}
	if ok, err := r.Step("first").When(v); err != nil || !ok {
		t.Fatalf("no when: %v %v", ok, err)
	}
	// until sees the step's own latest attempt, decoded JSON.
	var res any
	_ = json.Unmarshal([]byte(`{"status":"down"}`), &res)
	v.Steps["second"] = StepState{Outcome: Succeeded, Result: res}
	if ok, err := s.Done(v); err != nil || ok {
		t.Fatalf("done while down: %v %v", ok, err)
	}
	v.Steps["second"] = StepState{Outcome: Succeeded, Result: map[string]any{"status": "up"}}
	if ok, err := s.Done(v); err != nil || !ok {
		t.Fatalf("done when up: %v %v", ok, err)
	}
	v.Steps["second"] = StepState{Outcome: Succeeded, Result: "plain text"}
	_, err := s.Done(v)
	var ee *EvalError
	if !errors.As(err, &ee) || ee.Key != "retry.until" || ee.Step != "second" {
		t.Fatalf("until on text: %v", err)
	}
	if ok, err := r.Step("first").Done(v); err != nil || !ok {
		t.Fatalf("no until: %v %v", ok, err)
	}
}

// The expression resolver never panics and never evaluates what it
// resolved: a result's text comes back as it was.
func FuzzArgs(f *testing.F) {
	f.Add("{{ params.service }}", "plain")
	f.Add("a {{ steps.first.result }} b", "{{ params.service }}")
	f.Add("{{ {'k': steps.first.result} }}", "${X}")
	f.Add("{{ steps.first.result + steps.first.result }}", "}}{{")
	f.Add("{{ steps.first.result }}", "{{ params.service }}")
	f.Add("{{", "")
	f.Add("{{ 1/0 }}", "x")
	f.Add("x {{ now }} {{ run }}", "x")
	f.Fuzz(func(t *testing.T, tmpl, result string) {
		cfg := []Config{{
			Name:  "f",
			Steps: []StepConfig{{ID: "first", Tool: "t"}, {ID: "second", Tool: "t", Args: map[string]any{"v": tmpl}}},
		}}
		rbs, err := Compile("runbooks", cfg, nil)
		if err != nil {
			return
		}
		v := Vars{Params: map[string]any{"service": "api"}, Steps: map[string]StepState{"first": {Outcome: Succeeded, Result: result}}}
		raw, err := rbs[0].Step("second").Args(v)
		if err != nil {
			return
		}
		var got map[string]any
		if err := json.Unmarshal(raw, &got); err != nil {
			t.Fatalf("not JSON: %s", raw)
		}
		if tmpl == "{{ steps.first.result }}" && utf8.ValidString(result) && got["v"] != result {
			t.Fatalf("the result changed: %q → %v", result, got["v"])
		}
	})
}

// A compiled runbook is shared by every run: its steps resolve
// concurrently (run with -race).
func TestArgsConcurrently(t *testing.T) {
	r := mustCompile(t, argsExample)
	want, err := r.Step("second").Args(argsVars(map[string]any{"message": "ok"}))
	if err != nil {
		t.Fatal(err)
	}
	errs := make(chan error, 8)
	for i := 0; i < 8; i++ {
		go func() {
			got, err := r.Step("second").Args(argsVars(map[string]any{"message": "ok"}))
			if err == nil && string(got) != string(want) {
				err = errors.New("different arguments: " + string(got))
			}
			errs <- err
		}()
	}
	for i := 0; i < 8; i++ {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
}
