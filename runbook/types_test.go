package runbook

import (
	"errors"
	"strings"
	"testing"

	"github.com/airlockhq/airlock/keyerr"
)

// typedExample has parameters of each simple type, for expressions that
// compare them.
const typedExample = `
- name: typed
  parameters:
    type: object
    properties:
      service: {type: string}
      count: {type: integer}
      ratio: {type: number}
      force: {type: boolean}
      tags: {type: array}
      "dry-run": {type: boolean}
  steps:
    - id: before
      tool: t
    - id: gated
      tool: t
      when: 'true'
`

// Issue 34 item 16: an expression comparing values of different types is
// refused at load (check-config and startup), naming its key, instead of
// evaluating false at run time and silently skipping a gated step.
func TestExpressionTypesAreCheckedAtLoad(t *testing.T) {
	for _, tc := range []struct{ when, msg string }{
		{`steps.before.outcome == 1`, "(string, int)"},
		{`steps["before"].outcome == 1`, "(string, int)"},
		{`steps.before.outcome > 2`, "(string, int)"},
		{`1 == steps.before.outcome`, "(int, string)"},
		{`steps.before.outcome == "success"`, `"success" is not an outcome`},
		{`steps.before.outcome != "ok"`, `"ok" is not an outcome`},
		{`steps.before.outcome in ["succeeded", "done"]`, `"done" is not an outcome`},
		{`params.count == "2"`, "(int, string)"},
		{`params.service == 3`, "(string, int)"},
		{`params.force == "true"`, "(bool, string)"},
		{`params.ratio == "0.5"`, "(double, string)"},
		{`params.tags == "a"`, "(list(dyn), string)"},
		{`params.ratio == 1`, "(double, int)"},
		{`params.service`, "must be a bool"},
		{`steps.before.outcome`, "must be a bool"},
	} {
		t.Run(tc.when, func(t *testing.T) {
			src := strings.Replace(typedExample, `when: 'true'`, `when: '`+tc.when+`'`, 1)
			_, err := Compile("runbooks", decode(t, src), anyTool)
			var ke *keyerr.Error
			if !errors.As(err, &ke) || ke.Key != "runbooks[0].steps[1].when" || !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("got %v; want runbooks[0].steps[1].when: …%s…", err, tc.msg)
			}
		})
	}
	// The same in an argument template and in retry.until.
	src := strings.Replace(typedExample, `when: 'true'`, `args: {n: "{{ params.count + 'x' }}"}`, 1)
	if _, err := Compile("runbooks", decode(t, src), anyTool); err == nil || !strings.HasPrefix(err.Error(), "runbooks[0].steps[1].args.n: ") {
		t.Fatalf("args: %v", err)
	}
	src = strings.Replace(typedExample, `when: 'true'`, `retry: {until: 'steps.gated.outcome == 0'}`, 1)
	if _, err := Compile("runbooks", decode(t, src), anyTool); err == nil || !strings.HasPrefix(err.Error(), "runbooks[0].steps[1].retry.until: ") {
		t.Fatalf("until: %v", err)
	}
}

// Well-typed expressions still compile and evaluate with the values a
// run has: parameters as the run stored them (JSON numbers decode as
// float64), results of any shape.
func TestTypedExpressionsEvaluate(t *testing.T) {
	for _, tc := range []struct {
		when string
		want bool
	}{
		{`steps.before.outcome == "succeeded"`, true},
		{`steps["before"].outcome in ["failed", "skipped"]`, false},
		{`params.count + 1 == 3`, true},
		{`params.count > 1 && params.ratio < 1.0`, true},
		{`params.ratio * 2.0 == 1.0`, true},
		{`params.ratio == 0.5 && params.count == 2`, true},
		{`params.force && params.service.startsWith("ap")`, true},
		{`"b" in params.tags`, true},
		{`params["dry-run"] == true`, true},
		{`has(params.missing) || !has(params.service)`, false},
		{`steps.before.result.status == "up" && steps.before.result.n == 1`, true},
		{`steps.before.result == 1`, false}, // a result is dynamic: any shape
	} {
		t.Run(tc.when, func(t *testing.T) {
			src := strings.Replace(typedExample, `when: 'true'`, `when: '`+tc.when+`'`, 1)
			r := mustCompile(t, src)
			v := Vars{
				Params: map[string]any{"service": "api", "count": float64(2), "ratio": float64(0.5), "force": true, "tags": []any{"a", "b"}, "dry-run": true},
				Steps:  map[string]StepState{"before": {Outcome: Succeeded, Result: map[string]any{"status": "up", "n": float64(1)}}},
			}
			got, err := r.Step("gated").When(v)
			if err != nil || got != tc.want {
				t.Fatalf("got %v, %v; want %v", got, err, tc.want)
			}
		})
	}
}
