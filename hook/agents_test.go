package hook

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/airlockhq/airlock/gateway"
	"github.com/airlockhq/airlock/internal/jsonobj"
)

// Each agent's documented hook input (docs/hooks.md has the sources).
var (
	codexPreToolUse = `{"session_id":"sess-c","turn_id":"turn-1","transcript_path":"/path/to/transcript.jsonl","cwd":"/path/to/cwd",
		"hook_event_name":"PreToolUse","model":"gpt-5","permission_mode":"default","tool_name":"Bash",
		"tool_input":{"command":"rm -f /tmp/example"},"tool_use_id":"call_1"}`
	codexPermission = `{"session_id":"sess-c","turn_id":"turn-1","transcript_path":"/path/to/transcript.jsonl","cwd":"/path/to/cwd",
		"hook_event_name":"PermissionRequest","model":"gpt-5","permission_mode":"default","tool_name":"Bash",
		"tool_input":{"command":"rm -f /tmp/example"}}`
	cursorPreToolUse = `{"conversation_id":"conv-1","generation_id":"gen-1","hook_event_name":"preToolUse","cursor_version":"2.1",
		"workspace_roots":["/project"],"user_email":null,"transcript_path":null,"tool_name":"Shell",
		"tool_input":{"command":"npm install","working_directory":"/project"},"tool_use_id":"abc123","cwd":"/project",
		"model":"claude-opus-4-7-thinking-max","agent_message":"Installing dependencies..."}`
	cursorShell = `{"conversation_id":"conv-1","generation_id":"gen-1","hook_event_name":"beforeShellExecution",
		"command":"git push --force","cwd":"/project","sandbox":false}`
	cursorMCP = `{"conversation_id":"conv-1","generation_id":"gen-1","hook_event_name":"beforeMCPExecution",
		"tool_name":"create_issue","tool_input":"{\"title\":\"x\"}","url":"https://mcp.example/sse"}`
	cursorRead = `{"conversation_id":"conv-1","generation_id":"gen-1","hook_event_name":"beforeReadFile",
		"file_path":"/project/.env","content":"SECRET=hunter2","attachments":[]}`
	geminiBeforeTool = `{"session_id":"sess-g","transcript_path":"/tmp/t.json","cwd":"/work","hook_event_name":"BeforeTool",
		"timestamp":"2026-12-07T03:00:00Z","tool_name":"run_shell_command","tool_input":{"command":"make deploy"}}`
)

type agentRun struct {
	out  map[string]any
	err  string
	code int
}

func hookRun(t *testing.T, f *fakeAPI, agent, input string, extra ...string) agentRun {
	t.Helper()
	var out, errOut bytes.Buffer
	env := func(k string) string {
		switch k {
		case "AIRLOCK_TOKEN":
			return f.token
		case "AIRLOCK_URL":
			return f.srv.URL
		}
		return ""
	}
	code := run(context.Background(), append([]string{agent}, extra...), strings.NewReader(input), &out, &errOut, env, time.Now)
	var v map[string]any
	if err := json.Unmarshal(out.Bytes(), &v); err != nil {
		t.Fatalf("%s: stdout is not JSON (%v): %q", agent, err, out.String())
	}
	return agentRun{v, errOut.String(), code}
}

func get(v any, path ...string) any {
	for _, p := range path {
		m, _ := v.(map[string]any)
		v = m[p]
	}
	return v
}

func jsonOf(v any) []byte { b, _ := json.Marshal(v); return b }

