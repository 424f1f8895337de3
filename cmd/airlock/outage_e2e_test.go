package main

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strings"
	"testing"

	"github.com/airlockhq/airlock/internal/tcpproxy"
	"github.com/airlockhq/airlock/model/modeltest"
)

// TestPostgresOutageDuringClicks drives a real `airlock run` (Slack HTTP
// mode) whose PostgreSQL is reached through a proxy that the test cuts
// (every connection closed, new ones refused: a server restarting, as the
// client sees it) and restores. During the outage nothing is
// acknowledged as taken that could not be recorded: a click is answered
// 503 (Slack shows it failed) and its clicker told to click again, a
// mention is answered 503 (Slack sends it again) until Slack's last try,
// which is acknowledged and its thread told the database can't be
// reached, and /readyz answers 503; once the database is back
// Airlock answers again by itself, the click again decides, the tool runs
// once, and the decision is recorded once.
func TestPostgresOutageDuringClicks(t *testing.T) {
	pg := os.Getenv("AIRLOCK_TEST_POSTGRES_DSN")
	if pg == "" || testing.Short() {
		t.Skip("set AIRLOCK_TEST_POSTGRES_DSN (CI does) to run the outage test")
	}
	direct := freshSchema(t, pg)
	u, err := url.Parse(direct)
	if err != nil {
		t.Fatal(err)
	}
	proxy := tcpproxy.New(t, u.Host)
	u.Host = proxy.Addr
	api := newSlackAPI(t)
	tools := newToolServer(t)
	model := modeltest.NewOpenAIServer(t, agent)
	addr := freeAddr(t)
	dir := t.TempDir()
	path := writeConfig(t, dir, fmt.Sprintf(`
%s
channels: [{platform: slack, id: COPS, approvers: [UALICE]}]
tools:
  - name: service_status
    parameters: {type: object, properties: {service: {type: string}}, required: [service]}
    http: {method: POST, url: "%s/status/{{.service}}"}
%s
`, slackRunHead(addr, "postgres", u.String(), model.BaseURL(), api.URL+"/api/"), tools.URL, deployToolYAML(tools.URL, "service", "environment")))
	startRun(t, path)
	waitReady(t, addr)
	deploys := func() int { return tools.countPrefix("/deploy/") }
	told := api.told
	ready := func() int {
		resp, err := http.Get("http://" + addr + "/readyz")
		if err != nil {
			return 0
		}
		resp.Body.Close()
		return resp.StatusCode
	}

	if code, err := postSigned(addr, mentionBody("EvOut1", "1800000030.000001", "", "deploy api"), "application/json"); err != nil || code != 200 {
		t.Fatalf("mention: %d %v", code, err)
	}
	waitUntil(t, "the card", func() bool { return api.allowValue() != "" })
	allow := api.allowValue()
	// Cut once the card is recorded: a card posted but not yet recorded
	// is posted again by recovery, and its first copy's buttons refused.
	raw, err := sql.Open("pgx", direct)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	waitUntil(t, "the card recorded", func() bool {
		var n int
		return raw.QueryRow(`SELECT count(*) FROM batches WHERE card_ref <> ''`).Scan(&n) == nil && n == 1
	})

	proxy.Cut()
	if code, err := postSigned(addr, clickBody("UALICE", allow), "application/x-www-form-urlencoded"); err != nil || code != http.StatusServiceUnavailable {
		t.Fatalf("a click during the outage, not recorded, was answered %d %v; want 503", code, err)
	}
	waitUntil(t, "the clicker is told to click again", told("UALICE", "please click again"))
	mention := mentionBody("EvOut2", "1800000031.000001", "", "deploy web")
	if code, err := postSignedRetry(addr, mention, "application/json", 0); err != nil || code != http.StatusServiceUnavailable {
		t.Fatalf("a mention during the outage, not recorded, was answered %d %v; want 503", code, err)
	}
	if code, err := postSignedRetry(addr, mention, "application/json", 3); err != nil || code != 200 {
		t.Fatalf("Slack's last try of a mention during the outage was not acknowledged: %d %v", code, err)
	}
	waitUntil(t, "the mention is told the database can't be reached", func() bool {
		for _, p := range api.posts() {
			if p.Get("thread_ts") == "1800000031.000001" && strings.Contains(p.Get("text"), "can't reach my database") {
				return true
			}
		}
		return false
	})
	waitUntil(t, "/readyz answers 503", func() bool { return ready() == http.StatusServiceUnavailable })
	if n := deploys(); n != 0 {
		t.Fatalf("the deploy ran during the outage (%d)", n)
	}

	proxy.Restore()
	waitReady(t, addr)
	if code, err := postSigned(addr, clickBody("UALICE", allow), "application/x-www-form-urlencoded"); err != nil || code != 200 {
		t.Fatalf("click: %d %v", code, err)
	}
	waitUntil(t, "the deploy runs", func() bool { return deploys() == 1 })
	waitUntil(t, "the model continues", func() bool {
		for _, s := range api.texts() {
			if strings.Contains(s, "model saw:") {
				return true
			}
		}
		return false
	})
	if code, err := postSigned(addr, clickBody("UALICE", allow), "application/x-www-form-urlencoded"); err != nil || code != 200 {
		t.Fatalf("click: %d %v", code, err)
	}
	waitUntil(t, "a third click is told it was decided", told("UALICE", "already decided"))
	if n := deploys(); n != 1 {
		t.Fatalf("the deploy ran %d times", n)
	}
	var out, errOut bytes.Buffer
	if code := run(context.Background(), []string{"audit", "export", "-config", path, "-format", "jsonl"}, nil, &out, &errOut); code != 0 {
		t.Fatalf("audit export: %d %s", code, errOut.String())
	}
	decisions := 0
	for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		var row struct{ Kind, Actor string }
		if err := json.Unmarshal([]byte(line), &row); err != nil {
			t.Fatalf("export line %q: %v", line, err)
		}
		if row.Kind == "decision" && row.Actor == "UALICE" {
			decisions++
		}
	}
	if decisions != 1 {
		t.Fatalf("the audit records %d decisions by the clicker, want 1:\n%s", decisions, out.String())
	}
}
