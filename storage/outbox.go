package storage

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/airlockhq/airlock/confirm"
	"github.com/airlockhq/airlock/internal/ids"
	"github.com/airlockhq/airlock/redact"
)

// EventType names a webhook event.
type EventType string

// Webhook event types. Each audit row is one event; see eventOf for the
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
	// EventAuditCheckpoint carries a signed checkpoint of the audit's chain
	// (checkpoint); it has no audit row of its own.
	EventAuditCheckpoint EventType = "audit_checkpoint"
	// EventAuditForeignRow: Airlock found the audit chain's head at a row
	// it did not write (audit_row; reason says where it chained instead).
	EventAuditForeignRow EventType = EventType(AuditForeignRow)
)

// EventTypes lists every webhook event type.
var EventTypes = []EventType{
	EventToolCall, EventApprovalRequest, EventApproval, EventDecision, EventExpired,
	EventRejectedClick, EventToolResult, EventGrantCreated, EventGrantUsed, EventGrantRevoked,
	EventExtended, EventEscalated, EventCallEdited, EventUnknownChecked, EventAuditCheckpoint, EventAuditForeignRow,
}

// Outcomes of decision, expired and tool_result events.
const (
	OutcomeAllowed   = "allowed"
	OutcomeDenied    = "denied"
	OutcomeExpired   = "expired"
	OutcomeAbandoned = "abandoned"
	// tool_result: the run's status, succeeded, failed or unknown.
)

// WebhookTarget is a webhook as storage sees it: which events it takes.
// Its URL and secret stay with the deliverer.
type WebhookTarget struct {
	ID     string      // WebhookID of its URL
	Events []EventType // the types it takes; empty: all
	// MaxResultBytes bounds the result a tool_result event carries: the
	// run's stored (scrubbed) result, cut on a UTF-8 boundary with
	// result_truncated set. 0: no result is sent.
	MaxResultBytes int
}

func (t WebhookTarget) takes(typ EventType) bool {
	if len(t.Events) == 0 {
		return true
	}
	for _, e := range t.Events {
		if e == typ {
			return true
		}
	}
	return false
}

// WebhookID is a webhook's stable id, derived from its URL: the first 8
// bytes of the URL's SHA-256, in hex. The URL itself (which may hold a
// token) is never stored.
func WebhookID(url string) string {
	sum := sha256.Sum256([]byte(url))
	return hex.EncodeToString(sum[:8])
}

// SetWebhooks tells storage which webhooks exist. From then on every audit
// row is written with one outbox row per webhook whose filter takes its
// event, in the same transaction; with none (the default), nothing is
// written. Call it once at start, before the bot runs.
func (db *DB) SetWebhooks(targets []WebhookTarget) error {
	known := map[EventType]bool{}
	for _, t := range EventTypes {
		known[t] = true
	}
	seen := map[string]bool{}
	out := make([]WebhookTarget, 0, len(targets))
	for i, t := range targets {
		if t.ID == "" {
			return fmt.Errorf("set webhooks: target %d has no id", i)
		}
		if seen[t.ID] {
			return fmt.Errorf("set webhooks: target id %s given twice", t.ID)
		}
		seen[t.ID] = true
		for _, e := range t.Events {
			if !known[e] {
				return fmt.Errorf("set webhooks: target %s: unknown event type %q", t.ID, e)
			}
		}
		if t.MaxResultBytes < 0 {
			return fmt.Errorf("set webhooks: target %s: negative max result bytes %d", t.ID, t.MaxResultBytes)
		}
		out = append(out, WebhookTarget{ID: t.ID, Events: append([]EventType(nil), t.Events...), MaxResultBytes: t.MaxResultBytes})
	}
	if len(out) == 0 {
		db.webhooks.Store(nil)
		return nil
	}
	db.webhooks.Store(&out)
	return nil
}

func (db *DB) webhookTargets() []WebhookTarget {
	if p := db.webhooks.Load(); p != nil {
		return *p
	}
	return nil
}

