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

	"github.com/airlockhq/airlock/adapters/discord/discordtest"
)

// hookOut is what `airlock hook AGENT` wrote and how it exited.
type hookOut struct {
	stdout map[string]any
	raw    string
	stderr string
	code   int
}

// at reads a nested field of the hook's JSON answer ("a.b").
func (o hookOut) at(path string) any {
	var v any = o.stdout
	for _, k := range strings.Split(path, ".") {
		m, _ := v.(map[string]any)
		v = m[k]
	}
	return v
}

// jsonOf is v as compact JSON with sorted keys.
func jsonOf(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// runHook pipes input into `airlock hook agent` against baseURL.
func runHook(t *testing.T, agent, baseURL, token, input string, deadline time.Duration) hookOut {
	t.Helper()
	cmd := exec.Command(airlockBinary(t), "hook", agent, "-deadline", deadline.String())
	cmd.Env = append(os.Environ(), "AIRLOCK_URL="+baseURL, "AIRLOCK_TOKEN="+token)
	cmd.Stdin = strings.NewReader(input)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	o := hookOut{}
	err := cmd.Run()
	if ee, ok := err.(*exec.ExitError); ok {
		o.code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	o.raw, o.stderr = out.String(), errOut.String()
	if err := json.Unmarshal(out.Bytes(), &o.stdout); err != nil {
		t.Fatalf("%s: stdout %q (stderr %q) is not JSON: %v", agent, o.raw, o.stderr, err)
	}
	if strings.Contains(o.raw+o.stderr, token) {
		t.Fatalf("%s: the hook wrote its token out", agent)
	}
	return o
}

// agentCase is one agent's documented pre-tool hook, and how it reads
// Airlock's three answers.
type agentCase struct {
	agent string
	// input is the agent's hook JSON for a call with args in session.
	input  func(session string, args map[string]any) string
	args   map[string]any // the call's arguments
	edited map[string]any // an approver's edit of them
	allow  func(o hookOut) bool
	deny   func(o hookOut, reason string) bool
	edit   func(o hookOut, args string) bool
}

var agentCases = []agentCase{
	{
		agent: "claude-code",
		input: func(s string, args map[string]any) string {
			return jsonOf(map[string]any{"session_id": s, "transcript_path": "/tmp/t.jsonl", "cwd": "/work", "permission_mode": "default",
				"hook_event_name": "PreToolUse", "tool_name": "Bash", "tool_input": args, "tool_use_id": "toolu_01"})
		},
		args: map[string]any{"command": "make deploy"}, edited: map[string]any{"command": "make deploy-canary"},
		allow: func(o hookOut) bool {
			return o.code == 0 && o.at("hookSpecificOutput.permissionDecision") == "allow" && o.at("hookSpecificOutput.updatedInput") == nil
		},
		deny: func(o hookOut, r string) bool {
			return o.code == 2 && o.at("hookSpecificOutput.permissionDecision") == "deny" &&
				strings.Contains(fmt.Sprint(o.at("hookSpecificOutput.permissionDecisionReason")), r) && strings.Contains(o.stderr, r)
		},
		edit: func(o hookOut, args string) bool {
			return o.code == 0 && o.at("hookSpecificOutput.permissionDecision") == "allow" && jsonOf(o.at("hookSpecificOutput.updatedInput")) == args
		},
	},
	{
		agent: "codex",
		input: func(s string, args map[string]any) string {
			return jsonOf(map[string]any{"session_id": s, "turn_id": "turn-1", "transcript_path": "/tmp/t.jsonl", "cwd": "/work",
				"hook_event_name": "PreToolUse", "model": "gpt-5", "permission_mode": "default", "tool_name": "Bash", "tool_input": args, "tool_use_id": "call_1"})
		},
		args: map[string]any{"command": "rm -f /tmp/example"}, edited: map[string]any{"command": "rm -i /tmp/example"},
		allow: func(o hookOut) bool { return o.code == 0 && strings.TrimSpace(o.raw) == "{}" },
		deny:  func(o hookOut, r string) bool { return o.code == 2 && strings.Contains(o.stderr, r) },
		edit: func(o hookOut, args string) bool {
			return o.code == 0 && o.at("hookSpecificOutput.permissionDecision") == "allow" && jsonOf(o.at("hookSpecificOutput.updatedInput")) == args
		},
	},
	{
		agent: "cursor",
		input: func(s string, args map[string]any) string {
			return jsonOf(map[string]any{"conversation_id": s, "generation_id": "gen-1", "hook_event_name": "preToolUse", "cursor_version": "2.1",
				"workspace_roots": []string{"/project"}, "tool_name": "Shell", "tool_input": args, "tool_use_id": "abc123", "cwd": "/project"})
		},
		args: map[string]any{"command": "npm install", "working_directory": "/project"}, edited: map[string]any{"command": "npm ci", "working_directory": "/project"},
		allow: func(o hookOut) bool {
			return o.code == 0 && o.at("permission") == "allow" && o.at("updated_input") == nil
		},
		deny: func(o hookOut, r string) bool {
			return o.code == 2 && o.at("permission") == "deny" && strings.Contains(fmt.Sprint(o.at("agent_message")), r)
		},
		edit: func(o hookOut, args string) bool {
			return o.code == 0 && o.at("permission") == "allow" && jsonOf(o.at("updated_input")) == args
		},
	},
	{
		agent: "gemini",
		input: func(s string, args map[string]any) string {
			return jsonOf(map[string]any{"session_id": s, "transcript_path": "/tmp/t.json", "cwd": "/work", "hook_event_name": "BeforeTool",
				"timestamp": "2026-12-07T03:00:00Z", "tool_name": "run_shell_command", "tool_input": args})
		},
		args: map[string]any{"command": "make deploy"}, edited: map[string]any{"command": "make deploy DRY_RUN=1"},
		allow: func(o hookOut) bool {
			return o.code == 0 && o.at("decision") == "allow" && o.at("hookSpecificOutput") == nil
		},
		deny: func(o hookOut, r string) bool {
			return o.code == 0 && o.at("decision") == "deny" && strings.Contains(fmt.Sprint(o.at("reason")), r)
		},
		edit: func(o hookOut, args string) bool {
			return o.code == 0 && o.at("decision") == "allow" && jsonOf(o.at("hookSpecificOutput.tool_input")) == args
		},
	},
}

// TestHookOfEveryAgent pipes each agent's documented pre-tool hook JSON
// into the real `airlock hook AGENT`, against a real `airlock run` whose
// cards go to a Discord channel: an Allow is the agent's allow, Deny with
// reason… its deny with the approver's words, Edit… its allow with the
// edited arguments; and with Airlock down, every agent is told no.
func TestHookOfEveryAgent(t *testing.T) {
	skipShort(t)
	fd, addr := discordGateway(t, "dev-laptop", "[Bash, Shell, run_shell_command]")
	mod := []string{discordtest.ModRole}
	seq := 0
	cards := func() int { return len(fd.Recorded("POST", "/channels/"+discordtest.ChannelID+"/messages")) }

	// ask runs the hook for one call, acts on its card once posted, and
	// returns the hook's answer.
	ask := func(c agentCase, session string, act func(button func(label string) (string, string))) hookOut {
		t.Helper()
		before := cards()
		done := make(chan hookOut, 1)
		go func() {
			done <- runHook(t, c.agent, "http://"+addr, gwBobToken, c.input(session, c.args), 30*time.Second)
		}()
		waitUntil(t, c.agent+"'s card", func() bool { return cards() > before })
		act(func(label string) (string, string) { return discordButton(t, fd, discordtest.ChannelID, label) })
		select {
		case o := <-done:
			return o
		case <-time.After(25 * time.Second):
			t.Fatalf("%s: the hook did not answer", c.agent)
			return hookOut{}
		}
	}
	for _, c := range agentCases {
		o := ask(c, c.agent+"-allow", func(button func(string) (string, string)) {
			id, msg := button("Allow")
			seq++
			fd.Send("INTERACTION_CREATE", discordtest.Click(fmt.Sprint(7500+seq), discordtest.ChannelID, discordtest.Moderator, mod, id, msg))
		})
		if !c.allow(o) {
			t.Errorf("%s after Allow: exit %d, %s (stderr %q)", c.agent, o.code, o.raw, o.stderr)
		}
		o = ask(c, c.agent+"-deny", func(button func(string) (string, string)) {
			id, msg := button("Deny with reason…")
			discordForm(t, fd, &seq, discordtest.Moderator, mod, id, msg, "not during the freeze")
		})
		if !c.deny(o, "not during the freeze") {
			t.Errorf("%s after Deny with reason: exit %d, %s (stderr %q)", c.agent, o.code, o.raw, o.stderr)
		}
		edited := jsonOf(c.edited)
		o = ask(c, c.agent+"-edit", func(button func(string) (string, string)) {
			id, msg := button("Edit…")
			discordForm(t, fd, &seq, discordtest.Moderator, mod, id, msg, edited)
		})
		if !c.edit(o, edited) {
			t.Errorf("%s after Edit…: exit %d, %s (stderr %q); want the arguments %s", c.agent, o.code, o.raw, o.stderr, edited)
		}
	}

	// The deadline: the hook denies while the card waits, saying where;
	// after a late Allow the identical retry is allowed, once.
	for _, c := range agentCases {
		before := cards()
		o := runHook(t, c.agent, "http://"+addr, gwBobToken, c.input(c.agent+"-late", c.args), time.Second)
		if !c.deny(o, "Waiting for approval in https://discord.com/channels/") {
			t.Errorf("%s at its deadline: exit %d, %s (stderr %q)", c.agent, o.code, o.raw, o.stderr)
		}
		waitUntil(t, c.agent+"'s late card", func() bool { return cards() > before })
		id, msg := discordButton(t, fd, discordtest.ChannelID, "Allow")
		seq++
		fd.Send("INTERACTION_CREATE", discordtest.Click(fmt.Sprint(7500+seq), discordtest.ChannelID, discordtest.Moderator, mod, id, msg))
		fd.WaitFor("POST", "/interactions/"+fmt.Sprint(7500+seq)+"/token-"+fmt.Sprint(7500+seq)+"/callback", 1)
		if o := runHook(t, c.agent, "http://"+addr, gwBobToken, c.input(c.agent+"-late", c.args), 10*time.Second); !c.allow(o) {
			t.Errorf("%s's retry after a late Allow: exit %d, %s (stderr %q)", c.agent, o.code, o.raw, o.stderr)
		}
		if cards() != before+1 {
			t.Errorf("%s's retry posted a card of its own", c.agent)
		}
	}

	// Airlock down: nothing listens at the URL. Every agent is told no.
	down := "http://" + freeAddr(t)
	for _, c := range agentCases {
		o := runHook(t, c.agent, down, gwBobToken, c.input("down", c.args), 5*time.Second)
		if !c.deny(o, "Nothing ran") {
			t.Errorf("%s with Airlock down: exit %d, %s (stderr %q)", c.agent, o.code, o.raw, o.stderr)
		}
	}
}
