// Package webhook is the payload of Airlock's webhooks: the event types,
// the JSON object a webhook receives and how an audit row maps to it.
// Storage writes each event's body in the audit row's transaction (its
// outbox); package events delivers it.
package webhook

import (
	"encoding/json"
	"strings"
	"time"

	"github.com/airlockhq/airlock/internal/jsonobj"

	"github.com/airlockhq/airlock/confirm"
)

// systemActor is the actor of what Airlock decided or did itself.
const systemActor = "airlock"

// EventType names a webhook event.
type EventType string

// Webhook event types. Each audit row is one event; see Of for the
// mapping from audit kinds.
const (
	EventToolCall        EventType = "tool_call"
	EventApprovalRequest EventType = "approval_request"
	EventApproval        EventType = "approval" // one person's allow of a call needing more than one
	EventDecision        EventType = "decision"
	EventExpired         EventType = "expired" // nobody decided a call in time
	EventRejectedClick   EventType = "rejected_click"
	EventToolResult      EventType = "tool_result"
	EventGrantCreated    EventType = "grant_created"
	EventGrantUsed       EventType = "grant_used"
	EventGrantRevoked    EventType = "grant_revoked"
	EventExtended        EventType = "extended"    // an approver pushed a card's deadline (expires: the new one)
	EventEscalated       EventType = "escalated"   // an escalation step fired (step)
	EventCallEdited      EventType = "call_edited" // an approver changed a call's arguments (args: the new ones; model_args: the model's)
	// EventUnknownChecked: a person marked a run whose outcome was unknown
	// checked; later calls of its tool are judged by the policy again.
	EventUnknownChecked EventType = "unknown_checked"
	// EventQuestionAsked: an upstream MCP server asked a question during a
	// call (its form posted, or declined at once by Airlock).
	EventQuestionAsked EventType = EventType(confirm.AuditQuestionAsked)
	// EventQuestionAnswered: a question ended; outcome accepted, declined
	// or cancelled, reason why Airlock declined or cancelled it.
	EventQuestionAnswered EventType = EventType(confirm.AuditQuestionAnswered)
	// EventAuditCheckpoint carries a signed checkpoint of the audit's chain
	// (checkpoint); it has no audit row of its own.
	EventAuditCheckpoint EventType = "audit_checkpoint"
	// EventAuditForeignRow: Airlock found the audit chain's head at a row
	// it did not write (audit_row; reason says where it chained instead).
	EventAuditForeignRow EventType = EventType(confirm.AuditForeignRow)
)

// EventTypes lists every webhook event type.
var EventTypes = []EventType{
	EventToolCall, EventApprovalRequest, EventApproval, EventDecision, EventExpired,
	EventRejectedClick, EventToolResult, EventGrantCreated, EventGrantUsed, EventGrantRevoked,
	EventExtended, EventEscalated, EventCallEdited, EventUnknownChecked, EventAuditCheckpoint, EventAuditForeignRow,
	EventQuestionAsked, EventQuestionAnswered,
}

// Outcomes of decision, expired and tool_result events.
const (
	OutcomeAllowed   = "allowed"
	OutcomeDenied    = "denied"
	OutcomeExpired   = "expired"
	OutcomeAbandoned = "abandoned"
	// tool_result: the run's status, succeeded, failed or unknown.
)