// WebhookEvent is the JSON object a webhook receives. Empty fields are
// left out, except id, type, time, conversation and actor.
type WebhookEvent struct {
	ID           string              `json:"id"` // unique; the same in every attempt and to every webhook
	Type         EventType           `json:"type"`
	Time         time.Time           `json:"time"`
	Conversation WebhookConversation `json:"conversation"`
	Batch        string              `json:"batch,omitempty"`
	Call         string              `json:"call,omitempty"` // the call's key within its batch
	Tool         string              `json:"tool,omitempty"`
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
	// `airlock audit verify -checkpoint` reads it.
	Checkpoint *AuditCheckpoint `json:"checkpoint,omitempty"`
	// AuditRow (audit_foreign_row) is the audit row Airlock found as the
	// chain's head without having written it.
	AuditRow int64 `json:"audit_row,omitempty"`
}

// WebhookConversation names the thread an event belongs to.
type WebhookConversation struct {
	ID       int64  `json:"id,omitempty" db:"-"` // as in airlock audit -conversation
	Platform string `json:"platform" db:"platform"`
	Channel  string `json:"channel" db:"channel"`
	Thread   string `json:"thread" db:"thread"`
}

// encode renders the event with Args spliced in verbatim (json.Marshal
// would compact them and escape <, > and &).
func (ev WebhookEvent) encode() []byte {
	var o rawObject
	o.add("id", ev.ID)
	o.add("type", ev.Type)
	o.add("time", ev.Time.UTC().Format(time.RFC3339Nano))
	o.add("conversation", ev.Conversation)
	if ev.Batch != "" {
		o.add("batch", ev.Batch)
	}
	if ev.Call != "" {
		o.add("call", ev.Call)
	}
	if ev.Tool != "" {
		o.add("tool", ev.Tool)
	}
	if ev.Args != nil {
		o.addRaw("args", ev.Args)
	}
	if ev.ModelArgs != nil {
		o.addRaw("model_args", ev.ModelArgs)
	}
	o.add("actor", ev.Actor)
	for _, f := range []struct{ k, v string }{{"outcome", ev.Outcome}, {"rule", ev.Rule}, {"grant", ev.Grant}, {"reason", ev.Reason}} {
		if f.v != "" {
			o.add(f.k, f.v)
		}
	}
	if ev.Result != nil {
		o.add("result", *ev.Result)
		if ev.ResultTruncated {
			o.add("result_truncated", true)
		}
	}
	if ev.Votes != 0 {
		o.add("votes", ev.Votes)
	}
	if ev.Required != 0 {
		o.add("required", ev.Required)
	}
	if ev.Expires != nil {
		o.add("expires", ev.Expires.UTC().Format(time.RFC3339Nano))
	}
	if ev.Step != nil {
		o.add("step", *ev.Step)
	}
	if ev.Suppressed != 0 {
		o.add("suppressed", ev.Suppressed)
	}
	if ev.Checkpoint != nil {
		o.add("checkpoint", ev.Checkpoint)
	}
	if ev.AuditRow != 0 {
		o.add("audit_row", ev.AuditRow)
	}
	if ev.PreviewHash != "" {
		o.add("preview_hash", ev.PreviewHash)
	}
	if ev.RecheckMatched != nil {
		o.add("recheck_matched", *ev.RecheckMatched)
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

// eventOf maps an audit row to its webhook event, without id,
// conversation and args. A decision with status expired is an expired
// event (outcome expired); an abandoned pause's decisions have outcome
// abandoned; a kind storage does not know keeps its name as type.
func eventOf(e confirm.AuditEvent) (WebhookEvent, auditDetail) {
	var d auditDetail
	_ = json.Unmarshal([]byte(e.Detail), &d) // details are storage's own JSON; a bad one maps to empty fields
	ev := WebhookEvent{
		Type: EventType(e.Kind), Time: e.At, Batch: e.BatchID, Call: e.CallKey, Tool: e.Tool,
		Actor: webhookActor(e.Actor),
	}
	switch e.Kind {
	case confirm.AuditToolCall:
		ev.Rule = ruleOf(d.Reasons)
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
	case AuditForeignRow:
		ev.AuditRow, ev.Reason = d.Row, d.Why
	}
	return ev, d
}

// webhookActor is the actor as webhooks name it: a person's platform user
// id (or the CLI's "cli:<user>"), and "airlock" for what Airlock decided
// itself (policy, rules, grants, expiry).
func webhookActor(a string) string {
	switch {
	case a == "", a == "policy", strings.HasPrefix(a, "rule:"), strings.HasPrefix(a, "grant:"):
		return auditSystemActor
	}
	return a
}

// enqueue writes the outbox rows of audit row e (ID and At set) for the
// targets whose filter takes its event, in the audit row's transaction.
func (db *DB) enqueue(ctx context.Context, ex dbtx, e confirm.AuditEvent, targets []WebhookTarget) error {
	ev, d := eventOf(e)
	var to []string
	for _, t := range targets {
		if t.takes(ev.Type) {
			to = append(to, t.ID)
		}
	}
	if len(to) == 0 {
		return nil
	}
	ev.ID = ids.New()
	ev.Conversation.ID = e.ConversationID
	if e.ConversationID != 0 {
		err := db.get(ctx, ex, &ev.Conversation, db.q(`SELECT platform, channel, thread FROM conversations WHERE id = ?`), e.ConversationID)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("load conversation: %w", err)
		}
	}
	if ev.Conversation.Platform == "" && ev.Conversation.Channel == "" {
		ev.Conversation.Platform, ev.Conversation.Channel = d.Platform, d.Channel // a rejected click outside any conversation
	}
	if e.BatchID != "" && e.CallKey != "" {
		var args struct {
			Model   string `db:"args"`
			Edited  string `db:"edited_args"`
			Preview string `db:"preview_hash"`
			Recheck string `db:"recheck_state"`
		}
		err := db.get(ctx, ex, &args, db.q(`SELECT args, edited_args, preview_hash, recheck_state FROM calls WHERE batch_id = ? AND key = ?`), e.BatchID, e.CallKey)
		if err == nil {
			ev.PreviewHash = args.Preview
			if r := confirm.RecheckState(args.Recheck); r != confirm.RecheckNone && ev.Type == EventToolResult {
				matched := r == confirm.RecheckMatched
				ev.RecheckMatched = &matched
			}
		}
		switch {
		case err == nil && args.Edited != "":
			ev.Args, ev.ModelArgs = json.RawMessage(args.Edited), json.RawMessage(args.Model)
		case err == nil:
			ev.Args = json.RawMessage(args.Model)
		case !errors.Is(err, sql.ErrNoRows): // a rejected click may name no call
			return fmt.Errorf("load call arguments: %w", err)
		}
	}
	// A tool_result carries the run's result, cut per webhook.
	var result *string
	if ev.Type == EventToolResult && e.BatchID != "" && e.CallKey != "" && slices.ContainsFunc(targets, func(t WebhookTarget) bool {
		return t.MaxResultBytes > 0 && slices.Contains(to, t.ID)
	}) {
		var r sql.NullString
		err := db.get(ctx, ex, &r, db.q(`SELECT result FROM calls WHERE batch_id = ? AND key = ?`), e.BatchID, e.CallKey)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("load call result: %w", err)
		}
		if r.Valid {
			result = &r.String
		}
	}
	bodies := map[int]string{} // by the result's bound
	bodyFor := func(max int) string {
		if result == nil {
			max = 0
		}
		if b, ok := bodies[max]; ok {
			return b
		}
		ev.Result, ev.ResultTruncated = nil, false
		if max > 0 {
			cut, truncated := excerpt(*result, max)
			ev.Result, ev.ResultTruncated = &cut, truncated
		}
		// What leaves for a webhook holds no secret (WithScrub): the
		// model's arguments, the edited ones, results and details alike.
		b := string(redact.JSON(ev.encode(), db.scrub))
		bodies[max] = b
		return b
	}
	maxOf := make(map[string]int, len(targets))
	for _, t := range targets {
		maxOf[t.ID] = t.MaxResultBytes
	}
	insert := db.q(`INSERT INTO outbox (event_id, target, type, conversation_id, audit_id, body, status, created_at, next_attempt_at)
		VALUES (?, ?, ?, ?, ?, ?, 'pending', ?, ?)`)
	for _, target := range to {
		if _, err := db.exec(ctx, ex, insert, ev.ID, target, string(ev.Type), e.ConversationID, e.ID, bodyFor(maxOf[target]), db.ts(e.At), db.ts(e.At)); err != nil {
			return fmt.Errorf("insert delivery to %s: %w", target, err)
		}
	}
	return nil
}

