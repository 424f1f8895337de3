package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/airlockhq/airlock/events"
	"github.com/airlockhq/airlock/model/modeltest"
)

// TestRunPolicy drives a real `airlock run` (Slack HTTP mode, SQLite) through
// the policy: a rule that makes production restarts need two people while
// staging runs at once, a deny rule, the requester's own click, the same
// approver twice, and a grant that covers the next call of its tool in its
// thread only, until revoked.
func TestRunPolicy(t *testing.T) {
	skipShort(t)
	api := newSlackAPI(t)
	tools := newToolServer(t)
	var mu sync.Mutex
	var toModel []string
	model := modeltest.NewOpenAIServer(t, func(req modeltest.OpenAIRequest) modeltest.OpenAIReply {
		last := req.Messages[len(req.Messages)-1]
		mu.Lock()
		toModel = append(toModel, last.Content)
		mu.Unlock()
		call := func(name, args string) modeltest.OpenAIReply {
			return modeltest.CallsReply(modeltest.OpenAIToolCall{ID: "c1", Name: name, Arguments: args})
		}
		switch {
		case last.Role == "tool":
			return modeltest.TextReply("model saw: " + last.Content)
		case strings.Contains(last.Content, "restart staging"):
			return call("restart_service", `{"service":"api","environment":"staging"}`)
		case strings.Contains(last.Content, "restart production"):
			return call("restart_service", `{"service":"api","environment":"production"}`)
		case strings.Contains(last.Content, "drop users"):
			return call("run_sql", `{"sql":"DROP TABLE users"}`)
		case strings.Contains(last.Content, "deploy"):
			return call("deploy", `{"service":"web"}`)
		}
		return modeltest.TextReply("hello")
	})
	sawModel := func(s string) bool {
		mu.Lock()
		defer mu.Unlock()
		for _, m := range toModel {
			if strings.Contains(m, s) {
				return true
			}
		}
		return false
	}

	// A webhook receiver checks every event's signature and keeps their types in order.
	const hookSecret = "webhook-secret-0123456789"
	var hookMu sync.Mutex
	var hookTypes []string
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if err := events.Verify(hookSecret, r.Header.Get(events.SignatureHeader), body, time.Now(), 5*time.Minute); err != nil {
			t.Errorf("webhook signature: %v", err)
			http.Error(w, "bad signature", http.StatusUnauthorized)
			return
		}
		var ev struct {
			Type string `json:"type"`
		}
		_ = json.Unmarshal(body, &ev)
		hookMu.Lock()
		hookTypes = append(hookTypes, ev.Type)
		hookMu.Unlock()
	}))
	t.Cleanup(hook.Close)

	dir := t.TempDir()
	addr := freeAddr(t)
	cfg := fmt.Sprintf(`
events: {webhooks: [{url: %q, secret: %q}]}
%s
channels: [{platform: slack, id: COPS, approvers: [UALICE, UCAROL, UREQ]}]
confirmation:
  rules:
    - {name: prod-restarts, when: 'tool == "restart_service" && args.environment == "production"', action: ask, approvals: 2}
    - {name: no-drops, when: 'tool == "run_sql" && args.sql.lowerAscii().contains("drop ")', action: deny, message: "Schema drops are not allowed from chat."}
tools:
  - name: restart_service
    parameters: {type: object, properties: {service: {type: string}, environment: {type: string}}, required: [service, environment]}
    http: {method: POST, url: "%s/restart/{{.service}}/{{.environment}}"}
  - name: run_sql
    parameters: {type: object, properties: {sql: {type: string}}, required: [sql]}
    http: {method: POST, url: "%s/sql"}
%s
`, hook.URL, hookSecret, slackRunHead(addr, "sqlite", filepath.Join(dir, "airlock.db"), model.BaseURL(), api.URL+"/api/"), tools.URL, tools.URL, deployToolYAML(tools.URL, "service"))
	path := writeConfig(t, dir, cfg)
	startRun(t, path)
	waitReady(t, addr)

	hits := func(path string) int {
		n := 0
		for _, h := range tools.calls() {
			if h.Path == path {
				n++
			}
		}
		return n
	}
	seq := 0
	turn := func(user, thread, text string) {
		t.Helper()
		seq++
		ts := fmt.Sprintf("1800000001.%06d", seq)
		if thread == "" {
			thread = ts
		}
		body := slackEvent("T1", fmt.Sprintf("EvP%d", seq), "app_mention", "COPS", user, ts, thread, "<@UBOT> "+text)
		if code, err := postSigned(addr, body, "application/json"); err != nil || code != 200 {
			t.Fatalf("event: %d %v", code, err)
		}
	}
	press := func(user, actionID, value string) {
		t.Helper()
		if code, err := postSigned(addr, actionBody(user, actionID, value), "application/x-www-form-urlencoded"); err != nil || code != 200 {
			t.Fatalf("click: %d %v", code, err)
		}
	}
	last := func(actionID string) string {
		vs := api.buttons(actionID)
		if len(vs) == 0 {
			return ""
		}
		return vs[len(vs)-1]
	}
	told := api.told

	// A staging restart runs without a card.
	turn("UREQ", "", "restart staging")
	waitUntil(t, "the staging restart", func() bool { return hits("/restart/api/staging") == 1 })
	if api.cards() != 0 {
		t.Fatal("a staging restart was carded")
	}

	// A production restart needs two distinct approvers, never the requester.
	turn("UREQ", "", "restart production")
	waitUntil(t, "the production card", func() bool { return api.cards() == 1 })
	allow := last("airlock_allow")
	press("UREQ", "airlock_allow", allow)
	waitUntil(t, "the requester is refused", told("UREQ", "can't allow it yourself"))
	press("UALICE", "airlock_allow", allow)
	press("UALICE", "airlock_allow", allow)
	waitUntil(t, "the second click of the same approver is refused", told("UALICE", "already approved"))
	time.Sleep(200 * time.Millisecond)
	if n := hits("/restart/api/production"); n != 0 {
		t.Fatalf("production restarted after %d distinct approvals of 2", 1)
	}
	press("UCAROL", "airlock_allow", allow)
	waitUntil(t, "the production restart", func() bool { return hits("/restart/api/production") == 1 })

	// A deny rule refuses without a card; the model gets its message.
	cards := api.cards()
	turn("UREQ", "", "drop users")
	waitUntil(t, "the model hears the rule", func() bool { return sawModel("Schema drops are not allowed from chat.") })
	if api.cards() != cards || hits("/sql") != 0 {
		t.Fatal("a refused call was carded or ran")
	}

	// A grant covers the next deploy in this thread only, until revoked.
	thread := fmt.Sprintf("1800000001.%06d", seq+1)
	turn("UREQ", "", "deploy 1")
	waitUntil(t, "the deploy card", func() bool { return api.cards() == cards+1 })
	press("UALICE", "airlock_allow_grant", last("airlock_allow_grant"))
	waitUntil(t, "deploy 1", func() bool { return hits("/deploy/web") == 1 })
	waitUntil(t, "the grant notice", func() bool { return last("airlock_revoke_grant") != "" })
	turn("UREQ", thread, "deploy 2")
	waitUntil(t, "deploy 2 under the grant", func() bool { return hits("/deploy/web") == 2 })
	if api.cards() != cards+1 {
		t.Fatal("a granted call was carded")
	}
	turn("UREQ", "", "deploy 3") // another thread
	waitUntil(t, "a card in another thread", func() bool { return api.cards() == cards+2 })
	press("UCAROL", "airlock_revoke_grant", last("airlock_revoke_grant"))
	time.Sleep(300 * time.Millisecond)
	turn("UREQ", thread, "deploy 4")
	waitUntil(t, "a card after the revoke", func() bool { return api.cards() == cards+3 })
	if n := hits("/deploy/web"); n != 2 {
		t.Fatalf("deploy ran %d times, want 2", n)
	}

	// The webhook got the story too, signed, with each kind of event.
	waitUntil(t, "the webhook events", func() bool {
		hookMu.Lock()
		defer hookMu.Unlock()
		seen := strings.Join(hookTypes, " ")
		for _, k := range []string{"tool_call", "approval_request", "approval", "decision", "tool_result", "grant_created", "grant_used", "grant_revoked", "rejected_click"} {
			if !strings.Contains(seen, k) {
				return false
			}
		}
		return true
	})

	// /metrics counts what happened, under the documented names.
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{
		`airlock_tool_runs_total{status="succeeded",tool="deploy"} 2`,
		`airlock_tool_runs_total{status="succeeded",tool="restart_service"} 2`,
		`airlock_decisions_total{outcome="allowed"} 2`,
		`airlock_model_requests_total{provider="openai",status="ok"}`,
		`airlock_decision_wait_seconds_count 2`,
		`airlock_webhook_deliveries_total{status="delivered"}`,
		"airlock_pending_approvals 2", // deploy 3 and deploy 4 wait
		`airlock_ack_seconds_count{platform="slack"}`,
		`airlock_model_request_seconds_bucket{provider="openai"`,
	} {
		if !strings.Contains(string(body), want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}

	// The audit tells the story: the rules, every approval, the grant.
	out, err := exec.Command(airlockBinary(t), "audit", "-config", path, "-json").CombinedOutput()
	if err != nil {
		t.Fatalf("audit: %v\n%s", err, out)
	}
	var records []callRecord
	if err := json.Unmarshal(out, &records); err != nil {
		t.Fatalf("audit -json: %v\n%s", err, out)
	}
	find := func(tool, args string) *callRecord {
		for i := range records {
			if records[i].Tool == tool && strings.Contains(string(records[i].Args), args) {
				return &records[i]
			}
		}
		t.Fatalf("no audit record of %s %s in\n%s", tool, args, out)
		return nil
	}
	prod := find("restart_service", "production")
	if prod.Approvals != 2 || len(prod.ApprovedBy) != 2 || prod.ApprovedBy[0].By != "UALICE" || prod.ApprovedBy[1].By != "UCAROL" ||
		!strings.Contains(strings.Join(prod.Reasons, ","), "rule prod-restarts") {
		t.Fatalf("production restart record: %+v", prod)
	}
	if drop := find("run_sql", "DROP"); drop.Rule != "no-drops" || drop.Decision != "denied_by_rule" {
		t.Fatalf("refused call record: %+v", drop)
	}
	var created, used int
	for _, r := range records {
		if g := r.Grant; g != nil && r.Tool == "deploy" {
			switch {
			case g.Role == "created" && g.By == "UALICE" && g.RevokedBy == "UCAROL":
				created++
			case g.Role == "used":
				used++
			}
		}
	}
	if created != 1 || used != 1 {
		t.Fatalf("grant story: created %d, used %d\n%s", created, used, out)
	}
	text, err := exec.Command(airlockBinary(t), "audit", "-config", path).CombinedOutput()
	if err != nil || !strings.Contains(string(text), "approval") || !strings.Contains(string(text), "refused by rule") {
		t.Fatalf("audit text: %v\n%s", err, text)
	}

	// airlock grants lists it, revoked; -active shows none.
	list, err := exec.Command(airlockBinary(t), "grants", "-config", path).CombinedOutput()
	if err != nil || !strings.Contains(string(list), "deploy") || !strings.Contains(string(list), "revoked by UCAROL") {
		t.Fatalf("grants: %v\n%s", err, list)
	}
	active, err := exec.Command(airlockBinary(t), "grants", "-config", path, "-active").CombinedOutput()
	if err != nil || !strings.Contains(string(active), "no grants") {
		t.Fatalf("grants -active: %v\n%s", err, active)
	}
}
