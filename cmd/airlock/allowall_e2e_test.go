package main

import (
	"fmt"
	"strings"
	"testing"

	"github.com/airlockhq/airlock/model/modeltest"
)

// TestAllowAllOverSlack drives a real `airlock run` (Slack HTTP mode,
// SQLite): a reply of four deploys, the fourth restricted by a rule to
// UDAVE. One signed click on Allow all by UALICE decides the three she
// may decide and leaves the fourth waiting, named in her private answer;
// nothing runs until UDAVE allows it; then each deploy runs once.
func TestAllowAllOverSlack(t *testing.T) {
	skipShort(t)
	api := newSlackAPI(t)
	tools := newToolServer(t)
	var calls []modeltest.OpenAIToolCall
	for i, svc := range []string{"api", "web", "worker", "db"} {
		calls = append(calls, modeltest.OpenAIToolCall{ID: fmt.Sprintf("c%d", i), Name: "deploy", Arguments: `{"service":"` + svc + `"}`})
	}
	model := callingModel(t, calls...)
	dir := t.TempDir()
	addr := freeAddr(t)
	path := writeConfig(t, dir, fmt.Sprintf(`
%s
channels: [{platform: slack, id: COPS, approvers: [UALICE, UDAVE]}]
confirmation:
  rules:
    - {name: dba, when: 'args.service == "db"', action: ask, approvers: [UDAVE]}
tools:
%s
`, slackRunHead(addr, "sqlite", dir+"/airlock.db", model.BaseURL(), api.URL+"/api/"), deployToolYAML(tools.URL, "service")))
	startRun(t, path)
	waitReady(t, addr)
	deploys := func() int { return tools.countPrefix("/deploy/") }
	press := func(user, actionID, value string) {
		t.Helper()
		if code, err := postSigned(addr, actionBody(user, actionID, value), "application/x-www-form-urlencoded"); err != nil || code != 200 {
			t.Fatalf("click: %d %v", code, err)
		}
	}
	if code, err := postSigned(addr, mentionBody("EvAll1", "1800000040.000001", "", "deploy everything"), "application/json"); err != nil || code != 200 {
		t.Fatalf("mention: %d %v", code, err)
	}
	waitUntil(t, "the card with Allow all", func() bool { return len(api.buttons("airlock_allow_all")) == 1 })
	all := api.buttons("airlock_allow_all")[0]

	press("UMALLORY", "airlock_allow_all", all)
	waitUntil(t, "the stranger is told nothing was decided", api.told("UMALLORY", "Nothing was decided"))
	press("UALICE", "airlock_allow_all", all)
	waitUntil(t, "alice is told what was decided and what was left", api.told("UALICE", "Allowed 3 calls. Left waiting: 4. deploy"))
	if n := deploys(); n != 0 {
		t.Fatalf("%d deploys ran with one call still waiting", n)
	}
	allow := api.buttons("airlock_allow")
	press("UDAVE", "airlock_allow", allow[len(allow)-1])
	waitUntil(t, "the four deploys", func() bool { return deploys() == 4 })
	waitUntil(t, "the model continues", func() bool {
		return strings.Contains(strings.Join(api.texts(), "\n"), "model saw:")
	})
	for _, svc := range []string{"api", "web", "worker", "db"} {
		if n := tools.count("/deploy/" + svc); n != 1 {
			t.Fatalf("deploy %s ran %d times", svc, n)
		}
	}
}

// TestAllowAllInTheTerminal drives a real `airlock chat`: a reply of
// four deploys, the fourth restricted by a rule to someone else. `/allow
// all` decides the three the local user may decide and names the fourth
// left waiting; nothing runs until it is decided; the local user, who
// asked for it, withdraws it with /deny, and the three run once each.
func TestAllowAllInTheTerminal(t *testing.T) {
	skipShort(t)
	tools := newToolServer(t)
	var calls []modeltest.OpenAIToolCall
	for i, svc := range []string{"api", "web", "worker", "db"} {
		calls = append(calls, modeltest.OpenAIToolCall{ID: fmt.Sprintf("c%d", i), Name: "deploy", Arguments: `{"service":"` + svc + `"}`})
	}
	model := callingModel(t, calls...)
	dir := t.TempDir()
	path := writeConfig(t, dir, fmt.Sprintf(`
storage: {driver: sqlite, dsn: %q}
model: {provider: openai, name: fake, api_key: sk-test, base_url: %q}
channels: [{platform: shell, id: "*", approvers: [local]}]
confirmation:
  rules:
    - {name: dba, when: 'args.service == "db"', action: ask, approvers: [dba-lead]}
tools:
%s
`, dir+"/airlock.db", model.BaseURL(), deployToolYAML(tools.URL, "service")))
	p := startChatWith(t, airlockBinary(t), path)
	p.send("deploy everything")
	p.waitFor("/allow N")
	p.waitFor("\n> ")
	p.send("/allow all")
	p.waitFor("Allowed 3 calls. Left waiting: 4. deploy (a rule lets only others decide it).")
	if n := tools.countPrefix("/deploy/"); n != 0 {
		t.Fatalf("%d deploys ran with one call still waiting", n)
	}
	p.send("/deny 4 not the database")
	p.waitFor("model saw:")
	for _, svc := range []string{"api", "web", "worker"} {
		if n := tools.count("/deploy/" + svc); n != 1 {
			t.Fatalf("deploy %s ran %d times", svc, n)
		}
	}
	if n := tools.count("/deploy/db"); n != 0 {
		t.Fatalf("the restricted deploy ran %d times", n)
	}
}