// DeliveryStatus is where a delivery stands.
type DeliveryStatus string

const (
	DeliveryPending   DeliveryStatus = "pending"   // not yet accepted; retried with backoff
	DeliveryDelivered DeliveryStatus = "delivered" // a 2xx accepted it
	DeliveryDead      DeliveryStatus = "dead"      // retries gave up; RetryDelivery revives it
)

// Delivery is one event to send to one webhook.
type Delivery struct {
	ID             int64 // delivery order
	EventID        string
	Target         string // WebhookID of the webhook's URL
	Type           EventType
	ConversationID int64
	AuditID        int64
	Body           json.RawMessage // the exact bytes to POST
	Status         DeliveryStatus
	Attempts       int
	CreatedAt      time.Time
	NextAttemptAt  time.Time
	FirstAttemptAt *time.Time
	LastAttemptAt  *time.Time
	LastError      string
	ClaimedBy      string
	ClaimExpiresAt *time.Time
	DeliveredAt    *time.Time
	DeadAt         *time.Time
}

type deliveryRow struct {
	ID             int64  `db:"id"`
	EventID        string `db:"event_id"`
	Target         string `db:"target"`
	Type           string `db:"type"`
	ConversationID int64  `db:"conversation_id"`
	AuditID        int64  `db:"audit_id"`
	Body           string `db:"body"`
	Status         string `db:"status"`
	Attempts       int    `db:"attempts"`
	CreatedAt      dbTime `db:"created_at"`
	NextAttemptAt  dbTime `db:"next_attempt_at"`
	FirstAttemptAt dbTime `db:"first_attempt_at"`
	LastAttemptAt  dbTime `db:"last_attempt_at"`
	LastError      string `db:"last_error"`
	ClaimedBy      string `db:"claimed_by"`
	ClaimExpiresAt dbTime `db:"claim_expires_at"`
	DeliveredAt    dbTime `db:"delivered_at"`
	DeadAt         dbTime `db:"dead_at"`
}

