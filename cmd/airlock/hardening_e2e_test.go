package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/airlockhq/airlock/events"
	"github.com/airlockhq/airlock/model/modeltest"
)

// slackEvent builds an Events API callback as Slack sends it.
func slackEvent(team, eventID, typ, channel, user, ts, threadTS, text string) []byte {
	ev := map[string]any{"type": typ, "user": user, "text": text, "ts": ts, "channel": channel, "event_ts": ts, "channel_type": "channel"}
	if threadTS != "" {
		ev["thread_ts"] = threadTS
	}
	b, _ := json.Marshal(map[string]any{"type": "event_callback", "team_id": team, "api_app_id": "A1", "event_id": eventID, "event_time": time.Now().Unix(), "event": ev})
	return b
}

// TestRunHardening drives a real `airlock run` (Slack HTTP mode, SQLite)
// as an attacker would: a stranger's channel, another workspace, a
// bystander trying to cancel a card, and a tool error that carries a
// secret.
func TestRunHardening(t *testing.T) {
	skipShort(t)
	const secret = "sk-status-0123456789"
	api := newSlackAPI(t)
	// The status service answers 500 and echoes what it got, token included.
	status := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusInternalServerError)
		fmt.Fprintf(w, "bad token %s for %s", r.URL.Query().Get("token"), r.URL.String())
	}))
	t.Cleanup(status.Close)
	tools := newToolServer(t)

	var mu sync.Mutex
	var requests []modeltest.OpenAIRequest
	model := modeltest.NewOpenAIServer(t, func(req modeltest.OpenAIRequest) modeltest.OpenAIReply {
		mu.Lock()
		requests = append(requests, req)
		mu.Unlock()
		last := req.Messages[len(req.Messages)-1]
		switch {
		case last.Role == "tool":
			return modeltest.TextReply("model saw: " + last.Content)
		case strings.Contains(last.Content, "check status"):
			return modeltest.CallsReply(modeltest.OpenAIToolCall{ID: "s1", Name: "service_status", Arguments: `{"service":"api"}`})
		case strings.Contains(last.Content, "deploy api"):
			return modeltest.CallsReply(modeltest.OpenAIToolCall{ID: "d1", Name: "deploy", Arguments: `{"service":"api"}`})
		}
		return modeltest.TextReply("hello")
	})
	asked := func() int { mu.Lock(); defer mu.Unlock(); return len(requests) }

	dir := t.TempDir()
	addr := freeAddr(t)
	dbPath := filepath.Join(dir, "airlock.db")
	cfg := fmt.Sprintf(`
listen: %s
storage: {driver: sqlite, dsn: %q}
%s
channels: [{platform: slack, id: COPS, approvers: [UALICE]}]
tools:
  - name: service_status
    parameters: {type: object, properties: {service: {type: string}}, required: [service]}
    http: {method: GET, url: "%s/status/{{.service}}?token=${STATUS_TOKEN}"}
%s
`, addr, dbPath, slackRunYAML(model.BaseURL(), api.URL+"/api/"), status.URL, deployToolYAML(tools.URL, "service"))
	path := writeConfig(t, dir, cfg)
	cmd, logs := startRun(t, path, "STATUS_TOKEN="+secret)
	waitReady(t, addr)
	post := func(body []byte) {
		t.Helper()
		if code, err := postSigned(addr, body, "application/json"); err != nil || code != 200 {
			t.Fatalf("event: %d %v", code, err)
		}
	}
	said := func(s string) func() bool {
		return func() bool {
			for _, x := range api.texts() {
				if strings.Contains(x, s) {
					return true
				}
			}
			return false
		}
	}

	// pprof is off unless debug.pprof says so.
	if resp, err := http.Get("http://" + addr + "/debug/pprof/"); err != nil {
		t.Fatal(err)
	} else if resp.Body.Close(); resp.StatusCode != http.StatusNotFound {
		t.Fatalf("/debug/pprof/ without debug.pprof: %d", resp.StatusCode)
	}

	// 1. A stranger in a channel without an entry: one reply, no model.
	post(slackEvent("T1", "Ev1", "app_mention", "CSTRANGER", "UMAL", "1800000000.000001", "", "<@UBOT> check status"))
	waitUntil(t, "the not-enabled reply", said("not enabled in this channel"))

	// 2. Another workspace's event in a served channel: nothing.
	post(slackEvent("T2", "Ev2", "app_mention", "COPS", "UMAL", "1800000000.000002", "", "<@UBOT> check status"))

	// 3. A card, a bystander's "cancel", and the approver's Allow.
	post(slackEvent("T1", "Ev3", "app_mention", "COPS", "UREQ", "1800000000.000100", "", "<@UBOT> deploy api"))
	waitUntil(t, "the card", func() bool { return api.allowValue() != "" })
	if n := asked(); n != 1 {
		t.Fatalf("the model was asked %d times; the stranger's or the other workspace's mention reached it", n)
	}
	post(slackEvent("T1", "Ev4", "app_mention", "COPS", "UBOB", "1800000000.000101", "1800000000.000100", "<@UBOT> cancel that, never mind"))
	waitUntil(t, "the bystander is told", said("only the person who asked or an approver"))
	if code, err := postSigned(addr, clickBody("UALICE", api.allowValue()), "application/x-www-form-urlencoded"); err != nil || code != 200 {
		t.Fatalf("click: %d %v", code, err)
	}
	waitUntil(t, "the deploy", func() bool { return len(tools.calls()) == 1 })

	// 4. A tool error that echoes the secret token and the URL.
	post(slackEvent("T1", "Ev5", "app_mention", "COPS", "UREQ", "1800000000.000200", "", "<@UBOT> check status"))
	waitUntil(t, "the answer after the failed status", said("model saw: "))
	mu.Lock()
	var sent []string
	for _, r := range requests {
		for _, m := range r.Messages {
			sent = append(sent, m.Content)
		}
	}
	mu.Unlock()
	for _, s := range append(sent, api.texts()...) {
		if strings.Contains(s, secret) {
			t.Fatalf("the secret reached the model or the thread: %q", s)
		}
	}
	if !strings.Contains(strings.Join(sent, "\n"), "[redacted]") {
		t.Fatalf("the model never saw the scrubbed error: %q", sent)
	}
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	for _, f := range []string{dbPath, dbPath + "-wal"} {
		data, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		if strings.Contains(string(data), secret) {
			t.Fatalf("the secret is in %s", filepath.Base(f))
		}
	}
	if strings.Contains(logs.String(), secret) {
		t.Fatal("the secret is in the logs")
	}
}

