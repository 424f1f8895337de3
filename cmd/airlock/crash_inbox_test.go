package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/airlockhq/airlock/internal/testkit"
	"github.com/airlockhq/airlock/model/modeltest"
)

// ackRig is `airlock run` (the crashtest build) in Slack HTTP mode on a
// SQLite file, against the fake Slack, model and tool service.
type ackRig struct {
	t     *testing.T
	api   *slackAPI
	tools *toolServer
	path  string
	addr  string
}

func newAckRig(t *testing.T) *ackRig {
	r := &ackRig{t: t, api: newSlackAPI(t), tools: newToolServer(t), addr: freeAddr(t)}
	model := modeltest.NewOpenAIServer(t, agent)
	dir := t.TempDir()
	r.path = filepath.Join(dir, "airlock.yaml")
	cfg := slackRunHead(r.addr, "sqlite", filepath.Join(dir, "airlock.db"), model.BaseURL(), r.api.URL+"/api/") + fmt.Sprintf(`
channels: [{platform: slack, id: COPS, approvers: [UALICE]}]
tools:
  - name: service_status
    parameters: {type: object, properties: {service: {type: string}}, required: [service]}
    http: {method: POST, url: "%s/status/{{.service}}"}
%s
`, r.tools.URL, deployToolYAML(r.tools.URL, "service", "environment"))
	if err := os.WriteFile(r.path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return r
}

// start runs the crashtest build, killing itself at crashAt when set, and
// waits until it is ready; the channel closes when it exited.
func (r *ackRig) start(crashAt string) <-chan struct{} {
	r.t.Helper()
	cmd := exec.Command(airlockBinary(r.t, "crashtest"), "run", "-config", r.path)
	cmd.Env = os.Environ()
	if crashAt != "" {
		cmd.Env = append(cmd.Env, "AIRLOCK_CRASH_AT="+crashAt)
	}
	logs := &testkit.Buffer{}
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		r.t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	r.t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
		if r.t.Failed() {
			r.t.Logf("logs (crash at %q):\n%s", crashAt, logs.String())
		}
	})
	waitReady(r.t, r.addr)
	return exited
}

func (r *ackRig) post(body []byte, contentType string) {
	r.t.Helper()
	if code, err := postSigned(r.addr, body, contentType); err != nil || code != 200 {
		r.t.Fatalf("the delivery was not acknowledged: %d %v", code, err)
	}
}

func (r *ackRig) died(exited <-chan struct{}) {
	r.t.Helper()
	select {
	case <-exited:
	case <-time.After(20 * time.Second):
		r.t.Fatal("the process did not die at the crash point")
	}
}

func (r *ackRig) answered() bool {
	return strings.Contains(strings.Join(r.api.texts(), "\n"), "model saw:")
}

// TestCrashBetweenAckAndWork kills the real binary with SIGKILL right
// after it acknowledged a Slack delivery (an empty 200 sent), before any
// work on it started, and starts it again on the same database: the
// person who got the acknowledgement does nothing more. A click still
// decides its card (the tool runs once, the model answers); a mention is
// still answered (its card is posted, once).
func TestCrashBetweenAckAndWork(t *testing.T) {
	skipShort(t)
	t.Run("a click", func(t *testing.T) {
		r := newAckRig(t)
		exited := r.start("slack-acked-interaction")
		r.post(mentionBody("EvCrashClick", "1800000000.000700", "", "deploy api"), "application/json")
		waitUntil(t, "the card", func() bool { return r.api.allowValue() != "" })
		r.post(clickBody("UALICE", r.api.allowValue()), "application/x-www-form-urlencoded")
		r.died(exited)
		if n := len(r.tools.calls()); n != 0 {
			t.Fatalf("tools ran before the kill: %d", n)
		}
		r.start("")
		waitUntil(t, "the acknowledged click's decision to run the calls and the model to answer", r.answered)
		time.Sleep(300 * time.Millisecond) // a second run would arrive now
		if r.tools.count("/deploy/api") != 1 || r.tools.count("/status/api") != 1 {
			t.Fatalf("after the restart the tools ran %+v; want each once", r.tools.calls())
		}
		if e := r.api.ephemerals("UALICE"); len(e) != 0 {
			t.Fatalf("the clicker was told something: %q", e)
		}
	})
	t.Run("a mention", func(t *testing.T) {
		r := newAckRig(t)
		exited := r.start("slack-acked-event")
		r.post(mentionBody("EvCrashMention", "1800000000.000800", "", "deploy api"), "application/json")
		r.died(exited)
		r.start("")
		waitUntil(t, "the acknowledged mention's card", func() bool { return r.api.cards() == 1 })
		// Slack retrying the event (its ack was in time, so it would not)
		// changes nothing: recorded once, worked once.
		r.post(mentionBody("EvCrashMention", "1800000000.000800", "", "deploy api"), "application/json")
		r.post(clickBody("UALICE", r.api.allowValue()), "application/x-www-form-urlencoded")
		waitUntil(t, "the answer", r.answered)
		if n := r.api.cards(); n != 1 {
			t.Fatalf("%d cards for one mention", n)
		}
	})
}

// TestCrashBetweenAnswerStoredAndPosted kills the real binary with
// SIGKILL after it stored the model's answer and before it posted it,
// and starts it again on the same database: the person who asked sees the
// answer in the thread, once, without doing anything.
func TestCrashBetweenAnswerStoredAndPosted(t *testing.T) {
	skipShort(t)
	r := newAckRig(t)
	exited := r.start("answer-stored")
	r.post(mentionBody("EvCrashAnswer", "1800000000.000900", "", "deploy api"), "application/json")
	waitUntil(t, "the card", func() bool { return r.api.allowValue() != "" })
	r.post(clickBody("UALICE", r.api.allowValue()), "application/x-www-form-urlencoded")
	r.died(exited)
	if r.answered() {
		t.Fatal("the answer was posted before the kill")
	}
	r.start("")
	waitUntil(t, "the stored answer after the restart", r.answered)
	time.Sleep(1500 * time.Millisecond) // the answers job's next run: a second post would arrive now
	n := 0
	for _, s := range r.api.texts() {
		if strings.Contains(s, "model saw:") {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("the answer was posted %d times; want once", n)
	}
	if r.tools.count("/deploy/api") != 1 || r.tools.count("/status/api") != 1 {
		t.Fatalf("after the restart the tools ran %+v; want each once", r.tools.calls())
	}
}
