package hook

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// call is one tool call an agent's hook asks about.
type call struct {
	Event   string // the agent's hook event
	Tool    string
	Args    json.RawMessage
	Session string
	CallID  string
}

// answer is what the hook writes for the agent: stdout, a line on
// stderr (where the agent reads a blocking reason), the exit code.
type answer struct {
	Stdout []byte
	Stderr string
	Exit   int
}

// agent is one agent's hook contract (facts, with their sources, in
// docs/hooks.md): how its input reads, how a decision is written for it,
// and how long it lets a hook run by default.
type agent struct {
	name  string
	parse func(in []byte) (call, error)
	// answer writes d for c. Where the agent cannot take edited
	// arguments, the edit is a deny that says what was approved.
	answer func(c call, d Decision) answer
	// deadline is the default -deadline: under the agent's own default
	// hook timeout, at which it would let the call run.
	deadline time.Duration
}

// agents are the agents `airlock hook` speaks for, by name.
var agents = map[string]agent{
	"claude-code": {name: "claude-code", parse: parseClaudeStyle("Claude Code", "PreToolUse", "PermissionRequest"), answer: answerClaudeCode, deadline: DefaultDeadline},
	"codex":       {name: "codex", parse: parseClaudeStyle("Codex", "PreToolUse", "PermissionRequest"), answer: answerCodex, deadline: DefaultDeadline},
	"cursor":      {name: "cursor", parse: parseCursor, answer: answerCursor, deadline: ShortDeadline},
	"gemini":      {name: "gemini", parse: parseGemini, answer: answerGemini, deadline: ShortDeadline},
}

// ShortDeadline is the default -deadline for agents whose own hook
// timeout is short or not documented (Gemini CLI: 60 s; Cursor: "the
// platform default"): raise both together to wait longer.
const ShortDeadline = 50 * time.Second

// errNotACall: the hook's input asks about no tool call (an event the
// hook is not for).
var errNotACall = errors.New("the hook's input is not a tool call")

// editedDeny is the deny for an agent that cannot run edited arguments
// itself: what the approver allowed, to call again with.
func editedDeny(d Decision) Decision {
	return Decision{Reason: fmt.Sprintf("%s — approved with changes: %s; call again with these arguments.", d.Reason, oneLine(string(d.Args), 2000))}
}

func marshal(v any) []byte {
	b, _ := json.Marshal(v)
	return b
}

// parseClaudeStyle reads the hook input Claude Code and Codex share:
// hook_event_name, session_id, tool_name, tool_input, tool_use_id.
func parseClaudeStyle(who string, events ...string) func([]byte) (call, error) {
	return func(in []byte) (call, error) {
		var v struct {
			Event     string          `json:"hook_event_name"`
			Session   string          `json:"session_id"`
			Tool      string          `json:"tool_name"`
			Input     json.RawMessage `json:"tool_input"`
			ToolUseID string          `json:"tool_use_id"`
		}
		if err := json.Unmarshal(in, &v); err != nil {
			return call{}, fmt.Errorf("read %s's hook input: %w", who, err)
		}
		known := false
		for _, e := range events {
			known = known || v.Event == e
		}
		if !known {
			return call{}, fmt.Errorf("%w: event %q (configure the hook for %v)", errNotACall, v.Event, events)
		}
		if v.Tool == "" {
			return call{}, fmt.Errorf("the hook input from %s names no tool_name", who)
		}
		return call{Event: v.Event, Tool: v.Tool, Args: orEmpty(v.Input), Session: v.Session, CallID: v.ToolUseID}, nil
	}
}

// Claude Code. PreToolUse: permissionDecision with its reason, edited
// arguments as updatedInput; a deny also exits 2 with the reason on
// stderr, which blocks even if the JSON were not read. PermissionRequest:
// decision.behavior, edited arguments as decision.updatedInput, the deny
// reason as decision.message; exit 2 is not honoured there, so it exits
// 0 and the JSON decides.
func answerClaudeCode(c call, d Decision) answer {
	if c.Event == "PermissionRequest" {
		dec := map[string]any{"behavior": "deny", "message": d.Reason}
		if d.Allow {
			dec = map[string]any{"behavior": "allow"}
			if d.Args != nil {
				dec["updatedInput"] = d.Args
			}
		}
		return answer{Stdout: marshal(map[string]any{"hookSpecificOutput": map[string]any{"hookEventName": "PermissionRequest", "decision": dec}})}
	}
	o := map[string]any{"hookEventName": "PreToolUse", "permissionDecision": "deny", "permissionDecisionReason": d.Reason}
	if !d.Allow {
		return answer{Stdout: marshal(map[string]any{"hookSpecificOutput": o}), Stderr: d.Reason, Exit: 2}
	}
	o["permissionDecision"] = "allow"
	if d.Args != nil {
		o["updatedInput"] = d.Args
	}
	return answer{Stdout: marshal(map[string]any{"hookSpecificOutput": o})}
}

