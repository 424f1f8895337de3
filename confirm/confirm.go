// Package confirm owns the rules of tool-call confirmation: which calls of a
// model reply need a person's yes, how calls are keyed, what a complete set of
// decisions is, and in which order results go back to the model. It also holds
// the domain types and the storage contract the rest of Airlock shares. It does
// no I/O.
package confirm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
)

// PositionKeyPrefix starts the key of a call that has no id of its own, or
// shares its id with another call of the reply: "#0", "#1", ...
const PositionKeyPrefix = "#"

// DefaultDenyMessage answers the model for a denied call without a reason.
const DefaultDenyMessage = "The user denied this tool call. It was not executed."

// MovedOnMessage answers the model for the calls of a pause that was
// abandoned because the user wrote again before deciding.
const MovedOnMessage = "The user moved on."

// ExpiredMessage answers the model for a call nobody decided in time.
const ExpiredMessage = "Approval expired: nobody decided in time. The tool call was not executed."

// UnknownOutcomeMessage answers the model for a call whose run was cut off
// (the process died while it ran). It is never run again automatically.
const UnknownOutcomeMessage = "The outcome of this tool call is unknown: Airlock stopped while it was running. It was not retried; a person must check whether it took effect."

// UncertainOutcomeMessage answers the model for a call whose run ended
// without a clear answer (a timeout or a cut connection after the request
// may have reached the service). It is never run again automatically.
const UncertainOutcomeMessage = "The outcome of this tool call is unknown: the request may have reached the service, but no answer came back. Do not retry it; a person must check whether it took effect."

// ToolCall is one tool call as the model gave it. Args are the exact bytes
// the model sent; they are never rewritten.
type ToolCall struct {
	ID   string          `json:"id,omitempty"`
	Name string          `json:"name"`
	Args json.RawMessage `json:"args"`
}

// Keys returns one key per call, in the model's order: the call's id when it
// has one that no other call of the reply shares, otherwise "#N" with N its
// 0-based position. The keys are distinct.
func Keys(calls []ToolCall) []string {
	seen := make(map[string]int, len(calls))
	for _, c := range calls {
		if c.ID != "" {
			seen[c.ID]++
		}
	}
	keys := make([]string, len(calls))
	for i, c := range calls {
		if c.ID != "" && seen[c.ID] == 1 && !isPositionKey(c.ID) {
			keys[i] = c.ID
		} else {
			keys[i] = PositionKeyPrefix + strconv.Itoa(i)
		}
	}
	return keys
}

// isPositionKey reports whether an id would collide with a position key
// ("#3"). Such an id is keyed by position itself, so keys stay distinct.
func isPositionKey(id string) bool {
	if len(id) < 2 || id[:1] != PositionKeyPrefix {
		return false
	}
	_, err := strconv.Atoi(id[1:])
	return err == nil
}

// SiblingInvalidMessage answers the other calls of a reply in which a call
// that needs confirmation had invalid arguments: nothing of it runs.
const SiblingInvalidMessage = "Not run: another call of this reply had invalid arguments; call again."

// PlannedCall is one call of a reply with the policy's verdict.
type PlannedCall struct {
	Key      string
	Position int
	Call     ToolCall
	Verdict  Verdict // the policy's verdict (given for invalid calls too)
	Flagged  bool    // a person must decide: the verdict asks, and the call is valid, not refused, not blocked
	Refused  bool    // the verdict denies: decided "denied by rule" at pause time, nobody asked
	Invalid  error   // the arguments failed validation: answered to the model, never run, nobody asked
	// Blocked: another call of the reply that needs confirmation had
	// invalid arguments, so this one is not run either (answered with
	// SiblingInvalidMessage) and nobody is asked.
	Blocked bool
}

// Plan keys the calls of a reply and asks the policy about each one; base
// carries where, by whom and when the reply was asked for. validate may be
// nil; a call it rejects is not flagged and goes back to the model as an
// error. When a call the policy would ask about has invalid arguments, the
// reply runs nothing: every other valid call is Blocked and nobody is
// asked. A call the policy denies is Refused. Otherwise paused is true when
// any call is flagged: then nothing of the reply may run before every call
// has a decision.
func Plan(calls []ToolCall, base Request, lookup func(name string) (ToolInfo, bool), policy Policy, validate func(ToolCall) error) (planned []PlannedCall, paused bool) {
	keys := Keys(calls)
	planned = make([]PlannedCall, len(calls))
	gatedInvalid := false
	for i, c := range calls {
		p := PlannedCall{Key: keys[i], Position: i, Call: c}
		if validate != nil {
			p.Invalid = validate(c)
		}
		if policy != nil {
			r := base
			r.Call, r.Tool = c, nil
			if t, ok := lookup(c.Name); ok {
				r.Tool = &t
			}
			p.Verdict = policy.Evaluate(r)
		}
		switch {
		case p.Invalid != nil:
			gatedInvalid = gatedInvalid || (p.Verdict.Ask && !p.Verdict.Deny)
		case p.Verdict.Deny:
			p.Refused = true
		default:
			p.Flagged = p.Verdict.Ask
		}
		planned[i] = p
	}
	for i := range planned {
		p := &planned[i]
		if gatedInvalid && p.Invalid == nil && !p.Refused {
			p.Flagged, p.Blocked = false, true
		}
		paused = paused || p.Flagged
	}
	return planned, paused
}

