package hook

import (
	"encoding/json"
	"errors"
	"fmt"
)

// call is one tool call an agent's hook asks about.
type call struct {
	Event   string // the agent's hook event
	Tool    string
	Args    json.RawMessage
	Session string
	CallID  string
}

// agent is one agent's hook contract: how its input reads, and how a
// decision is written for it (stdout and the exit code).
type agent struct {
	name  string
	parse func(in []byte) (call, error)
	// answer writes d for c. An agent that cannot take edited arguments
	// is told to call again with them (editedDeny).
	answer func(c call, d Decision) (out []byte, exit int)
}

// agents are the agents `airlock hook` speaks for, by name.
var agents = map[string]agent{
	"claude-code": {name: "claude-code", parse: parseClaudeCode, answer: answerClaudeCode},
}

// errNotACall: the hook's input asks about no tool call (an event the
// hook is not for).
var errNotACall = errors.New("the hook's input is not a tool call")

// editedDeny is the deny for an agent that cannot run edited arguments
// itself: what the approver allowed, to call again with.
func editedDeny(d Decision) string {
	return fmt.Sprintf("%s — approved with changes: %s; call again with these arguments.", d.Reason, oneLine(string(d.Args), 2000))
}

// Claude Code: PreToolUse and PermissionRequest command hooks.
func parseClaudeCode(in []byte) (call, error) {
	var v struct {
		Event     string          `json:"hook_event_name"`
		Session   string          `json:"session_id"`
		Tool      string          `json:"tool_name"`
		Input     json.RawMessage `json:"tool_input"`
		ToolUseID string          `json:"tool_use_id"`
	}
	if err := json.Unmarshal(in, &v); err != nil {
		return call{}, fmt.Errorf("read Claude Code's hook input: %w", err)
	}
	if v.Event != "PreToolUse" && v.Event != "PermissionRequest" {
		return call{}, fmt.Errorf("%w: event %q (configure the hook for PreToolUse or PermissionRequest)", errNotACall, v.Event)
	}
	if v.Tool == "" {
		return call{}, errors.New("Claude Code's hook input names no tool_name")
	}
	return call{Event: v.Event, Tool: v.Tool, Args: orEmpty(v.Input), Session: v.Session, CallID: v.ToolUseID}, nil
}

func answerClaudeCode(c call, d Decision) ([]byte, int) {
	var out any
	switch c.Event {
	case "PermissionRequest":
		dec := map[string]any{"behavior": "deny", "message": d.Reason}
		if d.Allow {
			dec = map[string]any{"behavior": "allow"}
			if d.Args != nil {
				dec["updatedInput"] = d.Args
			}
		}
		out = map[string]any{"hookSpecificOutput": map[string]any{"hookEventName": "PermissionRequest", "decision": dec}}
	default: // PreToolUse
		o := map[string]any{"hookEventName": "PreToolUse", "permissionDecision": "deny", "permissionDecisionReason": d.Reason}
		if d.Allow {
			o["permissionDecision"] = "allow"
			if d.Args != nil {
				o["updatedInput"] = d.Args
			}
		}
		out = map[string]any{"hookSpecificOutput": o}
	}
	b, _ := json.Marshal(out)
	return b, 0
}

// orEmpty is raw, or an empty object for a call without arguments.
func orEmpty(raw json.RawMessage) json.RawMessage {
	if len(raw) == 0 || string(raw) == "null" {
		return json.RawMessage(`{}`)
	}
	return raw
}