// Event is the JSON object a webhook receives. Empty fields are
// left out, except id, type, time, conversation and actor.
type Event struct {
	ID           string       `json:"id"` // unique; the same in every attempt and to every webhook
	Type         EventType    `json:"type"`
	Time         time.Time    `json:"time"`
	Conversation Conversation `json:"conversation"`
	Batch        string       `json:"batch,omitempty"`
	Call         string       `json:"call,omitempty"` // the call's key within its batch
	Tool         string       `json:"tool,omitempty"`
	// Args are the arguments the call runs with, as exact bytes (a JSON
	// string of them when they are not valid JSON): the model's, or once an
	// approver edited them, the edited ones.
	Args json.RawMessage `json:"args,omitempty"`
	// ModelArgs are the model's exact bytes, only when an approver edited
	// the arguments (Args are then the edited ones).
	ModelArgs json.RawMessage `json:"model_args,omitempty"`
	Actor     string          `json:"actor"`             // platform user id, or "airlock"
	Outcome   string          `json:"outcome,omitempty"` // decision/expired: allowed|denied|expired|abandoned; tool_result: succeeded|failed|unknown
	Rule      string          `json:"rule,omitempty"`    // the rule that refused (decision) or flagged (tool_call) the call
	Grant     string          `json:"grant,omitempty"`   // grant id (grant_* events)
	Reason    string          `json:"reason,omitempty"`  // a person's reason with a deny; why a click was rejected
	Votes     int             `json:"votes,omitempty"`   // approval: distinct allows so far
	// Required is how many distinct allows the call needs (approval).
	Required int `json:"required,omitempty"`
	// Expires: approval_request, when the card expires; extended, the new
	// deadline; grant_created, the grant's end.
	Expires *time.Time `json:"expires,omitempty"`
	Step    *int       `json:"step,omitempty"` // escalated: the step that fired
	// Suppressed (rejected_click): the same person's same rejections on the
	// same batch counted, not sent, since the previous such event.
	Suppressed int64 `json:"suppressed,omitempty"`
	// Result (tool_result) is the run's result as stored, scrubbed of
	// secrets, cut at the webhook's max_result_bytes on a UTF-8 boundary
	// (ResultTruncated then set); nil when the webhook takes no result.
	Result          *string `json:"result,omitempty"`
	ResultTruncated bool    `json:"result_truncated,omitempty"`
	// PreviewHash is the hex sha256 of the call's preview's whole
	// scrubbed output (tools[].preview; the card shows its first 16 KiB),
	// on the events of a call that has one.
	PreviewHash string `json:"preview_hash,omitempty"`
	// RecheckMatched (tool_result) says whether the preview run again just
	// before the tool gave the approved output (false: the tool did not
	// run); nil when there was no recheck.
	RecheckMatched *bool `json:"recheck_matched,omitempty"`
	// Checkpoint (audit_checkpoint) is the signed checkpoint, as
	// `airlock audit verify -checkpoint` reads it (storage.AuditCheckpoint
	// in JSON).
	Checkpoint json.RawMessage `json:"checkpoint,omitempty"`
	// AuditRow (audit_foreign_row) is the audit row Airlock found as the
	// chain's head without having written it.
	AuditRow int64 `json:"audit_row,omitempty"`
}

// Conversation names the thread an event belongs to.
type Conversation struct {
	ID       int64  `json:"id,omitempty"` // as in airlock audit -conversation
	Platform string `json:"platform"`
	Channel  string `json:"channel"`
	Thread   string `json:"thread"`
	// Client and Session name the gateway client and its session, for a
	// conversation that is one (its thread is then gateway/<client>/<session>).
	Client  string `json:"client,omitempty"`
	Session string `json:"session,omitempty"`
}

// Encode renders the event with Args spliced in verbatim (json.Marshal
// would compact them and escape <, > and &).
func (ev Event) Encode() []byte {
	var o jsonobj.Object
	o.Add("id", ev.ID)
	o.Add("type", ev.Type)
	o.Add("time", ev.Time.UTC().Format(time.RFC3339Nano))
	o.Add("conversation", ev.Conversation)
	if ev.Batch != "" {
		o.Add("batch", ev.Batch)
	}
	if ev.Call != "" {
		o.Add("call", ev.Call)
	}
	if ev.Tool != "" {
		o.Add("tool", ev.Tool)
	}
	if ev.Args != nil {
		o.AddRaw("args", ev.Args)
	}
	if ev.ModelArgs != nil {
		o.AddRaw("model_args", ev.ModelArgs)
	}
	o.Add("actor", ev.Actor)
	for _, f := range []struct{ k, v string }{{"outcome", ev.Outcome}, {"rule", ev.Rule}, {"grant", ev.Grant}, {"reason", ev.Reason}} {
		if f.v != "" {
			o.Add(f.k, f.v)
		}
	}
	if ev.Result != nil {
		o.Add("result", *ev.Result)
		if ev.ResultTruncated {
			o.Add("result_truncated", true)
		}
	}
	if ev.Votes != 0 {
		o.Add("votes", ev.Votes)
	}
	if ev.Required != 0 {
		o.Add("required", ev.Required)
	}
	if ev.Expires != nil {
		o.Add("expires", ev.Expires.UTC().Format(time.RFC3339Nano))
	}
	if ev.Step != nil {
		o.Add("step", *ev.Step)
	}
	if ev.Suppressed != 0 {
		o.Add("suppressed", ev.Suppressed)
	}
	if ev.Checkpoint != nil {
		o.AddRaw("checkpoint", ev.Checkpoint)
	}
	if ev.AuditRow != 0 {
		o.Add("audit_row", ev.AuditRow)
	}
	if ev.PreviewHash != "" {
		o.Add("preview_hash", ev.PreviewHash)
	}
	if ev.RecheckMatched != nil {
		o.Add("recheck_matched", *ev.RecheckMatched)
	}
	return []byte(o.String())
}