// Decision is the decision on one call of a paused reply.
type Decision struct {
	Key     string
	Allow   bool
	Message string // for a deny: what the model is told; empty means DefaultDenyMessage
}

// Allow lets the call with the key run.
func Allow(key string) Decision { return Decision{Key: key, Allow: true} }

// Deny answers the model with message (or DefaultDenyMessage) instead of running.
func Deny(key, message string) Decision { return Decision{Key: key, Message: message} }

// DenyMessage is what the model is told for a denied call.
func (d Decision) DenyMessage() string {
	if d.Message == "" {
		return DefaultDenyMessage
	}
	return d.Message
}

// Errors of the decision rules. Classify with errors.Is.
var (
	ErrMissingDecision   = errors.New("a call of the reply has no decision")
	ErrDuplicateDecision = errors.New("a call of the reply has more than one decision")
	ErrUnknownCall       = errors.New("a decision names no call of the reply")
	ErrToolUnavailable   = errors.New("an allowed call names a tool the bot does not carry")
	ErrTooManyRounds     = errors.New("the turn reached its limit of tool rounds")
)

// CheckDecisions enforces the rules before anything runs: every call of the
// reply has exactly one decision, every decision names a call of the reply,
// and every allowed call names a tool the bot carries now (has).
func CheckDecisions(calls []ToolCall, decisions []Decision, has func(name string) bool) error {
	keys := Keys(calls)
	index := make(map[string]int, len(keys))
	for i, k := range keys {
		index[k] = i
	}
	got := make(map[string]bool, len(decisions))
	for _, d := range decisions {
		i, ok := index[d.Key]
		if !ok {
			return fmt.Errorf("decision %q: %w", d.Key, ErrUnknownCall)
		}
		if got[d.Key] {
			return fmt.Errorf("decision %q: %w", d.Key, ErrDuplicateDecision)
		}
		got[d.Key] = true
		if d.Allow && (has == nil || !has(calls[i].Name)) {
			return fmt.Errorf("call %q (%s): %w", d.Key, calls[i].Name, ErrToolUnavailable)
		}
	}
	for _, k := range keys {
		if !got[k] {
			return fmt.Errorf("call %q: %w", k, ErrMissingDecision)
		}
	}
	return nil
}

// Result is the answer to one call, as it goes back to the model.
type Result struct {
	Key     string
	CallID  string // the id as the model gave it (may be empty or shared)
	Name    string
	Content string
	IsError bool // the tool failed, or the call was denied or not run
	Denied  bool
}

// Runner runs one allowed call. A returned error becomes an error result for
// the model; it does not stop the other calls.
type Runner func(ctx context.Context, key string, call ToolCall) (string, error)

// Execute checks the decisions, then runs the allowed calls in the model's
// order and answers the denied ones with their message. It returns one result
// per call, in the model's order. When a rule is broken nothing runs.
func Execute(ctx context.Context, calls []ToolCall, decisions []Decision, has func(name string) bool, run Runner) ([]Result, error) {
	if err := CheckDecisions(calls, decisions, has); err != nil {
		return nil, err
	}
	byKey := make(map[string]Decision, len(decisions))
	for _, d := range decisions {
		byKey[d.Key] = d
	}
	keys := Keys(calls)
	results := make([]Result, len(calls))
	for i, c := range calls {
		d := byKey[keys[i]]
		r := Result{Key: keys[i], CallID: c.ID, Name: c.Name}
		if !d.Allow {
			r.Content, r.IsError, r.Denied = d.DenyMessage(), true, true
		} else {
			out, err := run(ctx, keys[i], c)
			if err != nil {
				r.Content, r.IsError = err.Error(), true
			} else {
				r.Content = out
			}
		}
		results[i] = r
	}
	return results, nil
}

// CheckRounds returns ErrTooManyRounds when a turn that already ran done
// tool rounds may not run another; max <= 0 means the default of 8.
func CheckRounds(done, max int) error {
	if max <= 0 {
		max = DefaultMaxToolRounds
	}
	if done >= max {
		return fmt.Errorf("%d of %d rounds: %w", done, max, ErrTooManyRounds)
	}
	return nil
}

// DefaultMaxToolRounds is the default per-turn limit of tool rounds.
const DefaultMaxToolRounds = 8
