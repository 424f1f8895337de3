package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/airlockhq/airlock/model/modeltest"
)

// runbookRig is a real `airlock run` (Slack HTTP mode, SQLite) with the
// runbook restart: a read-only status step, a gated restart and a status
// check after, against a fake tool service, with a model that must never
// be asked.
type runbookRig struct {
	t     *testing.T
	api   *slackAPI
	tools *toolServer
	model *modeltest.OpenAIServer
	addr  string
	path  string
	db    string   // the SQLite file
	env   []string // the process's environment, added
}

func newRunbookRig(t *testing.T) *runbookRig {
	return newRunbookRigWith(t, `{service: "{{ params.service }}"}`)
}

// newRunbookRigWith is newRunbookRig whose restart step has restartArgs.
func newRunbookRigWith(t *testing.T, restartArgs string) *runbookRig {
	r := &runbookRig{t: t, api: newSlackAPI(t), tools: newToolServer(t), addr: freeAddr(t)}
	r.model = modeltest.NewOpenAIServer(t, func(modeltest.OpenAIRequest) modeltest.OpenAIReply {
		return modeltest.TextReply("the model was asked")
	})
	dir := t.TempDir()
	cfg := fmt.Sprintf(`
%s
channels:
  - {platform: slack, id: COPS, approvers: [UALICE]}
confirmation: {timeout: 1h}
tools:
  - name: service_status
    parameters: {type: object, properties: {service: {type: string}}, required: [service]}
    http: {method: GET, url: "%[2]s/status/{{.service}}"}
  - name: restart_service
    confirm: true
    parameters: {type: object, properties: {service: {type: string}}, required: [service]}
    http: {method: POST, url: "%[2]s/restart/{{.service}}"}
runbooks:
  - name: restart
    description: Restart a service and check it came back.
    parameters:
      type: object
      properties:
        service: {type: string, enum: [api, web]}
      required: [service]
      additionalProperties: false
    steps:
      - {id: before, tool: service_status, args: {service: "{{ params.service }}"}}
      - {id: restart, tool: restart_service, args: %[3]s}
      - {id: after, tool: service_status, args: {service: "{{ params.service }}"}}
`, slackRunHead(r.addr, "sqlite", filepath.Join(dir, "airlock.db"), r.model.BaseURL(), r.api.URL+"/api/"), r.tools.URL, restartArgs)
	r.path = writeConfig(t, dir, cfg)
	r.db = filepath.Join(dir, "airlock.db")
	return r
}

func (r *runbookRig) start() *exec.Cmd {
	cmd, _ := startRun(r.t, r.path, r.env...)
	waitReady(r.t, r.addr)
	return cmd
}

// mention posts "@airlock <text>" as UREQ in COPS, starting thread ts.
func (r *runbookRig) mention(eventID, ts, text string) {
	r.t.Helper()
	body := slackEvent("T1", eventID, "app_mention", "COPS", "UREQ", ts, ts, "<@UBOT> "+text)
	if code, err := postSigned(r.addr, body, "application/json"); err != nil || code != 200 {
		r.t.Fatalf("event: %d %v", code, err)
	}
}

func (r *runbookRig) press(user, actionID, value string) {
	r.t.Helper()
	if code, err := postSigned(r.addr, actionBody(user, actionID, value), "application/x-www-form-urlencoded"); err != nil || code != 200 {
		r.t.Fatalf("click: %d %v", code, err)
	}
}

// hits counts the tool service's requests to path.
func (r *runbookRig) hits(path string) int {
	return r.tools.count(path)
}

// runMessage is the latest rendering of the run message (the message
// naming every step, posted or edited in place), text and blocks.
func (r *runbookRig) runMessage() string {
	last := ""
	for _, p := range append(r.api.posts(), r.api.updates()...) {
		if s := p.Get("text") + "\n" + p.Get("blocks"); strings.Contains(s, "before") && strings.Contains(s, "after") {
			last = s
		}
	}
	return last
}

