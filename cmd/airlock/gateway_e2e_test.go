package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

const gwToken = "gw-token-0123456789abcdefghijklmnopqrstuv"

// claudePreToolUse is Claude Code's documented PreToolUse hook input.
func claudePreToolUse(command string) string {
	in, _ := json.Marshal(map[string]any{"session_id": "sess-1", "transcript_path": "/tmp/t.jsonl", "cwd": "/work",
		"permission_mode": "default", "hook_event_name": "PreToolUse", "tool_name": "Bash",
		"tool_input": map[string]any{"command": command}, "tool_use_id": "toolu_01"})
	return string(in)
}

// hookRun pipes input into `airlock hook claude-code` against the running
// Airlock at addr; it returns the decision, its reason and the exit code.
func hookRun(t *testing.T, addr, token, input string, deadline time.Duration) (decision, reason string, code int) {
	t.Helper()
	cmd := exec.Command(airlockBinary(t), "hook", "claude-code", "-deadline", deadline.String())
	cmd.Env = append(os.Environ(), "AIRLOCK_URL=http://"+addr, "AIRLOCK_TOKEN="+token)
	cmd.Stdin = strings.NewReader(input)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	var v struct {
		Out struct {
			Decision string `json:"permissionDecision"`
			Reason   string `json:"permissionDecisionReason"`
		} `json:"hookSpecificOutput"`
	}
	if err := json.Unmarshal(out.Bytes(), &v); err != nil {
		t.Fatalf("hook stdout %q (stderr %q): %v", out.String(), errOut.String(), err)
	}
	if strings.Contains(out.String()+errOut.String(), token) {
		t.Fatal("the hook wrote its token out")
	}
	return v.Out.Decision, v.Out.Reason, code
}

// TestGatewayHookOverSlack drives a real `airlock run` (Slack HTTP mode,
// SQLite) with a gateway client, and the real `airlock hook claude-code`
// piped Claude Code's hook JSON: the call's card is posted in the
// client's channel; a stranger's click decides nothing; the approver's
// Allow reaches the waiting hook, which consumes and allows; the
// identical retry after a deadline is denied while waiting and allowed
// once after a late Allow; a wrong token creates nothing.
func TestGatewayHookOverSlack(t *testing.T) {
	skipShort(t)
	api := newSlackAPI(t)
	model := callingModel(t)
	dir := t.TempDir()
	addr := freeAddr(t)
	path := writeConfig(t, dir, fmt.Sprintf(`
%s
channels: [{platform: slack, id: COPS, approvers: [UALICE]}]
gateway:
  clients:
    - {name: bob-laptop, token: %q, acts_for: UBOB, channel: {platform: slack, id: COPS}, ask: [Bash], deny: [WebFetch]}
`, slackRunHead(addr, "sqlite", dir+"/airlock.db", model.BaseURL(), api.URL+"/api/"), gwToken))
	startRun(t, path)
	waitReady(t, addr)
	press := func(user, actionID, value string) {
		t.Helper()
		if code, err := postSigned(addr, actionBody(user, actionID, value), "application/x-www-form-urlencoded"); err != nil || code != 200 {
			t.Fatalf("click: %d %v", code, err)
		}
	}

	type result struct {
		decision, reason string
		code             int
	}
	done := make(chan result, 1)
	go func() {
		d, r, c := hookRun(t, addr, gwToken, claudePreToolUse("make deploy"), 30*time.Second)
		done <- result{d, r, c}
	}()
	waitUntil(t, "the gateway call's card", func() bool { return len(api.buttons("airlock_allow")) == 1 })
	allow := api.buttons("airlock_allow")[0]
	posted := api.callsTo("chat.postMessage")
	if card := posted[len(posted)-1]; !strings.Contains(card.Get("blocks"), "bob-laptop") || !strings.Contains(card.Get("blocks"), "sess-1") || card.Get("thread_ts") != "" {
		t.Fatalf("the card does not say which client asked in which session, at the channel's top level: %s (thread %q)", card.Get("blocks"), card.Get("thread_ts"))
	}
	press("UMALLORY", "airlock_allow", allow)
	press("UALICE", "airlock_allow", allow)
	select {
	case r := <-done:
		if r.decision != "allow" || r.code != 0 || !strings.Contains(r.reason, "UALICE") {
			t.Fatalf("the hook after Allow: %+v", r)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the hook did not return after the Allow")
	}

	// The same call again: a new approval (the first is consumed); the
	// deadline denies it while it waits.
	d, reason, code := hookRun(t, addr, gwToken, claudePreToolUse("make deploy"), 2*time.Second)
	if d != "deny" || code != 2 || !strings.Contains(reason, "Waiting for approval in https://") || !strings.Contains(reason, "Call the same tool with the same arguments again") {
		t.Fatalf("at the deadline: %s %q %d", d, reason, code)
	}
	waitUntil(t, "the second card", func() bool {
		return len(api.buttons("airlock_allow")) >= 1 && api.buttons("airlock_allow")[len(api.buttons("airlock_allow"))-1] != allow
	})
	buttons := api.buttons("airlock_allow")
	press("UALICE", "airlock_allow", buttons[len(buttons)-1])
	if d, _, _ := hookRun(t, addr, gwToken, claudePreToolUse("make deploy"), 5*time.Second); d != "allow" {
		t.Fatalf("the retry after a late Allow: %s", d)
	}

	// A denied tool: no card. A wrong token: denied, nothing created.
	cards := len(api.callsTo("chat.postMessage"))
	in := strings.Replace(claudePreToolUse("x"), `"Bash"`, `"WebFetch"`, 1)
	if d, reason, _ := hookRun(t, addr, gwToken, in, 5*time.Second); d != "deny" || !strings.Contains(reason, "deny list") {
		t.Fatalf("a denied tool: %s %q", d, reason)
	}
	if d, _, _ := hookRun(t, addr, strings.Repeat("x", 40), claudePreToolUse("rm -rf /"), 5*time.Second); d != "deny" {
		t.Fatalf("a wrong token: %s", d)
	}
	if n := len(api.callsTo("chat.postMessage")); n != cards {
		last := api.callsTo("chat.postMessage")[n-1]
		t.Fatalf("%d messages posted for a denied tool and a wrong token; the last: %q %q", n-cards, last.Get("text"), last.Get("thread_ts"))
	}
}
