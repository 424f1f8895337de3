package main

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/airlockhq/airlock/model/modeltest"
)

// TestCoversOverSlack drives a real `airlock run` (Slack HTTP mode,
// SQLite, grants on, self-approval off): a reply of two deploys, the
// second rated high by a rule. Under each call's buttons the card posted
// says what a yes covers: for the first, Allow once and what "Allow for
// 1h" also allows, until an hour after the card was posted; for the
// second, that no grant is offered because of its tier; for both, that
// the requester may not allow them.
func TestCoversOverSlack(t *testing.T) {
	skipShort(t)
	api := newSlackAPI(t)
	tools := newToolServer(t)
	model := callingModel(t,
		modeltest.OpenAIToolCall{ID: "c0", Name: "deploy", Arguments: `{"service":"api"}`},
		modeltest.OpenAIToolCall{ID: "c1", Name: "deploy", Arguments: `{"service":"db"}`})
	dir := t.TempDir()
	addr := freeAddr(t)
	path := writeConfig(t, dir, fmt.Sprintf(`
%s
channels: [{platform: slack, id: COPS, approvers: [UALICE]}]
confirmation:
  rules:
    - {name: dba, when: 'args.service == "db"', action: ask, risk: high}
tools:
%s
`, slackRunHead(addr, "sqlite", dir+"/airlock.db", model.BaseURL(), api.URL+"/api/"), deployToolYAML(tools.URL, "service")))
	startRun(t, path)
	waitReady(t, addr)
	before := time.Now()
	if code, err := postSigned(addr, mentionBody("EvCov1", "1800000050.000001", "", "deploy api and db"), "application/json"); err != nil || code != 200 {
		t.Fatalf("mention: %d %v", code, err)
	}
	waitUntil(t, "the card", func() bool { return api.cards() == 1 })
	after := time.Now()
	var blocks string
	for _, p := range api.posts() {
		if strings.Contains(p.Get("blocks"), "airlock_allow") {
			blocks = p.Get("blocks")
		}
	}
	lines := coverLines(t, blocks)

	grant := regexp.MustCompile(`^Allow runs this call once\. Allow for 1h also allows later calls of ` + "`deploy`" +
		` in this thread, requested by <@UREQ> or an approver, until <!date\^(\d+)\^\{date_short_pretty\} at \{time\}\|[^>]+> if clicked now\. <@UREQ> asked for it and may not allow it\.$`)
	m := grant.FindStringSubmatch(lines["covers_1"])
	if m == nil {
		t.Fatalf("first call's line: %q", lines["covers_1"])
	}
	until, _ := strconv.ParseInt(m[1], 10, 64)
	if lo, hi := before.Add(time.Hour).Unix()-1, after.Add(time.Hour).Unix()+1; until < lo || until > hi {
		t.Errorf("the grant would end at %d, want an hour after the card was posted (%d..%d)", until, lo, hi)
	}
	if want := "Allow runs this call once. No grant: high-risk calls are never granted. <@UREQ> asked for it and may not allow it."; lines["covers_2"] != want {
		t.Errorf("second call's line: %q, want %q", lines["covers_2"], want)
	}
	if n := len(api.buttons("airlock_allow_grant")); n != 1 {
		t.Errorf("%d Allow for 1h buttons, want the first call's only", n)
	}
	if n := tools.countPrefix("/deploy/"); n != 0 {
		t.Fatalf("%d deploys ran before anyone decided", n)
	}
}

// coverLines are the texts of a message's covers_N context blocks, by
// block id.
func coverLines(t *testing.T, raw string) map[string]string {
	t.Helper()
	var blocks []struct {
		Type     string          `json:"type"`
		BlockID  string          `json:"block_id"`
		Elements json.RawMessage `json:"elements"`
	}
	if err := json.Unmarshal([]byte(raw), &blocks); err != nil {
		t.Fatalf("blocks: %v\n%s", err, raw)
	}
	out := map[string]string{}
	for _, b := range blocks {
		if !strings.HasPrefix(b.BlockID, "covers_") || b.Type != "context" {
			continue
		}
		var els []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		}
		if err := json.Unmarshal(b.Elements, &els); err != nil || len(els) != 1 || els[0].Type != "mrkdwn" {
			t.Fatalf("%s: %v %s", b.BlockID, err, b.Elements)
		}
		out[b.BlockID] = els[0].Text
	}
	return out
}

// TestCoversInTheTerminal drives a real `airlock chat`: the card of a
// waiting deploy says, under its outcome, that Allow runs it once (the
// local user approves their own calls; the terminal offers no grant).
func TestCoversInTheTerminal(t *testing.T) {
	skipShort(t)
	tools := newToolServer(t)
	model := callingModel(t, modeltest.OpenAIToolCall{ID: "c0", Name: "deploy", Arguments: `{"service":"api"}`})
	dir := t.TempDir()
	path := writeConfig(t, dir, fmt.Sprintf(`
storage: {driver: sqlite, dsn: %q}
model: {provider: openai, name: fake, api_key: sk-test, base_url: %q}
channels: [{platform: shell, id: "*", approvers: [local]}]
tools:
%s
`, dir+"/airlock.db", model.BaseURL(), deployToolYAML(tools.URL, "service")))
	p := startChatWith(t, airlockBinary(t), path)
	p.send("deploy api")
	p.waitFor("|     -> waiting for a decision\n|     Allow runs this call once.\n")
	p.waitFor("\n> ")
	p.send("/allow 1")
	p.waitFor("model saw:")
	if n := tools.count("/deploy/api"); n != 1 {
		t.Fatalf("deploy ran %d times", n)
	}
}
