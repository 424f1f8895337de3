package runbook

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/airlockhq/airlock/keyerr"
)

// issueExample is the runbook of issue 25.
const issueExample = `
- name: restart
  description: Restart a service and check it came back.
  parameters:
    type: object
    properties:
      service: {type: string, enum: [api, web, worker]}
      environment: {type: string, enum: [staging, production], default: staging}
    required: [service]
    additionalProperties: false
  steps:
    - id: before
      tool: service_status
      args: {service: "{{ params.service }}"}
    - id: restart
      tool: restart_service
      args:
        service: "{{ params.service }}"
        environment: "{{ params.environment }}"
      when: 'steps.before.outcome == "succeeded"'
      confirm: true
      approvals: 2
      timeout: 2m
    - id: after
      tool: service_status
      args: {service: "{{ params.service }}"}
      retry: {attempts: 5, delay: 10s, until: 'steps.after.result.status == "up"'}
      on_failure: continue
  on_failure:
    - id: page
      tool: page_oncall
      args: {text: "restart of {{ params.service }} failed at {{ run.failed_step }}"}
`

func decode(t testing.TB, src string) []Config {
	t.Helper()
	var cfgs []Config
	if err := yaml.Unmarshal([]byte(src), &cfgs); err != nil {
		t.Fatal(err)
	}
	return cfgs
}

func anyTool(string) bool { return true }

func mustCompile(t testing.TB, src string) *Runbook {
	t.Helper()
	rbs, err := Compile("runbooks", decode(t, src), anyTool)
	if err != nil {
		t.Fatal(err)
	}
	return rbs[0]
}

func TestCompileTheIssueExample(t *testing.T) {
	r := mustCompile(t, issueExample)
	if r.Name() != "restart" || len(r.Steps()) != 3 || len(r.OnFailure()) != 1 {
		t.Fatalf("%s: %d steps, %d on_failure", r.Name(), len(r.Steps()), len(r.OnFailure()))
	}
	st := r.Step("restart")
	if !st.Confirm() || st.Approvals() != 2 || st.Timeout().String() != "2m0s" || st.Key() != "runbooks[0].steps[1]" {
		t.Fatalf("restart step: %+v", st.Config())
	}
	if a := r.Step("after"); a.Attempts() != 5 || a.Delay().String() != "10s" || !a.ContinueOnFailure() {
		t.Fatalf("after: %d %s %v", a.Attempts(), a.Delay(), a.ContinueOnFailure())
	}
	if !r.Step("page").IsOnFailure() || r.Step("before").IsOnFailure() {
		t.Fatal("IsOnFailure")
	}
	if got := strings.Join(r.Tools(), ","); got != "service_status,restart_service,page_oncall" {
		t.Fatalf("tools %s", got)
	}
	if got := strings.Join(r.Step("restart").Refers(), ","); got != "before" {
		t.Fatalf("refers %s", got)
	}
}

// replace edits the issue example: old must be there.
func replace(t *testing.T, old, new string) string {
	t.Helper()
	if !strings.Contains(issueExample, old) {
		t.Fatalf("%q is not in the example", old)
	}
	return strings.Replace(issueExample, old, new, 1)
}