const deliveryColumns = `id, event_id, target, type, conversation_id, audit_id, body, status, attempts, created_at, next_attempt_at,
	first_attempt_at, last_attempt_at, last_error, claimed_by, claim_expires_at, delivered_at, dead_at`

func (r deliveryRow) delivery() Delivery {
	return Delivery{
		ID: r.ID, EventID: r.EventID, Target: r.Target, Type: EventType(r.Type), ConversationID: r.ConversationID,
		AuditID: r.AuditID, Body: json.RawMessage(r.Body), Status: DeliveryStatus(r.Status), Attempts: r.Attempts,
		CreatedAt: r.CreatedAt.t, NextAttemptAt: r.NextAttemptAt.t, FirstAttemptAt: r.FirstAttemptAt.ptr(),
		LastAttemptAt: r.LastAttemptAt.ptr(), LastError: r.LastError, ClaimedBy: r.ClaimedBy,
		ClaimExpiresAt: r.ClaimExpiresAt.ptr(), DeliveredAt: r.DeliveredAt.ptr(), DeadAt: r.DeadAt.ptr(),
	}
}

// earlierUndelivered holds for a delivery with an earlier one of its
// webhook and conversation not yet delivered (pending or dead): it waits.
const earlierUndelivered = `EXISTS (SELECT 1 FROM outbox p WHERE p.target = outbox.target AND p.conversation_id = outbox.conversation_id
	AND p.id < outbox.id AND p.status <> 'delivered')`