// Every agent: an allow is its allow and the approval is consumed once; a
// deny is its deny (blocking where the agent blocks on an exit code) with
// the approver's reason; an edit reaches the agent where it can take one,
// and where it cannot, the call is denied saying what was approved.
func TestEveryAgentsAnswers(t *testing.T) {
	edited := json.RawMessage(`{"command":"echo safe"}`)
	type want struct {
		allow func(r agentRun) bool
		deny  func(r agentRun) bool
		edit  func(r agentRun) bool // the edited arguments reach the agent (or, where it cannot take them, a deny naming them)
	}
	cases := map[string]struct {
		agent, input string
		tool         string
		want         want
	}{
		"codex PreToolUse": {"codex", codexPreToolUse, "Bash", want{
			allow: func(r agentRun) bool { return r.code == 0 && len(r.out) == 0 },
			deny: func(r agentRun) bool {
				return r.code == 2 && strings.Contains(r.err, "not today") && get(r.out, "hookSpecificOutput", "permissionDecision") == "deny"
			},
			edit: func(r agentRun) bool {
				return r.code == 0 && get(r.out, "hookSpecificOutput", "permissionDecision") == "allow" && jsonobj.Same(jsonOf(get(r.out, "hookSpecificOutput", "updatedInput")), edited)
			},
		}},
		"codex PermissionRequest": {"codex", codexPermission, "Bash", want{
			allow: func(r agentRun) bool {
				return r.code == 0 && get(r.out, "hookSpecificOutput", "decision", "behavior") == "allow"
			},
			deny: func(r agentRun) bool {
				return r.code == 2 && get(r.out, "hookSpecificOutput", "decision", "behavior") == "deny" && strings.Contains(r.err, "not today")
			},
			edit: func(r agentRun) bool {
				return r.code == 2 && get(r.out, "hookSpecificOutput", "decision", "behavior") == "deny" && strings.Contains(r.err, `approved with changes: {"command":"echo safe"}`)
			},
		}},
		"cursor preToolUse": {"cursor", cursorPreToolUse, "Shell", want{
			allow: func(r agentRun) bool {
				return r.code == 0 && r.out["permission"] == "allow" && r.out["updated_input"] == nil
			},
			deny: func(r agentRun) bool {
				return r.code == 2 && r.out["permission"] == "deny" && strings.Contains(r.out["agent_message"].(string), "not today")
			},
			edit: func(r agentRun) bool {
				return r.code == 0 && r.out["permission"] == "allow" && jsonobj.Same(jsonOf(r.out["updated_input"]), edited)
			},
		}},
		"cursor beforeShellExecution": {"cursor", cursorShell, "Shell", want{
			allow: func(r agentRun) bool { return r.code == 0 && r.out["permission"] == "allow" },
			deny:  func(r agentRun) bool { return r.code == 2 && r.out["permission"] == "deny" },
			edit: func(r agentRun) bool {
				return r.code == 2 && r.out["permission"] == "deny" && strings.Contains(r.out["agent_message"].(string), "approved with changes")
			},
		}},
		"gemini BeforeTool": {"gemini", geminiBeforeTool, "run_shell_command", want{
			allow: func(r agentRun) bool {
				return r.code == 0 && r.out["decision"] == "allow" && r.out["hookSpecificOutput"] == nil
			},
			deny: func(r agentRun) bool {
				return r.code == 0 && r.out["decision"] == "deny" && strings.Contains(r.out["reason"].(string), "not today")
			},
			edit: func(r agentRun) bool {
				return r.code == 0 && r.out["decision"] == "allow" && jsonobj.Same(jsonOf(get(r.out, "hookSpecificOutput", "tool_input")), edited)
			},
		}},
	}
	for name, tc := range cases {
		for _, step := range []string{"allow", "deny", "edit"} {
			f := newFakeAPI(t)
			f.mem.OnCreate = func(a *gateway.Approval) {
				switch step {
				case "allow":
					a.Status = gateway.StatusAllowed
				case "deny":
					a.Status, a.Reason = gateway.StatusDenied, "not today"
				case "edit":
					a.Status, a.Args = gateway.StatusAllowed, edited
				}
			}
			r := hookRun(t, f, tc.agent, tc.input)
			ok := map[string]func(agentRun) bool{"allow": tc.want.allow, "deny": tc.want.deny, "edit": tc.want.edit}[step](r)
			if step == "deny" {
				ok = ok && strings.Contains(string(jsonOf(r.out))+r.err, "not today")
			}
			if !ok {
				t.Errorf("%s, %s: exit %d, stdout %s, stderr %q", name, step, r.code, jsonOf(r.out), r.err)
			}
			if n, c := f.counts(); n != 1 || (step == "allow" && c != 1) || (step == "deny" && c != 0) {
				t.Errorf("%s, %s: %d approvals, %d consumes", name, step, n, c)
			}
			if got := f.requests()[0].Tool; got != tc.tool {
				t.Errorf("%s: asked about tool %q, want %q", name, got, tc.tool)
			}
		}
	}
}

// What each agent asks about reaches Airlock as the call it is: its
// session, its tool and arguments; an MCP call's arguments parsed from
// Cursor's JSON string; a file read by its path, never its content.
func TestAgentsAskAboutTheCall(t *testing.T) {
	for name, tc := range map[string]struct {
		agent, input, tool, session, args string
	}{
		"cursor MCP":  {"cursor", cursorMCP, "MCP:create_issue", "conv-1", `{"title":"x"}`},
		"cursor read": {"cursor", cursorRead, "Read", "conv-1", `{"file_path":"/project/.env"}`},
		"cursor tool": {"cursor", cursorPreToolUse, "Shell", "conv-1", `{"command":"npm install","working_directory":"/project"}`},
		"codex":       {"codex", codexPreToolUse, "Bash", "sess-c", `{"command":"rm -f /tmp/example"}`},
		"gemini":      {"gemini", geminiBeforeTool, "run_shell_command", "sess-g", `{"command":"make deploy"}`},
	} {
		f := newFakeAPI(t)
		f.mem.OnCreate = func(a *gateway.Approval) { a.Status = gateway.StatusAllowed }
		hookRun(t, f, tc.agent, tc.input)
		r := f.requests()[0]
		if r.Tool != tc.tool || r.Session != tc.session || !jsonobj.Same(r.Args, []byte(tc.args)) {
			t.Errorf("%s: asked %+v (args %s)", name, r, r.Args)
		}
		if strings.Contains(string(r.Args), "hunter2") {
			t.Errorf("%s: a file's content was sent to Airlock", name)
		}
	}
}

// An agent whose own hook timeout is short gets a deadline under it: a
// hook the agent kills lets the call run.
func TestDeadlinesStayUnderTheAgentsTimeouts(t *testing.T) {
	for name, limit := range map[string]time.Duration{"claude-code": 10 * time.Minute, "codex": 10 * time.Minute, "gemini": 60 * time.Second, "cursor": 60 * time.Second} {
		if d := agents[name].deadline; d <= 0 || d >= limit {
			t.Errorf("%s: default deadline %v, want under %v", name, d, limit)
		}
	}
}
