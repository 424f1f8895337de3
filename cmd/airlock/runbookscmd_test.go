package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

const runbooksConfig = `
model: {provider: openai, name: m, base_url: 'http://127.0.0.1:9/v1'}
confirmation:
  tools: [drain]
  rules:
    - {name: prod-only, action: ask, when: 'tool == "deploy" && args.env == "production"'}
tools:
  - {name: status, description: s, exec: {command: ["true"]}}
  - {name: restart, description: r, confirm: true, exec: {command: ["true"]}}
  - {name: drain, description: d, exec: {command: ["true"]}}
  - {name: deploy, description: d, exec: {command: ["true"]}}
runbooks:
  - name: restart
    description: Restart a service.
    parameters:
      type: object
      properties:
        service: {type: string, enum: [api, web]}
        environment: {type: string, enum: [staging, production], default: staging}
      required: [service]
    steps:
      - {id: before, tool: status, args: {service: "{{ params.service }}"}}
      - {id: drain, tool: drain}
      - {id: restart, tool: restart, approvals: 2}
      - {id: deploy, tool: deploy, args: {env: "{{ params.environment }}"}}
      - {id: forced, tool: status, confirm: true}
      - {id: after, tool: status, retry: {attempts: 5, until: 'steps.after.result == "up"'}}
    on_failure:
      - {id: page, tool: status}
`

func TestRunbooksCommand(t *testing.T) {
	cfg := writeFile(t, "c.yaml", runbooksConfig)
	var out, errOut bytes.Buffer
	if code := run(context.Background(), []string{"runbooks", "-config", cfg}, nil, &out, &errOut); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	lines := map[string]string{}
	for _, l := range strings.Split(out.String(), "\n") {
		f := strings.Fields(l)
		if len(f) > 0 {
			lines[f[0]] = strings.Join(f, " ")
		}
	}
	for first, want := range map[string]string{
		"runbook":     "runbook restart: Restart a service.",
		"start:":      "start: run restart service=…",
		"service":     "service string yes - api, web",
		"environment": "environment string no staging staging, production",
		"before":      "before status no -",
		"drain":       "drain drain always listed in confirmation.tools",
		"restart":     "restart restart always the tool needs approval; at least 2 approvers (the step)",
		"deploy":      "deploy deploy depends on the arguments",
		"forced":      "forced status always the step says confirm",
		"after":       "after status no an approval covers up to 5 attempts",
		"page":        "page (on failure) status no -",
	} {
		if got := lines[first]; !strings.HasPrefix(got, want) {
			t.Errorf("%s: got %q, want %q…\n%s", first, got, want, out.String())
		}
	}
}

func TestCheckConfigNamesARunbookKey(t *testing.T) {
	cfg := writeFile(t, "c.yaml", strings.Replace(runbooksConfig, "{id: drain, tool: drain}", "{id: drain, tool: drian}", 1))
	var out, errOut bytes.Buffer
	code := run(context.Background(), []string{"check-config", "-config", cfg}, nil, &out, &errOut)
	if code == 0 || !strings.Contains(errOut.String(), `runbooks[0].steps[1].tool: runbook restart, step drain: no tool named "drian"`) {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
}

// Issue 34 item 16: check-config refuses a condition that compares a
// step's outcome (text) with a number, naming its key; before, it was
// accepted, evaluated false, and the run skipped its gated step and
// ended succeeded.
func TestCheckConfigRefusesAMistypedCondition(t *testing.T) {
	for _, tc := range []struct{ old, new, want string }{
		{"{id: drain, tool: drain}", "{id: drain, tool: drain, when: 'steps.before.outcome == 1'}",
			`runbooks[0].steps[1].when: 1:22: found no matching overload for '_==_' applied to '(string, int)'`},
		{"{id: drain, tool: drain}", `{id: drain, tool: drain, when: 'steps.before.outcome == "success"'}`,
			`runbooks[0].steps[1].when: 1:25: "success" is not an outcome (they are succeeded, failed, denied, expired, skipped, unknown)`},
	} {
		cfg := writeFile(t, "c.yaml", strings.Replace(runbooksConfig, tc.old, tc.new, 1))
		var out, errOut bytes.Buffer
		code := run(context.Background(), []string{"check-config", "-config", cfg}, nil, &out, &errOut)
		if code == 0 || !strings.Contains(errOut.String(), tc.want) {
			t.Fatalf("exit %d: %s%s", code, out.String(), errOut.String())
		}
	}
}
