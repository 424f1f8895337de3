package hook

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/airlockhq/airlock/gateway"
	"github.com/airlockhq/airlock/gateway/gatewaytest"
	"github.com/airlockhq/airlock/internal/jsonobj"
)

// claudeInput is Claude Code's documented hook input for a Bash call.
func claudeInput(event, command string) string {
	in, _ := json.Marshal(map[string]any{
		"session_id": "sess-1", "transcript_path": "/home/alice/.claude/projects/p/sess-1.jsonl", "cwd": "/home/alice/p",
		"permission_mode": "default", "hook_event_name": event, "tool_name": "Bash",
		"tool_input": map[string]any{"command": command, "description": "deploy"}, "tool_use_id": "toolu_01",
	})
	return string(in)
}

// runHook pipes input into `airlock hook AGENT` against the fake and
// returns its stdout (parsed), stderr and exit code.
func runHook(t *testing.T, f *fakeAPI, agent, input string, extra ...string) (map[string]any, string, int) {
	t.Helper()
	var out, errOut bytes.Buffer
	args := append([]string{agent, "-url", f.srv.URL}, extra...)
	env := func(k string) string {
		if k == "AIRLOCK_TOKEN" {
			return f.token
		}
		return ""
	}
	code := run(context.Background(), args, strings.NewReader(input), &out, &errOut, env, time.Now)
	if strings.Contains(out.String()+errOut.String(), f.token) {
		t.Fatalf("the token was written out:\n%s\n%s", out.String(), errOut.String())
	}
	var v map[string]any
	if err := json.Unmarshal(out.Bytes(), &v); err != nil {
		t.Fatalf("stdout is not JSON (%v): %q (stderr %q)", err, out.String(), errOut.String())
	}
	return v, errOut.String(), code
}

// preToolUse reads Claude Code's PreToolUse answer.
func preToolUse(t *testing.T, v map[string]any) (decision, reason string, updated map[string]any) {
	t.Helper()
	o, _ := v["hookSpecificOutput"].(map[string]any)
	if o["hookEventName"] != "PreToolUse" {
		t.Fatalf("answer %v: not a PreToolUse answer", v)
	}
	decision, _ = o["permissionDecision"].(string)
	reason, _ = o["permissionDecisionReason"].(string)
	updated, _ = o["updatedInput"].(map[string]any)
	return decision, reason, updated
}

func TestClaudeCodeAllowConsumesOnce(t *testing.T) {
	f := newFakeAPI(t)
	f.mem.OnCreate = func(a *gateway.Approval) { a.Status, a.Reason = gateway.StatusAllowed, "allowed by U0APPROVER" }
	v, _, code := runHook(t, f, "claude-code", claudeInput("PreToolUse", "make deploy"))
	dec, reason, updated := preToolUse(t, v)
	if code != 0 || dec != "allow" || updated != nil || !strings.Contains(reason, "U0APPROVER") {
		t.Fatalf("exit %d, %s %q, updated %v", code, dec, reason, updated)
	}
	if n, c := f.counts(); n != 1 || c != 1 {
		t.Fatalf("%d approvals, %d consumes; want 1 and 1", n, c)
	}
	r := f.requests()[0]
	if r.Tool != "Bash" || r.Session != "sess-1" || r.CallID != "toolu_01" || !jsonobj.Same(r.Args, []byte(`{"command":"make deploy","description":"deploy"}`)) {
		t.Fatalf("request %+v", r)
	}
}

// A deny is PreToolUse's deny with the reason, and exit 2 (Claude Code's
// block, which holds even if the JSON were not read).
func TestClaudeCodeDenyWithReason(t *testing.T) {
	f := newFakeAPI(t)
	f.mem.OnCreate = func(a *gateway.Approval) { a.Status, a.Reason = gateway.StatusDenied, "not on a Friday" }
	v, _, code := runHook(t, f, "claude-code", claudeInput("PreToolUse", "make deploy"))
	dec, reason, _ := preToolUse(t, v)
	if code != 2 || dec != "deny" || !strings.Contains(reason, "not on a Friday") || !strings.Contains(reason, "Nothing ran") {
		t.Fatalf("exit %d, %s %q", code, dec, reason)
	}
	if _, c := f.counts(); c != 0 {
		t.Fatal("a denied approval was consumed")
	}
}