// TestRunDrainsOnSIGTERM: SIGTERM while an allowed deploy is running lets
// it finish (within shutdown_timeout), takes no new clicks, and exits.
func TestRunDrainsOnSIGTERM(t *testing.T) {
	skipShort(t)
	api := newSlackAPI(t)
	tools := newToolServer(t)
	release := make(chan struct{})
	tools.mu.Lock()
	tools.block = release
	tools.mu.Unlock()
	model := modeltest.NewOpenAIServer(t, agent)
	dir := t.TempDir()
	addr := freeAddr(t)
	cfg := fmt.Sprintf(`
listen: %s
shutdown_timeout: 20s
log: {format: json}
debug: {pprof: true}
storage: {driver: sqlite, dsn: %q}
%s
channels: [{platform: slack, id: COPS, approvers: [UALICE]}]
tools:
%s
`, addr, filepath.Join(dir, "airlock.db"), slackRunYAML(model.BaseURL(), api.URL+"/api/"), deployToolYAML(tools.URL, "service", "environment"))
	path := writeConfig(t, dir, cfg)
	cmd, logs := startRun(t, path)
	waitReady(t, addr)
	if resp, err := http.Get("http://" + addr + "/debug/pprof/"); err != nil {
		t.Fatal(err)
	} else if resp.Body.Close(); resp.StatusCode != http.StatusOK {
		t.Fatalf("/debug/pprof/ with debug.pprof: %d", resp.StatusCode)
	}
	askAndAllowDeploy(t, addr, api, "EvS1")
	waitUntil(t, "the deploy request", func() bool { return len(tools.calls()) == 1 })
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "shutting down", func() bool { return strings.Contains(logs.String(), `"msg":"shutting down"`) })
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	select {
	case err := <-exited:
		t.Fatalf("exited (%v) while a tool run was going on", err)
	case <-time.After(500 * time.Millisecond):
	}
	close(release)
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("exit: %v\n%s", err, logs.String())
		}
	case <-time.After(20 * time.Second):
		t.Fatal("did not exit after the run finished")
	}
	out, err := exec.Command(airlockBinary(t), "audit", "-config", path, "-json").CombinedOutput()
	if err != nil || !strings.Contains(string(out), `"outcome":"succeeded"`) {
		t.Fatalf("the drained run was not recorded as succeeded: %v\n%s", err, out)
	}
}