// Codex. Its output schema refuses unknown fields and a bare "allow"
// (either makes the hook fail, and the call run), so: an allow is `{}`,
// an edited allow is permissionDecision allow with updatedInput
// (PreToolUse only; PermissionRequest refuses updatedInput, so there the
// edit is a deny saying what was approved), and a deny exits 2 with its
// reason on stderr (Codex's block), the JSON deny on stdout as well.
func answerCodex(c call, d Decision) answer {
	if d.Allow && d.Args != nil && c.Event == "PermissionRequest" {
		d = editedDeny(d)
	}
	if c.Event == "PermissionRequest" {
		dec := map[string]any{"behavior": "allow"}
		if !d.Allow {
			dec = map[string]any{"behavior": "deny", "message": d.Reason}
			return answer{Stdout: marshal(map[string]any{"hookSpecificOutput": map[string]any{"hookEventName": "PermissionRequest", "decision": dec}}), Stderr: d.Reason, Exit: 2}
		}
		return answer{Stdout: marshal(map[string]any{"hookSpecificOutput": map[string]any{"hookEventName": "PermissionRequest", "decision": dec}})}
	}
	switch {
	case !d.Allow:
		return answer{Stdout: marshal(map[string]any{"hookSpecificOutput": map[string]any{"hookEventName": "PreToolUse", "permissionDecision": "deny", "permissionDecisionReason": d.Reason}}), Stderr: d.Reason, Exit: 2}
	case d.Args != nil:
		return answer{Stdout: marshal(map[string]any{"hookSpecificOutput": map[string]any{"hookEventName": "PreToolUse", "permissionDecision": "allow", "updatedInput": d.Args}})}
	}
	return answer{Stdout: []byte(`{}`)}
}

// Cursor: preToolUse (tool_name, tool_input, tool_use_id),
// beforeShellExecution (command: the tool "Shell"), beforeMCPExecution
// (tool_name, tool_input as a JSON string: the tool "MCP:<name>"),
// beforeReadFile (file_path: the tool "Read"; the file's content is never
// sent). The session is the conversation_id.
func parseCursor(in []byte) (call, error) {
	var v struct {
		Event        string          `json:"hook_event_name"`
		Conversation string          `json:"conversation_id"`
		Tool         string          `json:"tool_name"`
		Input        json.RawMessage `json:"tool_input"`
		ToolUseID    string          `json:"tool_use_id"`
		Command      string          `json:"command"`
		Cwd          string          `json:"cwd"`
		FilePath     string          `json:"file_path"`
	}
	if err := json.Unmarshal(in, &v); err != nil {
		return call{}, fmt.Errorf("read Cursor's hook input: %w", err)
	}
	c := call{Event: v.Event, Session: v.Conversation, CallID: v.ToolUseID}
	switch v.Event {
	case "preToolUse":
		c.Tool, c.Args = v.Tool, orEmpty(v.Input)
	case "beforeShellExecution":
		c.Tool, c.Args = "Shell", marshal(map[string]string{"command": v.Command, "cwd": v.Cwd})
	case "beforeMCPExecution":
		c.Tool, c.Args = "MCP:"+v.Tool, orEmpty(v.Input)
		var s string
		if json.Unmarshal(v.Input, &s) == nil { // a JSON string holding the arguments
			if !json.Valid([]byte(s)) {
				return call{}, errors.New("the tool_input of Cursor's beforeMCPExecution is not JSON")
			}
			c.Args = orEmpty(json.RawMessage(s))
		}
	case "beforeReadFile":
		c.Tool, c.Args = "Read", marshal(map[string]string{"file_path": v.FilePath})
	default:
		return call{}, fmt.Errorf("%w: event %q (configure preToolUse, beforeShellExecution, beforeMCPExecution or beforeReadFile)", errNotACall, v.Event)
	}
	if c.Tool == "" || c.Tool == "MCP:" {
		return call{}, errors.New("the hook input from Cursor names no tool")
	}
	return c, nil
}

// Cursor answers: permission allow or deny, user_message (shown to the
// person) and agent_message (to the agent), edited arguments as
// updated_input on preToolUse only. A deny is also exit 2 (Cursor's
// block).
func answerCursor(c call, d Decision) answer {
	if d.Allow && d.Args != nil && c.Event != "preToolUse" {
		d = editedDeny(d)
	}
	if !d.Allow {
		out := map[string]any{"permission": "deny", "user_message": d.Reason}
		if c.Event != "beforeReadFile" {
			out["agent_message"] = d.Reason
		}
		return answer{Stdout: marshal(out), Stderr: d.Reason, Exit: 2}
	}
	out := map[string]any{"permission": "allow"}
	if d.Args != nil {
		out["updated_input"] = d.Args
	}
	return answer{Stdout: marshal(out)}
}

// Gemini CLI: BeforeTool (session_id, tool_name, tool_input; no call id).
func parseGemini(in []byte) (call, error) {
	var v struct {
		Event   string          `json:"hook_event_name"`
		Session string          `json:"session_id"`
		Tool    string          `json:"tool_name"`
		Input   json.RawMessage `json:"tool_input"`
	}
	if err := json.Unmarshal(in, &v); err != nil {
		return call{}, fmt.Errorf("read Gemini CLI's hook input: %w", err)
	}
	if v.Event != "BeforeTool" {
		return call{}, fmt.Errorf("%w: event %q (configure the hook for BeforeTool)", errNotACall, v.Event)
	}
	if v.Tool == "" {
		return call{}, errors.New("the hook input from Gemini CLI names no tool_name")
	}
	return call{Event: v.Event, Tool: v.Tool, Args: orEmpty(v.Input), Session: v.Session}, nil
}

// Gemini answers: decision allow or deny with its reason (the reason
// reaches the model); edited arguments, whole, as
// hookSpecificOutput.tool_input. Gemini reads the JSON whatever the exit
// code, so it exits 0.
func answerGemini(_ call, d Decision) answer {
	if !d.Allow {
		return answer{Stdout: marshal(map[string]any{"decision": "deny", "reason": d.Reason})}
	}
	out := map[string]any{"decision": "allow"}
	if d.Args != nil {
		out["hookSpecificOutput"] = map[string]any{"hookEventName": "BeforeTool", "tool_input": d.Args}
	}
	return answer{Stdout: marshal(out)}
}

// orEmpty is raw, or an empty object for a call without arguments.
func orEmpty(raw json.RawMessage) json.RawMessage {
	if len(raw) == 0 || string(raw) == "null" {
		return json.RawMessage(`{}`)
	}
	return raw
}