func TestCompileErrorsNameTheKey(t *testing.T) {
	for _, tc := range []struct {
		name, old, new, key, msg string
	}{
		{"bad name", "name: restart", "name: Restart", "runbooks[0].name", "lower-case"},
		{"long name", "name: restart", "name: " + strings.Repeat("a", 49), "runbooks[0].name", "1 to 48"},
		{"bad id", "id: before", "id: be-fore", "runbooks[0].steps[0].id", "lower-case"},
		{"duplicate id", "id: after", "id: before", "runbooks[0].steps[2].id", "runbooks[0].steps[0]"},
		{"duplicate id in on_failure", "id: page", "id: restart", "runbooks[0].on_failure[0].id", "runbooks[0].steps[1]"},
		{"no tool", "tool: page_oncall", "tool: ''", "runbooks[0].on_failure[0].tool", "required"},
		{"runbook tool", "tool: page_oncall", "tool: runbook__restart", "runbooks[0].on_failure[0].tool", "cannot start a runbook"},
		{"later step in when", `when: 'steps.before.outcome == "succeeded"'`, `when: 'steps.after.outcome == "succeeded"'`, "runbooks[0].steps[1].when", "later step"},
		{"itself in when", `when: 'steps.before.outcome == "succeeded"'`, `when: 'steps.restart.outcome == "succeeded"'`, "runbooks[0].steps[1].when", "this step itself"},
		{"index syntax", `when: 'steps.before.outcome == "succeeded"'`, `when: 'steps["after"].outcome == "succeeded"'`, "runbooks[0].steps[1].when", "later step"},
		{"dynamic index", `when: 'steps.before.outcome == "succeeded"'`, `when: 'steps[params.service].outcome == "succeeded"'`, "runbooks[0].steps[1].when", "by its id"},
		{"whole map", `when: 'steps.before.outcome == "succeeded"'`, `when: 'size(steps) > 0'`, "runbooks[0].steps[1].when", "by its id"},
		{"unknown step", `when: 'steps.before.outcome == "succeeded"'`, `when: 'steps.nope.outcome == "succeeded"'`, "runbooks[0].steps[1].when", `no step "nope"`},
		{"bad field", `when: 'steps.before.outcome == "succeeded"'`, `when: 'steps.before.outcom == "succeeded"'`, "runbooks[0].steps[1].when", `no field "outcom"`},
		{"later step in args", `args: {service: "{{ params.service }}"}`, `args: {service: "{{ steps.restart.result }}"}`, "runbooks[0].steps[0].args.service", "later step"},
		{"later step in nested args", `environment: "{{ params.environment }}"`, `environment: {x: ["a {{ steps.after.outcome }}"]}`, "runbooks[0].steps[1].args.environment.x[0]", "later step"},
		{"unknown param", `args: {service: "{{ params.service }}"}`, `args: {service: "{{ params.servce }}"}`, "runbooks[0].steps[0].args.service", `no parameter "servce"`},
		{"run field", `failed at {{ run.failed_step }}`, `failed at {{ run.failed }}`, "runbooks[0].on_failure[0].args.text", `run has no field "failed"`},
		{"not CEL", `when: 'steps.before.outcome == "succeeded"'`, `when: 'steps.before.outcome =='`, "runbooks[0].steps[1].when", "1:"},
		{"not a bool", `when: 'steps.before.outcome == "succeeded"'`, `when: '"yes"'`, "runbooks[0].steps[1].when", "must be a bool"},
		{"type error", `when: 'steps.before.outcome == "succeeded"'`, `when: 'now + 1 == now'`, "runbooks[0].steps[1].when", "no matching overload"},
		{"unclosed template", `args: {service: "{{ params.service }}"}`, `args: {service: "{{ params.service"}`, "runbooks[0].steps[0].args.service", "not closed"},
		{"empty template", `args: {service: "{{ params.service }}"}`, `args: {service: "{{ }}"}`, "runbooks[0].steps[0].args.service", "empty expression"},
		{"retry without until or attempts", "retry: {attempts: 5, delay: 10s, until: 'steps.after.result.status == \"up\"'}", "retry: {delay: 10s}", "runbooks[0].steps[2].retry", "attempts or until"},
		{"one attempt", "retry: {attempts: 5,", "retry: {attempts: 1,", "runbooks[0].steps[2].retry.attempts", "between 2"},
		{"retry until a later step", `until: 'steps.after.result.status == "up"'`, `until: 'steps.page.result.status == "up"'`, "runbooks[0].steps[2].retry.until", "later step"},
		{"on_failure policy", "on_failure: continue", "on_failure: ignore", "runbooks[0].steps[2].on_failure", "stop, continue"},
		{"approvals", "approvals: 2", "approvals: 11", "runbooks[0].steps[1].approvals", "between 0"},
		{"negative approvals", "approvals: 2", "approvals: -1", "runbooks[0].steps[1].approvals", "between 0"},
		{"short timeout", "timeout: 2m", "timeout: 10ms", "runbooks[0].steps[1].timeout", "between 1s and 24h"},
		{"long timeout", "timeout: 2m", "timeout: 25h", "runbooks[0].steps[1].timeout", "between 1s and 24h"},
		{"not an object schema", "type: object\n    properties:", "type: string\n    properties:", "runbooks[0].parameters", `type must be "object"`},
		{"bad schema", "service: {type: string,", "service: {type: strang,", "runbooks[0].parameters", "invalid JSON Schema"},
		{"bad default", "default: staging", "default: dev", "runbooks[0].parameters.properties.environment.default", "not allowed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Compile("runbooks", decode(t, replace(t, tc.old, tc.new)), anyTool)
			var ke *keyerr.Error
			if !errors.As(err, &ke) || ke.Key != tc.key || !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("got %v; want %s: …%s…", err, tc.key, tc.msg)
			}
		})
	}
}