// TestRunWebhooksSurviveDowntimeAndRestart: the receiver is down while a
// turn happens and Airlock is killed before anything was delivered; after a
// restart the receiver, now up, gets every event of the turn, in order,
// each signed, none twice.
func TestRunWebhooksSurviveDowntimeAndRestart(t *testing.T) {
	skipShort(t)
	const secret = "webhook-secret-abcdef0123"
	var mu sync.Mutex
	up := false
	var got []string // "type call" in arrival order
	seen := map[string]int{}
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		defer mu.Unlock()
		if !up {
			http.Error(w, "down for maintenance", http.StatusServiceUnavailable)
			return
		}
		if err := events.Verify(secret, r.Header.Get(events.SignatureHeader), body, time.Now(), 5*time.Minute); err != nil {
			t.Errorf("signature: %v", err)
		}
		var ev struct{ ID, Type, Call string }
		_ = json.Unmarshal(body, &ev)
		seen[ev.ID]++
		got = append(got, ev.Type+" "+ev.Call)
	}))
	t.Cleanup(hook.Close)
	api := newSlackAPI(t)
	tools := newToolServer(t)
	model := modeltest.NewOpenAIServer(t, agent)
	dir := t.TempDir()
	addr := freeAddr(t)
	cfg := fmt.Sprintf(`
listen: %s
events: {webhooks: [{url: %q, secret: %q}]}
storage: {driver: sqlite, dsn: %q}
%s
channels: [{platform: slack, id: COPS, approvers: [UALICE]}]
tools:
%s
`, addr, hook.URL, secret, filepath.Join(dir, "airlock.db"), slackRunYAML(model.BaseURL(), api.URL+"/api/"), deployToolYAML(tools.URL, "service", "environment"))
	path := writeConfig(t, dir, cfg)
	cmd, _ := startRun(t, path)
	waitReady(t, addr)
	askAndAllowDeploy(t, addr, api, "EvW1")
	waitUntil(t, "the deploy", func() bool { return len(tools.calls()) == 1 })
	_ = cmd.Process.Signal(syscall.SIGKILL)
	_ = cmd.Wait()

	mu.Lock()
	up = true
	mu.Unlock()
	startRun(t, path)
	waitReady(t, addr)
	want := []string{"tool_call call_web", "approval_request ", "decision call_web", "tool_result call_web"}
	waitUntil(t, "every event after the restart", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(got) >= len(want)
	})
	time.Sleep(300 * time.Millisecond) // a duplicate would arrive now
	mu.Lock()
	defer mu.Unlock()
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("events in order: %q, want %q", got, want)
	}
	for id, n := range seen {
		if n != 1 {
			t.Fatalf("event %s delivered %d times", id, n)
		}
	}
}

// askAndAllowDeploy asks the running Airlock at addr (event eventID) to
// deploy web in COPS, waits for the card and allows it as UALICE.
func askAndAllowDeploy(t *testing.T, addr string, api *slackAPI, eventID string) {
	t.Helper()
	if code, err := postSigned(addr, slackEvent("T1", eventID, "app_mention", "COPS", "UREQ", "1800000000.000100", "", "<@UBOT> deploy web"), "application/json"); err != nil || code != 200 {
		t.Fatalf("event: %d %v", code, err)
	}
	waitUntil(t, "the card", func() bool { return api.allowValue() != "" })
	if code, err := postSigned(addr, clickBody("UALICE", api.allowValue()), "application/x-www-form-urlencoded"); err != nil || code != 200 {
		t.Fatalf("click: %d %v", code, err)
	}
}