// An approver's edit reaches Claude Code as updatedInput, in both events'
// shapes.
func TestClaudeCodeEditedArguments(t *testing.T) {
	edited := json.RawMessage(`{"command":"make deploy ENV=staging","description":"deploy"}`)
	for _, event := range []string{"PreToolUse", "PermissionRequest"} {
		f := newFakeAPI(t)
		f.mem.OnCreate = func(a *gateway.Approval) { a.Status, a.Args = gateway.StatusAllowed, edited }
		v, _, code := runHook(t, f, "claude-code", claudeInput(event, "make deploy ENV=prod"))
		o, _ := v["hookSpecificOutput"].(map[string]any)
		var updated any
		if event == "PreToolUse" {
			if o["permissionDecision"] != "allow" {
				t.Fatalf("%s: %v", event, v)
			}
			updated = o["updatedInput"]
		} else {
			d, _ := o["decision"].(map[string]any)
			if o["hookEventName"] != "PermissionRequest" || d["behavior"] != "allow" {
				t.Fatalf("%s: %v", event, v)
			}
			updated = d["updatedInput"]
		}
		got, _ := json.Marshal(updated)
		if code != 0 || !jsonobj.Same(got, edited) {
			t.Fatalf("%s: updatedInput %s, want %s", event, got, edited)
		}
	}
}

// At the deadline the hook denies, saying where the card waits; the
// approval given late is used by the identical retry, once.
func TestClaudeCodeDeadlineThenLateApprovalOnce(t *testing.T) {
	f := newFakeAPI(t)
	in := claudeInput("PreToolUse", "make deploy")
	start := time.Now()
	v, _, _ := runHook(t, f, "claude-code", in, "-deadline", "1s")
	dec, reason, _ := preToolUse(t, v)
	if dec != "deny" || !strings.Contains(reason, "Waiting for approval in https://slack.example/archives/C0OPS/p1 (request a1). Nothing ran. Call the same tool with the same arguments again once it is approved.") {
		t.Fatalf("%s %q", dec, reason)
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Fatalf("the hook waited %v past a 1 s deadline", took)
	}
	f.decide("a1", gateway.StatusAllowed, "allowed by U0APPROVER")
	v, _, _ = runHook(t, f, "claude-code", in, "-deadline", "1s")
	if dec, reason, _ := preToolUse(t, v); dec != "allow" || !strings.Contains(reason, "a1") {
		t.Fatalf("the retry after a late Allow: %s %q", dec, reason)
	}
	v, _, _ = runHook(t, f, "claude-code", in, "-deadline", "1s")
	if dec, _, _ := preToolUse(t, v); dec != "deny" {
		t.Fatal("a second retry used the same approval")
	}
	if n, c := f.counts(); n != 2 || c != 1 {
		t.Fatalf("%d approvals, %d consumes; want the second retry's own approval, and one consume", n, c)
	}
}

// The approval another retry consumed first is not carried out twice.
func TestClaudeCodeConsumedElsewhereIsDenied(t *testing.T) {
	mem := &gatewaytest.Memory{OnCreate: func(a *gateway.Approval) { a.Status = gateway.StatusAllowed }}
	f := newFakeAPIOver(t, mem, consumedFirst{mem})
	v, _, _ := runHook(t, f, "claude-code", claudeInput("PreToolUse", "make deploy"))
	if dec, reason, _ := preToolUse(t, v); dec != "deny" || !strings.Contains(reason, "already used") {
		t.Fatalf("%s %q", dec, reason)
	}
}

// Airlock down, a wrong token, a bad answer, a missing URL or token, or
// input that is not a tool call: denied, never allowed.
func TestClaudeCodeFailsClosed(t *testing.T) {
	f := newFakeAPI(t)
	f.mem.OnCreate = func(a *gateway.Approval) { a.Status = gateway.StatusAllowed }
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	down := "http://" + l.Addr().String()
	l.Close()
	liar := newFakeAPI(t)
	liar.srv.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte(`{"allowed": true}`)) })
	in := claudeInput("PreToolUse", "make deploy")
	for name, tc := range map[string]struct {
		input string
		args  []string
	}{
		"Airlock down":    {in, []string{"-url", down}},
		"a wrong token":   {in, []string{"-token", strings.Repeat("x", 40)}},
		"a bad answer":    {in, []string{"-url", liar.srv.URL}},
		"not a tool call": {`{"hook_event_name":"Stop","session_id":"s"}`, nil},
		"not JSON":        {`allow`, nil},
		"no URL":          {in, []string{"-url", ""}},
	} {
		v, _, code := runHook(t, f, "claude-code", tc.input, tc.args...)
		dec, reason, _ := preToolUse(t, v)
		if dec != "deny" || code != 2 || !strings.Contains(reason, "Nothing ran") {
			t.Errorf("%s: exit %d, %s %q", name, code, dec, reason)
		}
	}
	if _, c := f.counts(); c != 0 {
		t.Fatalf("%d consumes after refusals", c)
	}
	if n, _ := f.counts(); n != 0 {
		t.Fatalf("%d approvals created by refused requests (the wrong token's included)", n)
	}
}