// ClaimDeliveries claims for worker, until now+ttl, up to limit deliveries
// to target that are due: pending, their next attempt at or before now,
// not claimed by a live claim, and the oldest undelivered one of their
// conversation for that webhook (a later event waits until the earlier
// ones were accepted). Each claim is one conditional UPDATE, so two
// replicas never hold one delivery at once; it counts an attempt and
// records the first attempt's time. Claims are returned in id order.
func (db *DB) ClaimDeliveries(ctx context.Context, target, worker string, now time.Time, ttl time.Duration, limit int) ([]Delivery, error) {
	if worker == "" {
		return nil, errors.New("claim deliveries: empty worker")
	}
	if ttl <= 0 || limit <= 0 {
		return nil, fmt.Errorf("claim deliveries: ttl %v and limit %d must be positive", ttl, limit)
	}
	now = db.nowOr(now)
	var ids []int64
	if err := db.sel(ctx, db.reader(), &ids, db.q(`SELECT id FROM outbox
		WHERE target = ? AND status = 'pending' AND next_attempt_at <= ? AND (claim_expires_at IS NULL OR claim_expires_at <= ?)
		AND NOT `+earlierUndelivered+` ORDER BY id LIMIT ?`), target, db.ts(now), db.ts(now), limit); err != nil {
		return nil, fmt.Errorf("claim deliveries: select: %w", err)
	}
	claim := db.q(`UPDATE outbox SET claimed_by = ?, claim_expires_at = ?, attempts = attempts + 1,
			first_attempt_at = COALESCE(first_attempt_at, ?), last_attempt_at = ?
		WHERE id = ? AND status = 'pending' AND next_attempt_at <= ? AND (claim_expires_at IS NULL OR claim_expires_at <= ?)
		AND NOT ` + earlierUndelivered + ` RETURNING ` + deliveryColumns)
	var out []Delivery
	for _, id := range ids {
		var r deliveryRow
		err := db.get(ctx, db.x, &r, claim, worker, db.ts(now.Add(ttl)), db.ts(now), db.ts(now), id, db.ts(now), db.ts(now))
		if errors.Is(err, sql.ErrNoRows) {
			continue // another replica won it
		}
		if err != nil {
			return out, fmt.Errorf("claim delivery %d: %w", id, err)
		}
		out = append(out, r.delivery())
	}
	return out, nil
}

// MarkDelivered records that a webhook accepted the delivery (a 2xx);
// false when it was no longer pending.
func (db *DB) MarkDelivered(ctx context.Context, id int64, now time.Time) (bool, error) {
	n, err := db.execCount(ctx, db.x, db.q(`UPDATE outbox SET status = 'delivered', delivered_at = ?, claimed_by = '', claim_expires_at = NULL, last_error = ''
		WHERE id = ? AND status = 'pending'`), db.ts(db.nowOr(now)), id)
	if err != nil {
		return false, fmt.Errorf("mark delivered %d: %w", id, err)
	}
	return n == 1, nil
}

// lastErrorLen bounds the error text kept with a delivery.
const lastErrorLen = 500

