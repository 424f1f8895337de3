package main

import (
	"encoding/json"
	"fmt"
	"net/url"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/airlockhq/airlock/model/modeltest"
)

// TestRunRouting drives a real `airlock run` (Slack HTTP mode, SQLite)
// with an approvals channel, DM copies and an escalation step: the card is
// posted in the approvals channel with a pointer in the thread and a copy
// in each approver's DM; the escalation fires once although Airlock is
// killed and restarted around it; it lets the step's approver decide;
// Extend moves the deadline once; a click on a DM copy decides and the
// other copies are updated.
func TestRunRouting(t *testing.T) {
	skipShort(t)
	api := newSlackAPI(t)
	tools := newToolServer(t)
	model := callingModel(t, modeltest.OpenAIToolCall{ID: "c1", Name: "deploy", Arguments: `{"service":"web"}`})
	dir := t.TempDir()
	addr := freeAddr(t)
	cfg := fmt.Sprintf(`
%s
channels:
  - {platform: slack, id: COPS, approvers: [UALICE, UBOB], approvals_channel: CAPPROVE, notify: [dm]}
confirmation:
  timeout: 1h
  escalation:
    - {after: 3s, mention: [ULEAD], approvers: [ULEAD]}
tools:
%s
`, slackRunHead(addr, "sqlite", filepath.Join(dir, "airlock.db"), model.BaseURL(), api.URL+"/api/"), deployToolYAML(tools.URL, "service"))
	path := writeConfig(t, dir, cfg)
	start := func() *exec.Cmd {
		cmd, _ := startRun(t, path)
		waitReady(t, addr)
		return cmd
	}
	stop := func(cmd *exec.Cmd) {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	}
	postsIn := func(channel string) []url.Values {
		var out []url.Values
		for _, p := range api.posts() {
			if p.Get("channel") == channel {
				out = append(out, p)
			}
		}
		return out
	}
	escalations := func() int {
		n := 0
		for _, p := range postsIn("CAPPROVE") {
			if strings.Contains(p.Get("text")+p.Get("blocks"), "escalated") {
				n++
			}
		}
		return n
	}
	press := func(user, actionID, value string) {
		t.Helper()
		if code, err := postSigned(addr, actionBody(user, actionID, value), "application/x-www-form-urlencoded"); err != nil || code != 200 {
			t.Fatalf("click: %d %v", code, err)
		}
	}
	told := api.told

	cmd := start()
	body := slackEvent("T1", "EvR1", "app_mention", "COPS", "UREQ", "1800000002.000001", "1800000002.000001", "<@UBOT> deploy web")
	if code, err := postSigned(addr, body, "application/json"); err != nil || code != 200 {
		t.Fatalf("event: %d %v", code, err)
	}
	waitUntil(t, "the card in the approvals channel and its DM copies", func() bool {
		return len(postsIn("CAPPROVE")) == 1 && len(postsIn("DALICE")) == 1 && len(postsIn("DBOB")) == 1
	})
	card := postsIn("CAPPROVE")[0]
	if card.Get("thread_ts") != "" || !strings.Contains(card.Get("blocks"), "https://example.slack.com/archives/COPS/p1800000002000001") {
		t.Fatalf("the approvals card is threaded or lacks the link back: %v", card)
	}
	var pointer url.Values
	for _, p := range postsIn("COPS") {
		if p.Get("thread_ts") == "1800000002.000001" && strings.Contains(p.Get("text")+p.Get("blocks"), "CAPPROVE") {
			pointer = p
		}
	}
	if pointer == nil || strings.Contains(pointer.Get("blocks"), "airlock_allow") {
		t.Fatalf("no pointer without buttons in the thread: %v", postsIn("COPS"))
	}
	allow := api.buttons("airlock_allow")[0]

	// The lead may not decide before the escalation.
	press("ULEAD", "airlock_allow", allow)
	waitUntil(t, "the lead is refused before the escalation", told("ULEAD", "can't approve"))

	// Killed before the step is due, restarted: the step fires once.
	stop(cmd)
	cmd = start()
	waitUntil(t, "the escalation", func() bool { return escalations() == 1 })
	for _, p := range postsIn("CAPPROVE") {
		if s := p.Get("text") + p.Get("blocks"); strings.Contains(s, "escalated") && !strings.Contains(s, "ULEAD") {
			t.Fatalf("the escalation does not mention the lead: %s", s)
		}
	}
	stop(cmd)
	cmd = start()
	time.Sleep(1500 * time.Millisecond) // a few sweeps of the restarted process
	if n := escalations(); n != 1 {
		t.Fatalf("the escalation fired %d times", n)
	}

	// Extend moves the deadline once.
	extend := api.buttons("airlock_extend")
	if len(extend) == 0 {
		t.Fatal("no Extend button")
	}
	press("UALICE", "airlock_extend", extend[0])
	waitUntil(t, "the card shows the extension", func() bool {
		for _, u := range api.updates() {
			if u.Get("channel") == "CAPPROVE" && strings.Contains(u.Get("blocks"), "xtended by") {
				return true
			}
		}
		return false
	})
	press("UBOB", "airlock_extend", extend[0])
	waitUntil(t, "a second Extend is refused", told("UBOB", "already extended"))

	// The step's approver decides now; a click on a DM copy then changes
	// nothing; every copy and the pointer are updated.
	press("ULEAD", "airlock_allow", allow)
	waitUntil(t, "the deploy", func() bool { return len(tools.calls()) == 1 })
	pressOn := func(channel, user, value string) {
		t.Helper()
		for _, at := range messagesOf(value) {
			if at.channel == channel {
				if code, err := postSigned(addr, actionBodyOn(at, user, "airlock_allow", value), "application/x-www-form-urlencoded"); err != nil || code != 200 {
					t.Fatalf("click: %d %v", code, err)
				}
				return
			}
		}
		t.Fatalf("no copy of %s in %s", value, channel)
	}
	pressOn("DBOB", "UBOB", allow)
	waitUntil(t, "a click on a copy of a decided card is refused", told("UBOB", "already decided"))
	updated := func(channel string) bool {
		for _, u := range api.updates() {
			if u.Get("channel") == channel && strings.Contains(u.Get("blocks"), "ULEAD") && !strings.Contains(u.Get("blocks"), `"airlock_allow"`) {
				return true
			}
		}
		return false
	}
	waitUntil(t, "every copy updated", func() bool {
		return updated("CAPPROVE") && updated("DALICE") && updated("DBOB") && updated("COPS")
	})

	// A second request: a click on Bob's DM copy decides it; Alice's copy
	// then changes nothing.
	body = slackEvent("T1", "EvR2", "app_mention", "COPS", "UREQ", "1800000003.000001", "1800000003.000001", "<@UBOT> deploy web again")
	if code, err := postSigned(addr, body, "application/json"); err != nil || code != 200 {
		t.Fatalf("event: %d %v", code, err)
	}
	var second string
	waitUntil(t, "the second card and its DM copies", func() bool {
		vs := api.buttons("airlock_allow")
		if len(vs) <= 3 {
			return false
		}
		second = vs[len(vs)-1]
		return len(messagesOf(second)) == 3 // the card and two copies
	})
	pressOn("DBOB", "UBOB", second)
	waitUntil(t, "the second deploy", func() bool { return len(tools.calls()) == 2 })
	pressOn("DALICE", "UALICE", second)
	waitUntil(t, "Alice's copy changes nothing", told("UALICE", "already decided"))
	time.Sleep(200 * time.Millisecond)
	if n := len(tools.calls()); n != 2 {
		t.Fatalf("deploy ran %d times", n)
	}
	stop(cmd)

	// The audit tells who extended the first card and that it escalated once.
	out, err := exec.Command(airlockBinary(t), "audit", "-config", path, "-json").CombinedOutput()
	if err != nil {
		t.Fatalf("audit: %v\n%s", err, out)
	}
	var records []struct {
		DecidedBy string `json:"decided_by"`
		Extended  *struct {
			By string `json:"by"`
		} `json:"extended"`
		Escalated []int `json:"escalated"`
	}
	if err := json.Unmarshal(out, &records); err != nil || len(records) != 2 {
		t.Fatalf("audit: %v\n%s", err, out)
	}
	if r := records[0]; r.DecidedBy != "ULEAD" || r.Extended == nil || r.Extended.By != "UALICE" || len(r.Escalated) != 1 || r.Escalated[0] != 1 {
		t.Fatalf("audit of the first card: %s", out)
	}
	if r := records[1]; r.DecidedBy != "UBOB" || r.Extended != nil {
		t.Fatalf("audit of the second card: %s", out)
	}
}
