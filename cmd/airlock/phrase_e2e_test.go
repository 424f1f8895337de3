package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/airlockhq/airlock/adapters/slack"
	"github.com/airlockhq/airlock/model/modeltest"
)

// criticalDeployYAML is deployToolYAML rated critical, with the phrase
// "prod/<service>".
func criticalDeployYAML(toolsURL string) string {
	return deployToolYAML(toolsURL, "service") + `
    risk: critical
    confirm_phrase: "prod/{{.service}}"`
}

// postSignedBody is postSigned returning the answer's body.
func postSignedBody(t *testing.T, addr string, body []byte) string {
	t.Helper()
	ts := strconv.FormatInt(time.Now().Unix(), 10)
	req, _ := http.NewRequest(http.MethodPost, "http://"+addr+"/slack/events", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("X-Slack-Request-Timestamp", ts)
	req.Header.Set("X-Slack-Signature", fmt.Sprintf("v0=%x", slack.Sign(replicaSecret, ts, body)))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("view_submission: HTTP %d %s", resp.StatusCode, out)
	}
	return string(out)
}

// phraseBody is the phrase modal's view_submission by user.
func phraseBody(user, metadata, phrase string) []byte {
	p, _ := json.Marshal(map[string]any{
		"type": "view_submission", "trigger_id": "1.2.4", "api_app_id": "A1",
		"user": map[string]any{"id": user, "username": "u", "team_id": "T1"},
		"team": map[string]any{"id": "T1"},
		"view": map[string]any{"id": "V1", "type": "modal", "callback_id": slack.CallbackPhrase, "private_metadata": metadata,
			"state": map[string]any{"values": map[string]any{
				slack.PhraseBlockID: map[string]any{"airlock_phrase_input": map[string]any{"type": "plain_text_input", "value": phrase}},
			}}},
	})
	return []byte(url.Values{"payload": {string(p)}}.Encode())
}

// TestTypedConfirmationOverSlack drives a real `airlock run` (Slack HTTP
// mode, SQLite) with a critical deploy whose phrase is prod/<service>:
// its card offers "Allow…"; a plain Allow click (no modal) is refused;
// "Allow…" opens the modal asking for prod/api; a wrong phrase keeps it
// open with the safe message and nothing runs; the right one runs the
// deploy once.
func TestTypedConfirmationOverSlack(t *testing.T) {
	skipShort(t)
	api := newSlackAPI(t)
	tools := newToolServer(t)
	model := callingModel(t, modeltest.OpenAIToolCall{ID: "c1", Name: "deploy", Arguments: `{"service":"api"}`})
	dir := t.TempDir()
	addr := freeAddr(t)
	path := writeConfig(t, dir, fmt.Sprintf(`
%s
channels: [{platform: slack, id: COPS, approvers: [UALICE]}]
tools:
%s
`, slackRunHead(addr, "sqlite", dir+"/airlock.db", model.BaseURL(), api.URL+"/api/"), criticalDeployYAML(tools.URL)))
	startRun(t, path)
	waitReady(t, addr)
	press := func(user, actionID, value string) {
		t.Helper()
		if code, err := postSigned(addr, actionBody(user, actionID, value), "application/x-www-form-urlencoded"); err != nil || code != 200 {
			t.Fatalf("click: %d %v", code, err)
		}
	}
	if code, err := postSigned(addr, mentionBody("EvPhrase1", "1800000050.000001", "", "deploy api"), "application/json"); err != nil || code != 200 {
		t.Fatalf("mention: %d %v", code, err)
	}
	waitUntil(t, "the card with Allow…", func() bool { return len(api.buttons(slack.ActionAllowTyped)) == 1 })
	ref := api.buttons(slack.ActionAllowTyped)[0]
	if n := len(api.buttons(slack.ActionAllow)); n != 0 {
		t.Fatalf("the critical card offers %d plain Allow buttons", n)
	}

	press("UALICE", slack.ActionAllow, ref) // forged: no modal
	waitUntil(t, "the forged Allow is refused", api.told("UALICE", "needs its confirmation phrase typed"))
	press("UALICE", slack.ActionAllowTyped, ref)
	waitUntil(t, "the phrase modal", func() bool { return len(api.callsTo("views.open")) == 1 })
	var view struct {
		CallbackID      string `json:"callback_id"`
		PrivateMetadata string `json:"private_metadata"`
	}
	raw := api.callsTo("views.open")[0].Get("view")
	if err := json.Unmarshal([]byte(raw), &view); err != nil || view.CallbackID != slack.CallbackPhrase || !strings.Contains(raw, `"prod/api"`) {
		t.Fatalf("views.open view %s (%v)", raw, err)
	}

	answer := postSignedBody(t, addr, phraseBody("UALICE", view.PrivateMetadata, "prod/API"))
	if !strings.Contains(answer, `"response_action":"errors"`) || !strings.Contains(answer, "doesn't match") {
		t.Fatalf("a wrong phrase was answered %q", answer)
	}
	time.Sleep(200 * time.Millisecond)
	if n := tools.countPrefix("/deploy/"); n != 0 {
		t.Fatalf("deploy ran %d times after a wrong phrase", n)
	}
	if answer := postSignedBody(t, addr, phraseBody("UALICE", view.PrivateMetadata, "prod/api")); answer != "" {
		t.Fatalf("the right phrase was answered %q", answer)
	}
	waitUntil(t, "the deploy", func() bool { return tools.count("/deploy/api") == 1 })
	waitUntil(t, "the model continues", func() bool { return strings.Contains(strings.Join(api.texts(), "\n"), "model saw:") })
	if n := tools.countPrefix("/deploy/"); n != 1 {
		t.Fatalf("deploy ran %d times, want once", n)
	}
}

// TestTypedConfirmationInTheTerminal drives a real `airlock chat`: /allow
// of a critical deploy asks for its phrase; a wrong one changes nothing;
// the right one runs the deploy once.
func TestTypedConfirmationInTheTerminal(t *testing.T) {
	skipShort(t)
	tools := newToolServer(t)
	model := callingModel(t, modeltest.OpenAIToolCall{ID: "c1", Name: "deploy", Arguments: `{"service":"api"}`})
	dir := t.TempDir()
	path := writeConfig(t, dir, fmt.Sprintf(`
storage: {driver: sqlite, dsn: %q}
model: {provider: openai, name: fake, api_key: sk-test, base_url: %q}
channels: [{platform: shell, id: "*", approvers: [local]}]
tools:
%s
`, dir+"/airlock.db", model.BaseURL(), criticalDeployYAML(tools.URL)))
	p := startChatWith(t, airlockBinary(t), path)
	p.send("deploy api")
	p.waitFor("Allow asks you to type a confirmation phrase")
	p.waitFor("\n> ")
	p.send("/allow 1")
	p.waitFor("Type prod/api to allow call 1, deploy: ")
	p.send("prod/API")
	p.waitFor("The phrase you typed doesn't match the one asked for. Nothing changed.")
	if n := tools.countPrefix("/deploy/"); n != 0 {
		t.Fatalf("deploy ran %d times after a wrong phrase", n)
	}
	p.send("/allow 1")
	p.waitFor("Type prod/api to allow call 1, deploy: ")
	p.send("prod/api")
	p.waitFor("model saw:")
	if n := tools.count("/deploy/api"); n != 1 {
		t.Fatalf("deploy ran %d times, want once", n)
	}
}