// MarkFailed records a failed attempt of worker's claim: the delivery is
// retried at next, or with dead it is dead (at now) until RetryDelivery.
// False when worker no longer holds it or it is no longer pending.
func (db *DB) MarkFailed(ctx context.Context, id int64, worker string, now, next time.Time, dead bool, lastErr string) (bool, error) {
	now = db.nowOr(now)
	status, deadAt := DeliveryPending, any(nil)
	if dead {
		status, deadAt = DeliveryDead, db.ts(now)
	}
	if next.IsZero() {
		next = now
	}
	msg, _ := excerpt(lastErr, lastErrorLen)
	n, err := db.execCount(ctx, db.x, db.q(`UPDATE outbox SET status = ?, next_attempt_at = ?, last_error = ?, dead_at = ?, claimed_by = '', claim_expires_at = NULL
		WHERE id = ? AND status = 'pending' AND claimed_by = ?`), string(status), db.ts(next), msg, deadAt, id, worker)
	if err != nil {
		return false, fmt.Errorf("mark failed %d: %w", id, err)
	}
	return n == 1, nil
}

// DeliveryFilter selects deliveries; zero fields select everything.
type DeliveryFilter struct {
	Status         []DeliveryStatus // any of these
	Target         string
	ConversationID int64
	Limit          int
}

// Deliveries lists the deliveries the filter selects, in id order.
func (db *DB) Deliveries(ctx context.Context, f DeliveryFilter) ([]Delivery, error) {
	marks := make([]string, len(f.Status))
	statuses := make([]any, len(f.Status))
	for i, s := range f.Status {
		marks[i], statuses[i] = "?", string(s)
	}
	var c conditions
	c.add(len(f.Status) > 0, "status IN ("+strings.Join(marks, ", ")+")", statuses...)
	c.add(f.Target != "", "target = ?", f.Target)
	c.add(f.ConversationID != 0, "conversation_id = ?", f.ConversationID)
	query := `SELECT ` + deliveryColumns + ` FROM outbox` + c.sql() + ` ORDER BY id`
	args := c.args
	if f.Limit > 0 {
		query += " LIMIT ?"
		args = append(args, f.Limit)
	}
	var rows []deliveryRow
	if err := db.sel(ctx, db.reader(), &rows, db.q(query), args...); err != nil {
		return nil, fmt.Errorf("load deliveries: %w", err)
	}
	out := make([]Delivery, len(rows))
	for i, r := range rows {
		out[i] = r.delivery()
	}
	return out, nil
}

// Delivery loads one delivery; ErrNotFound when none.
func (db *DB) Delivery(ctx context.Context, id int64) (*Delivery, error) {
	var r deliveryRow
	if err := db.get(ctx, db.reader(), &r, db.q(`SELECT `+deliveryColumns+` FROM outbox WHERE id = ?`), id); err != nil {
		return nil, fmt.Errorf("load delivery %d: %w", id, notFound(err))
	}
	d := r.delivery()
	return &d, nil
}

// RetryDelivery makes a dead delivery pending again, due at now, with its
// attempts and first-attempt time reset (a fresh 24 hours of retries);
// false when it was not dead (or does not exist).
func (db *DB) RetryDelivery(ctx context.Context, id int64, now time.Time) (bool, error) {
	n, err := db.execCount(ctx, db.x, db.q(`UPDATE outbox SET status = 'pending', attempts = 0, first_attempt_at = NULL, next_attempt_at = ?,
			dead_at = NULL, claimed_by = '', claim_expires_at = NULL
		WHERE id = ? AND status = 'dead'`), db.ts(db.nowOr(now)), id)
	if err != nil {
		return false, fmt.Errorf("retry delivery %d: %w", id, err)
	}
	return n == 1, nil
}

// PruneDeliveries deletes deliveries delivered before the time; pending
// and dead ones are kept.
func (db *DB) PruneDeliveries(ctx context.Context, before time.Time) (int64, error) {
	n, err := db.execCount(ctx, db.x, db.q(`DELETE FROM outbox WHERE status = 'delivered' AND delivered_at < ?`), db.ts(before))
	if err != nil {
		return 0, fmt.Errorf("prune deliveries: %w", err)
	}
	return n, nil
}
