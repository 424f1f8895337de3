package main

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/airlockhq/airlock/model/modeltest"
)

// modelRunbookRig is the config of the model's runbook test: the restart runbook
// (status, the gated deploy, status) offered in COPS, whose approver is
// UALICE, over Slack HTTP mode and SQLite.
func modelRunbookRig(t *testing.T, model *modeltest.OpenAIServer) (*slackAPI, *toolServer, string, string) {
	t.Helper()
	api := newSlackAPI(t)
	tools := newToolServer(t)
	dir := t.TempDir()
	addr := freeAddr(t)
	cfg := fmt.Sprintf(`
%s
channels:
  - {platform: slack, id: COPS, approvers: [UALICE]}
tools:
  - name: status
    parameters: {type: object, properties: {service: {type: string}}, required: [service]}
    http: {method: POST, url: "%s/status/{{.service}}"}
%s
runbooks:
  - name: restart
    description: Restart a service and check it came back.
    parameters: {type: object, properties: {service: {type: string, enum: [api, web]}}, required: [service]}
    steps:
      - {id: before, tool: status, args: {service: "{{ params.service }}"}}
      - {id: deploy, tool: deploy, args: {service: "{{ params.service }}"}}
      - {id: after, tool: status, args: {service: "{{ params.service }}"}}
`, slackRunHead(addr, "sqlite", filepath.Join(dir, "airlock.db"), model.BaseURL(), api.URL+"/api/"), tools.URL, deployToolYAML(tools.URL, "service"))
	return api, tools, addr, writeConfig(t, dir, cfg)
}

// hitsOn are the tool server's hits on path.
func (ts *toolServer) hitsOn(path string) []toolHit {
	var out []toolHit
	for _, h := range ts.calls() {
		if h.Path == path {
			out = append(out, h)
		}
	}
	return out
}

// TestRunbookStartedByModel: the model calls runbook__restart (offered
// with the runbook's schema); the run starts in the thread, its gated
// step waits on a card, and once the run has ended the model gets the
// run's summary as the call's result and answers.
func TestRunbookStartedByModel(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the real binary")
	}
	model := callingModel(t, modeltest.OpenAIToolCall{ID: "c1", Name: "runbook__restart", Arguments: `{"service":"web"}`})
	api, tools, addr, path := modelRunbookRig(t, model)
	startRun(t, path)
	waitReady(t, addr)
	body := slackEvent("T1", "EvRB2", "app_mention", "COPS", "UREQ", "1800000004.000001", "", "<@UBOT> please restart web")
	if code, err := postSigned(addr, body, "application/json"); err != nil || code != 200 {
		t.Fatalf("event: %d %v", code, err)
	}
	waitUntil(t, "the gated step's card", func() bool { return api.cards() == 1 })
	reqs := model.Requests()
	var offered bool
	for _, tl := range reqs[0].Tools {
		offered = offered || (tl.Name == "runbook__restart" && strings.Contains(string(tl.Parameters), `"enum":["api","web"]`))
	}
	if !offered || len(reqs) != 1 {
		t.Fatalf("%d requests; tools %+v", len(reqs), reqs[0].Tools)
	}
	allow := api.buttons("airlock_allow")[0]
	if code, err := postSigned(addr, actionBody("UALICE", "airlock_allow", allow), "application/x-www-form-urlencoded"); err != nil || code != 200 {
		t.Fatalf("click: %d %v", code, err)
	}
	var answer string
	waitUntil(t, "the model's answer after the run", func() bool {
		for _, p := range api.posts() {
			if strings.Contains(p.Get("text"), "model saw: Runbook restart") {
				answer = p.Get("text")
				return true
			}
		}
		return false
	})
	for _, want := range []string{"succeeded", "- deploy (deploy), attempt 1: succeeded", "- after (status), attempt 1: succeeded"} {
		if !strings.Contains(answer, want) {
			t.Fatalf("the summary the model saw lacks %q: %q", want, answer)
		}
	}
	if len(tools.hitsOn("/deploy/web")) != 1 || len(tools.hitsOn("/status/web")) != 2 {
		t.Fatalf("tool hits: %+v", tools.calls())
	}
}