func TestCompileRefsAreReadFromTheSyntaxNotTheText(t *testing.T) {
	// A later step's name in a string literal is text, not a reference.
	src := replace(t, `when: 'steps.before.outcome == "succeeded"'`, `when: 'steps.before.result != "steps.after.outcome"'`)
	if _, err := Compile("runbooks", decode(t, src), anyTool); err != nil {
		t.Fatal(err)
	}
	// And a reference written without the text "steps.after" is found.
	src = replace(t, `when: 'steps.before.outcome == "succeeded"'`, `when: 'steps [ "af" + "ter" ].outcome == "x"'`)
	if _, err := Compile("runbooks", decode(t, src), anyTool); err == nil || !strings.Contains(err.Error(), "by its id") {
		t.Fatalf("a computed step id: %v", err)
	}
}

func TestCompileDuplicateNamesAndMissingTools(t *testing.T) {
	two := decode(t, issueExample)
	two = append(two, two[0])
	if _, err := Compile("runbooks", two, anyTool); err == nil || err.Error() != `runbooks[1].name: "restart" is already the name of runbooks[0]` {
		t.Fatalf("duplicate: %v", err)
	}
	has := func(n string) bool { return n != "page_oncall" }
	_, err := Compile("runbooks", decode(t, issueExample), has)
	var mt *MissingToolError
	if !errors.As(err, &mt) || mt.Key != "runbooks[0].on_failure[0].tool" || mt.Step != "page" || mt.Runbook != "restart" {
		t.Fatalf("missing tool: %v", err)
	}
	// Tools checked later (MCP servers listed theirs).
	rbs, err := Compile("runbooks", decode(t, issueExample), nil)
	if err != nil {
		t.Fatal(err)
	}
	err = CheckTools(rbs, has)
	if !errors.As(err, &mt) || !strings.Contains(err.Error(), `runbook restart, step page: no tool named "page_oncall"`) {
		t.Fatalf("CheckTools: %v", err)
	}
	if err := CheckTools(rbs, anyTool); err != nil {
		t.Fatal(err)
	}
}

func TestSnapshotRoundTrip(t *testing.T) {
	r := mustCompile(t, issueExample)
	snap := r.Snapshot()
	back, err := FromSnapshot(snap)
	if err != nil {
		t.Fatal(err)
	}
	if string(back.Snapshot()) != string(snap) {
		t.Fatalf("snapshot changed:\n%s\n%s", snap, back.Snapshot())
	}
	v := Vars{Params: map[string]any{"service": "api", "environment": "staging"}}
	a1, err1 := r.Step("restart").Args(v)
	a2, err2 := back.Step("restart").Args(v)
	if err1 != nil || err2 != nil || string(a1) != string(a2) {
		t.Fatalf("%s %v / %s %v", a1, err1, a2, err2)
	}
	if st := back.Step("after"); st.Attempts() != 5 || st.Delay().String() != "10s" {
		t.Fatalf("retry lost: %+v", st.Config().Retry)
	}
	// A stored definition that no longer compiles is an error, not a run.
	var c map[string]any
	_ = json.Unmarshal(snap, &c)
	c["Steps"].([]any)[1].(map[string]any)["When"] = "steps.after.outcome == 'x'"
	bad, _ := json.Marshal(c)
	if _, err := FromSnapshot(bad); err == nil || !strings.Contains(err.Error(), "later step") {
		t.Fatalf("bad snapshot: %v", err)
	}
	if _, err := FromSnapshot([]byte(`{"Name":"x","Bogus":1}`)); err == nil {
		t.Fatal("unknown field accepted")
	}
}
