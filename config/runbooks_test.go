package config

import (
	"errors"
	"strings"
	"testing"

	"github.com/airlockhq/airlock/runbook"
)

const runbookConfig = minimal + `
tools:
  - name: service_status
    description: status
    exec: {command: ["true"]}
  - name: restart_service
    description: restart
    confirm: true
    summary: 'restart {{ .service }}'
    exec: {command: ["true"]}
mcp_servers:
  - name: pager
    command: ["true"]
runbooks:
  - name: restart
    parameters:
      type: object
      properties:
        service: {type: string, enum: [api, web]}
      required: [service]
    steps:
      - id: before
        tool: service_status
        args: {service: "{{ params.service }}", home: "${HOME_DIR}", note: "{{ params.service }} in ${HOME_DIR}"}
      - id: restart
        tool: restart_service
        args: {service: "{{params.service}}"}
        timeout: 2m
    on_failure:
      - id: page
        tool: pager__page
        args: {text: "restart of {{ params.service }} failed at {{ run.failed_step }}"}
channels:
  - platform: shell
    id: local
    runbooks: [restart]
  - platform: slack
    id: C0123
`

// {{ }} templates survive ${ENV} expansion (which happens first) and are
// compiled, not Go templates; ${ENV} inside a runbook's args is expanded
// like any value.
func TestRunbooksParseAndCompile(t *testing.T) {
	c, err := Parse([]byte(runbookConfig), env(map[string]string{"HOME_DIR": "/srv"}))
	if err != nil {
		t.Fatal(err)
	}
	rbs := c.RunbookSet()
	if len(rbs) != 1 || c.Runbook("restart") != rbs[0] || c.Runbook("nope") != nil {
		t.Fatalf("runbooks %v", rbs)
	}
	st := rbs[0].Step("before")
	raw, err := st.Args(runbook.Vars{Params: map[string]any{"service": "api"}})
	if err != nil {
		t.Fatal(err)
	}
	if got := string(raw); got != `{"home":"/srv","note":"api in /srv","service":"api"}` {
		t.Fatalf("args %s", got)
	}
	if rbs[0].Step("restart").Timeout().String() != "2m0s" {
		t.Fatal("timeout")
	}
	if !c.Channels[0].OffersRunbook("restart") || c.Channels[0].OffersRunbook("other") || !c.Channels[1].OffersRunbook("anything") {
		t.Fatal("OffersRunbook")
	}
}

func TestRunbookConfigErrorsNameTheKey(t *testing.T) {
	for _, tc := range []struct{ old, new, want string }{
		{"tool: service_status\n        args", "tool: status\n        args", `runbooks[0].steps[0].tool: runbook restart, step before: no tool named "status"`},
		{"tool: pager__page", "tool: other__page", `runbooks[0].on_failure[0].tool: runbook restart, step page: no tool named "other__page"`},
		{"runbooks: [restart]", "runbooks: [restart, stop]", `channels[0].runbooks[1]: no runbook named "stop"`},
		{"- name: pager", "- name: runbook", `mcp_servers[0].name: "runbook" would clash with the runbooks' tools, named runbook__<runbook>`},
		{"- name: pager", "- name: runbook_", `mcp_servers[0].name: "runbook_" would clash`}, // runbook___x is runbook _x's tool
		{"- name: service_status", "- name: runbook__x", `tools[0].name: "runbook__x" would clash`},
		{"- id: restart", "- id: before", `runbooks[0].steps[1].id: "before" is already the id of runbooks[0].steps[0]`},
		{`{service: "{{params.service}}"}`, `{service: "{{ nope }}"}`, "runbooks[0].steps[1].args.service: 1:1: undeclared reference to 'nope'"},
		// Arguments are CEL templates, never Go templates (tools[].summary is one).
		{`{service: "{{params.service}}"}`, `{service: "{{ .service }}"}`, "runbooks[0].steps[1].args.service: 1:"},
		{"timeout: 2m", "timeout: soon", `runbooks[0].steps[1].timeout: "soon" is not a duration`},
		{"timeout: 2m", "timeout: 2m\n        bogus: 1", "runbooks[0].steps[1].bogus: unknown key"},
	} {
		if !strings.Contains(runbookConfig, tc.old) {
			t.Fatalf("%q not in the config", tc.old)
		}
		_, err := Parse([]byte(strings.Replace(runbookConfig, tc.old, tc.new, 1)), env(map[string]string{"HOME_DIR": "/srv"}))
		var ke *Error
		if !errors.As(err, &ke) || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("%s → %s: got %v\nwant %s…", tc.old, tc.new, err, tc.want)
		}
	}
}

// A gemini model without a key is off (the example's ${GEMINI_API_KEY:-}
// unset); a key, or an openai provider without one (a local server),
// is a model.
func TestModelOff(t *testing.T) {
	for src, off := range map[string]bool{
		"model: {provider: gemini, name: x, api_key: '${GEMINI_API_KEY:-}'}\n": true,
		"model: {provider: gemini, name: x}\n":                                 true,
		"model: {provider: gemini, name: x, api_key: k}\n":                     false,
		"model: {provider: openai, name: x}\n":                                 false,
	} {
		c, err := Parse([]byte(src), env(nil))
		if err != nil || c.Model.Off() != off {
			t.Errorf("%s: off %v, err %v", src, c != nil && c.Model.Off(), err)
		}
	}
	// Unset without a default is still an error naming the variable.
	if _, err := Parse([]byte("model: {provider: gemini, name: x, api_key: '${GEMINI_API_KEY}'}\n"), env(nil)); err == nil || !strings.Contains(err.Error(), "GEMINI_API_KEY is not set") {
		t.Fatalf("%v", err)
	}
}

// A secret (an environment value or a file's text of secret length) is
// not put into a runbook step's args: the reference stays as text and
// StepSecret gives its value, which is still redacted everywhere; a
// short value, as elsewhere, is put in.
func TestRunbookStepSecretsStayReferences(t *testing.T) {
	const token = "tok-live-0123456789"
	c, err := Parse([]byte(runbookConfig), env(map[string]string{"HOME_DIR": token}))
	if err != nil {
		t.Fatal(err)
	}
	st := c.Runbook("restart").Step("before")
	raw, err := st.Args(runbook.Vars{Params: map[string]any{"service": "api"}})
	if err != nil {
		t.Fatal(err)
	}
	if got := string(raw); got != `{"home":"${HOME_DIR}","note":"api in ${HOME_DIR}","service":"api"}` {
		t.Fatalf("args %s", got)
	}
	if strings.Contains(string(c.Runbook("restart").Snapshot()), token) {
		t.Fatal("the snapshot holds the secret")
	}
	if v, ok := c.StepSecret("${HOME_DIR}"); !ok || v != token {
		t.Fatalf("StepSecret = %q, %v", v, ok)
	}
	if _, ok := c.StepSecret("${OTHER}"); ok {
		t.Fatal("StepSecret of a reference the file does not hold")
	}
	found := false
	for _, s := range c.Secrets() {
		found = found || s == token
	}
	if !found {
		t.Fatal("the secret is not redacted")
	}
}
