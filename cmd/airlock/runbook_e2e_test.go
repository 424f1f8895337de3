package main

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/airlockhq/airlock/model/modeltest"
)

// TestRunbookAcrossKill drives a real `airlock run` (Slack HTTP mode,
// SQLite): a mention starts a runbook whose middle step is gated; the
// process is killed with SIGKILL while that step's card waits; a new
// process on the same database takes the run up, the card still works,
// Allow runs the step, the run finishes, and each tool ran once with its
// <run>/<step>/<attempt> key. The model is never asked.
func TestRunbookAcrossKill(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the real binary")
	}
	api := newSlackAPI(t)
	tools := newToolServer(t)
	model := modeltest.NewOpenAIServer(t, func(modeltest.OpenAIRequest) modeltest.OpenAIReply {
		return modeltest.TextReply("the model should not be asked")
	})
	dir := t.TempDir()
	addr := freeAddr(t)
	cfg := fmt.Sprintf(`
listen: %s
storage: {driver: sqlite, dsn: %q}
%s
channels:
  - {platform: slack, id: COPS, approvers: [UALICE]}
limits: {turns_per_minute: 0}
tools:
  - name: status
    parameters: {type: object, properties: {service: {type: string}}, required: [service]}
    http: {method: POST, url: "%s/status/{{.service}}"}
%s
runbooks:
  - name: restart
    parameters: {type: object, properties: {service: {type: string, enum: [api, web]}}, required: [service]}
    steps:
      - {id: before, tool: status, args: {service: "{{ params.service }}"}}
      - {id: deploy, tool: deploy, args: {service: "{{ params.service }}"}}
      - {id: after, tool: status, args: {service: "{{ params.service }}"}}
`, addr, filepath.Join(dir, "airlock.db"), slackRunYAML(model.BaseURL(), api.URL+"/api/"), tools.URL, deployToolYAML(tools.URL, "service"))
	path := writeConfig(t, dir, cfg)

	cmd, _ := startRun(t, path)
	waitReady(t, addr)
	body := slackEvent("T1", "EvRB1", "app_mention", "COPS", "UREQ", "1800000003.000001", "", "<@UBOT> run restart service=api")
	if code, err := postSigned(addr, body, "application/json"); err != nil || code != 200 {
		t.Fatalf("event: %d %v", code, err)
	}
	waitUntil(t, "the gated step's card", func() bool { return api.cards() == 1 })
	hits := func(path string) []toolHit {
		var out []toolHit
		for _, h := range tools.calls() {
			if h.Path == path {
				out = append(out, h)
			}
		}
		return out
	}
	if n := len(hits("/status/api")); n != 1 || len(hits("/deploy/api")) != 0 {
		t.Fatalf("before the decision: status ran %d times, deploy %d", n, len(hits("/deploy/api")))
	}
	var runPost string
	for _, p := range api.posts() {
		if strings.Contains(p.Get("blocks"), `"block_id":"run"`) {
			runPost = p.Get("text")
			if p.Get("thread_ts") != "1800000003.000001" {
				t.Fatalf("the run message is not in the mention's thread: %v", p)
			}
		}
	}
	if !strings.Contains(runPost, "Runbook restart") {
		t.Fatalf("no run message: %q", api.texts())
	}

	// The run message says the step waits (the card was recorded first).
	waitUntil(t, "the run message saying the step waits", func() bool {
		for _, u := range api.updates() {
			if strings.Contains(u.Get("text"), "- deploy (deploy): needs approval") {
				return true
			}
		}
		return false
	})

	// SIGKILL while the step waits: nothing of the process cleans up.
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	startRun(t, path)
	waitReady(t, addr)
	allow := api.buttons("airlock_allow")[0]
	on := messagesOf(allow) // the card, as the new process found it waiting
	if code, err := postSigned(addr, actionBodyOn(on[len(on)-1], "UALICE", "airlock_allow", allow), "application/x-www-form-urlencoded"); err != nil || code != 200 {
		t.Fatalf("click: %d %v", code, err)
	}
	waitUntil(t, "the run's end on its message", func() bool {
		for _, u := range api.updates() {
			if strings.Contains(u.Get("text"), "Runbook restart") && strings.Contains(u.Get("text"), ": succeeded\n") {
				return true
			}
		}
		return false
	})
	deploys := hits("/deploy/api")
	if len(deploys) != 1 || !strings.HasSuffix(deploys[0].IdempotencyKey, "/deploy/1") {
		t.Fatalf("deploy ran %+v, want once with <run>/deploy/1", deploys)
	}
	statuses := hits("/status/api")
	if len(statuses) != 2 || !strings.HasSuffix(statuses[0].IdempotencyKey, "/before/1") || !strings.HasSuffix(statuses[1].IdempotencyKey, "/after/1") {
		t.Fatalf("status ran %+v, want before/1 then after/1", statuses)
	}
	if n := len(model.Requests()); n != 0 {
		t.Fatalf("the model was asked %d times", n)
	}
}
