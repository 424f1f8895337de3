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
	"github.com/airlockhq/airlock/events/webhook"
	"github.com/airlockhq/airlock/gateway"
	"github.com/airlockhq/airlock/internal/ids"
	"github.com/airlockhq/airlock/redact"
)

// WebhookTarget is a webhook as storage sees it: which events it takes.
// Its URL and secret stay with the deliverer.
type WebhookTarget struct {
	ID     string              // WebhookID of its URL
	Events []webhook.EventType // the types it takes; empty: all
	// MaxResultBytes bounds the result a tool_result event carries: the
	// run's stored (scrubbed) result, cut on a UTF-8 boundary with
	// result_truncated set. 0: no result is sent.
	MaxResultBytes int
}

func (t WebhookTarget) takes(typ webhook.EventType) bool {
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
	known := map[webhook.EventType]bool{}
	for _, t := range webhook.EventTypes {
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
		out = append(out, WebhookTarget{ID: t.ID, Events: append([]webhook.EventType(nil), t.Events...), MaxResultBytes: t.MaxResultBytes})
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

// enqueue writes the outbox rows of audit row e (ID and At set) for the
// targets whose filter takes its event, in the audit row's transaction.
func (db *DB) enqueue(ctx context.Context, ex dbtx, e confirm.AuditEvent, targets []WebhookTarget) error {
	ev := webhook.Of(e)
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
	if e.ConversationID != 0 {
		var conv struct {
			Platform string `db:"platform"`
			Channel  string `db:"channel"`
			Thread   string `db:"thread"`
		}
		err := db.get(ctx, ex, &conv, db.q(`SELECT platform, channel, thread FROM conversations WHERE id = ?`), e.ConversationID)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("load conversation: %w", err)
		}
		if conv.Platform != "" || conv.Channel != "" { // else the detail's (a rejected click outside any conversation)
			ev.Conversation = webhook.Conversation{Platform: conv.Platform, Channel: conv.Channel, Thread: conv.Thread}
			ev.Conversation.Client, ev.Conversation.Session, _ = gateway.SessionOf(conv.Thread)
		}
	}
	ev.Conversation.ID = e.ConversationID
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
			if r := confirm.RecheckState(args.Recheck); r != confirm.RecheckNone && ev.Type == webhook.EventToolResult {
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
	if ev.Type == webhook.EventToolResult && e.BatchID != "" && e.CallKey != "" && slices.ContainsFunc(targets, func(t WebhookTarget) bool {
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
		b := string(redact.JSON(ev.Encode(), db.scrub))
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
	Type           webhook.EventType
	ConversationID int64
	AuditID        int64
	Body           json.RawMessage // the exact bytes to POST
	// URL is where a callback goes; "" for a webhook's delivery (its URL
	// is the config's).
	URL            string
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
	URL            string `db:"url"`
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

const deliveryColumns = `id, event_id, target, type, conversation_id, audit_id, body, url, status, attempts, created_at, next_attempt_at,
	first_attempt_at, last_attempt_at, last_error, claimed_by, claim_expires_at, delivered_at, dead_at`

func (r deliveryRow) delivery() Delivery {
	return Delivery{
		ID: r.ID, EventID: r.EventID, Target: r.Target, Type: webhook.EventType(r.Type), ConversationID: r.ConversationID,
		AuditID: r.AuditID, Body: json.RawMessage(r.Body), URL: r.URL, Status: DeliveryStatus(r.Status), Attempts: r.Attempts,
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