// auditDetail is the union of the audit details the mapping reads.
type auditDetail struct {
	Status    string           `json:"status"`
	Reason    string           `json:"reason"`
	Rule      string           `json:"rule"`
	Abandoned bool             `json:"abandoned"`
	GrantID   string           `json:"grant_id"`
	ExpiresAt *time.Time       `json:"expires_at"`
	Votes     int              `json:"votes"`
	Required  int              `json:"required"`
	Why       string           `json:"why"`
	Platform  string           `json:"platform"`
	Channel   string           `json:"channel"`
	Reasons   []confirm.Reason `json:"reasons"`
	Until     *time.Time       `json:"until"` // extended
	Step      *int             `json:"step"`  // escalated
	// Suppressed: rejected_click, repeats counted since the key's last row.
	Suppressed int64 `json:"suppressed"`
	Row        int64 `json:"row"` // audit_foreign_row: the row found as the head
}

// Of maps an audit row to its webhook event, without id, args and the
// conversation's id and thread: its Conversation holds the platform and
// channel the row's detail names (a rejected click outside any
// conversation), for the conversation's own to replace. A decision with
// status expired is an expired event (outcome expired); an abandoned
// pause's decisions have outcome abandoned; a kind this package does not
// know keeps its name as type.
func Of(e confirm.AuditEvent) Event {
	var d auditDetail
	_ = json.Unmarshal([]byte(e.Detail), &d) // details are storage's own JSON; a bad one maps to empty fields
	ev := Event{
		Type: EventType(e.Kind), Time: e.At, Batch: e.BatchID, Call: e.CallKey, Tool: e.Tool,
		Actor: actor(e.Actor), Conversation: Conversation{Platform: d.Platform, Channel: d.Channel},
	}
	switch e.Kind {
	case confirm.AuditToolCall:
		ev.Rule = confirm.RuleOf(d.Reasons)
	case confirm.AuditApprovalRequest:
		ev.Expires = d.ExpiresAt
	case confirm.AuditApproval:
		ev.Votes, ev.Required = d.Votes, d.Required
	case confirm.AuditDecision:
		ev.Rule, ev.Reason = d.Rule, d.Reason
		switch s := confirm.DecisionStatus(d.Status); {
		case s == confirm.DecisionExpired:
			ev.Type, ev.Outcome = EventExpired, OutcomeExpired
		case d.Abandoned:
			ev.Outcome = OutcomeAbandoned
		case s.Allowed():
			ev.Outcome = OutcomeAllowed
		default: // denied, denied_by_rule, invalid
			ev.Outcome = OutcomeDenied
		}
	case confirm.AuditRejectedClick:
		ev.Reason, ev.Suppressed = d.Why, d.Suppressed
	case confirm.AuditToolResult:
		ev.Outcome = d.Status
	case confirm.AuditGrantCreated:
		ev.Grant, ev.Expires = d.GrantID, d.ExpiresAt
	case confirm.AuditGrantUsed, confirm.AuditGrantRevoked:
		ev.Grant = d.GrantID
	case confirm.AuditExtended:
		ev.Expires = d.Until
	case confirm.AuditEscalated:
		ev.Step = d.Step
	case confirm.AuditForeignRow:
		ev.AuditRow, ev.Reason = d.Row, d.Why
	case confirm.AuditQuestionAnswered:
		ev.Outcome, ev.Reason = d.Status, d.Why
	}
	return ev
}

// actor is the actor as webhooks name it: a person's platform user
// id (or the CLI's "cli:<user>"), and "airlock" for what Airlock decided
// itself (policy, rules, grants, expiry).
func actor(a string) string {
	switch {
	case a == "", a == "policy", strings.HasPrefix(a, "rule:"), strings.HasPrefix(a, "grant:"):
		return systemActor
	}
	return a
}