// TestRunbookSurvivesSIGKILLWhileAStepWaits starts the restart runbook by
// a mention, kills the process with SIGKILL while the gated step waits on
// its card, restarts it, allows the step, and checks the run finishes with
// each tool run exactly once, the gated one with the run's idempotency
// key, and the model never asked.
func TestRunbookSurvivesSIGKILLWhileAStepWaits(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the real binary")
	}
	r := newRunbookRig(t)
	cmd := r.start()
	const thread = "1800000009.000001"
	r.mention("EvRb1", thread, "run restart service=api")
	waitUntil(t, "the restart step's card", func() bool { return len(r.api.buttons("airlock_allow")) == 1 })
	if r.hits("/status/api") != 1 || r.hits("/restart/api") != 0 {
		t.Fatalf("before the decision: status %d, restart %d", r.hits("/status/api"), r.hits("/restart/api"))
	}
	for _, p := range r.api.posts() {
		if strings.Contains(p.Get("blocks"), "airlock_allow") && p.Get("thread_ts") != thread {
			t.Fatalf("the step's card is not in the run's thread: %v", p)
		}
	}

	_ = cmd.Process.Kill() // SIGKILL: no cleanup runs
	_ = cmd.Wait()
	r.start()

	allow := r.api.buttons("airlock_allow")[0]
	r.press("UMALLORY", "airlock_allow", allow)
	waitUntil(t, "the stranger is refused", func() bool {
		for _, e := range r.api.ephemerals("UMALLORY") {
			if strings.Contains(e, "can't approve") {
				return true
			}
		}
		return false
	})
	if r.hits("/restart/api") != 0 {
		t.Fatal("a stranger's click ran the gated step")
	}
	r.press("UALICE", "airlock_allow", allow)
	waitUntil(t, "the run finishes", func() bool { return r.hits("/status/api") == 2 })
	waitUntil(t, "the run message shows every step done", func() bool {
		m := r.runMessage()
		return strings.Contains(m, "succeeded") && !strings.Contains(m, "waiting") && !strings.Contains(m, "running") && !strings.Contains(m, "needs approval")
	})
	r.press("UALICE", "airlock_allow", allow) // a second click changes nothing
	waitUntil(t, "the second click is answered", func() bool { return len(r.api.ephemerals("UALICE")) > 0 })
	if s, g := r.hits("/status/api"), r.hits("/restart/api"); s != 2 || g != 1 {
		t.Fatalf("status ran %d times, restart %d; want 2 and 1", s, g)
	}
	for _, h := range r.tools.calls() {
		if h.Path == "/restart/api" && !strings.HasSuffix(h.IdempotencyKey, "/restart/1") {
			t.Fatalf("the gated step's idempotency key is %q, want <run id>/restart/1", h.IdempotencyKey)
		}
	}
	if n := len(r.model.Requests()); n != 0 {
		t.Fatalf("the model was asked %d times during a runbook", n)
	}
}

// TestRunbookBadParametersRunNothing: a value outside the enum, a missing
// parameter, an unknown parameter and an unknown runbook are each answered
// in the thread, naming what is wrong and what is allowed, and nothing
// runs (no tool, no card, no model).
func TestRunbookBadParametersRunNothing(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the real binary")
	}
	r := newRunbookRig(t)
	r.start()
	cases := []struct{ text, want string }{
		{"run restart service=db", "service"},
		{"run restart", "service"},
		{`run restart service=api owner="<!channel> x"`, "owner"},
		{"run reboot service=api", "restart"},
	}
	for i, c := range cases {
		ts := fmt.Sprintf("18000000%02d.000001", 20+i)
		before := len(r.api.posts())
		r.mention(fmt.Sprintf("EvBad%d", i), ts, c.text)
		waitUntil(t, "the answer to "+c.text, func() bool { return len(r.api.posts()) > before })
		got := r.api.posts()[before]
		if got.Get("thread_ts") != ts || !strings.Contains(got.Get("text")+got.Get("blocks"), c.want) {
			t.Fatalf("%q answered %v, want a line in its thread naming %q", c.text, got, c.want)
		}
		if strings.Contains(got.Get("text")+got.Get("blocks"), "<!channel>") {
			t.Fatalf("%q: the answer pings the channel: %v", c.text, got)
		}
	}
	if n := len(r.tools.calls()); n != 0 {
		t.Fatalf("bad parameters ran %d tool calls", n)
	}
	if n := len(r.api.buttons("airlock_allow")); n != 0 {
		t.Fatalf("bad parameters posted %d cards", n)
	}
	if n := len(r.model.Requests()); n != 0 {
		t.Fatalf("the model was asked %d times", n)
	}
}

// TestRunbookStepSecretStaysOutOfTheDatabase (issue 34, item 8): a token
// the restart step's arguments read from the environment reaches the tool
// service, and the card shows its reference; after the run, neither the
// SQLite file nor its write-ahead log holds the token.
func TestRunbookStepSecretStaysOutOfTheDatabase(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the real binary")
	}
	const token = "e2e-token-7c1d9b3a5f"
	r := newRunbookRigWith(t, `{service: "{{ params.service }}", token: "Bearer ${AIRLOCK_E2E_RUNBOOK_TOKEN}"}`)
	r.env = []string{"AIRLOCK_E2E_RUNBOOK_TOKEN=" + token}
	cmd := r.start()
	r.mention("EvRbS1", "1800000019.000001", "run restart service=api")
	waitUntil(t, "the restart step's card", func() bool { return len(r.api.buttons("airlock_allow")) == 1 })
	shown := false
	for _, p := range r.api.posts() {
		shown = shown || strings.Contains(p.Get("blocks"), "${AIRLOCK_E2E_RUNBOOK_TOKEN}")
	}
	if !shown {
		t.Fatal("the card does not show the token's reference")
	}
	r.press("UALICE", "airlock_allow", r.api.buttons("airlock_allow")[0])
	waitUntil(t, "the run finishes", func() bool { return r.hits("/status/api") == 2 })
	sent := ""
	for _, h := range r.tools.calls() {
		if h.Path == "/restart/api" {
			sent = h.Body
		}
	}
	if !strings.Contains(sent, `"Bearer `+token+`"`) {
		t.Fatalf("the tool service got %q, want the token", sent)
	}
	_ = cmd.Process.Kill() // the files as a crash leaves them, write-ahead log included
	_ = cmd.Wait()
	for _, f := range []string{r.db, r.db + "-wal"} {
		b, err := os.ReadFile(f)
		if err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
		if strings.Contains(string(b), token) {
			t.Errorf("%s holds the token read from the environment", filepath.Base(f))
		}
	}
}
