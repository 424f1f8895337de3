package storage

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jmoiron/sqlx"

	"github.com/airlockhq/airlock/confirm"
)

// auditSystemActor is the actor of events Airlock itself causes.
const auditSystemActor = "airlock"

// resultExcerptLen bounds the result text copied into a tool_result event.
const resultExcerptLen = 2000

// errLost rolls back a transaction whose conditional UPDATE lost; callers
// turn it into a plain "not won".
var errLost = errors.New("lost")

type conversationRow struct {
	ID        int64  `db:"id"`
	Platform  string `db:"platform"`
	Channel   string `db:"channel"`
	Thread    string `db:"thread"`
	DM        bool   `db:"dm"`
	CreatedAt dbTime `db:"created_at"`
}

func (r conversationRow) conversation() confirm.Conversation {
	return confirm.Conversation{ID: r.ID, Platform: r.Platform, Channel: r.Channel, Thread: r.Thread, DM: r.DM, CreatedAt: r.CreatedAt.t}
}

type messageRow struct {
	ConversationID int64  `db:"conversation_id"`
	Seq            int    `db:"seq"`
	Role           string `db:"role"`
	Body           string `db:"body"`
	CreatedAt      dbTime `db:"created_at"`
}

type batchRow struct {
	ID             string `db:"id"`
	ConversationID int64  `db:"conversation_id"`
	MessageSeq     int    `db:"message_seq"`
	RequestedBy    string `db:"requested_by"`
	Status         string `db:"status"`
	CardRef        string `db:"card_ref"`
	ClaimedBy      string `db:"claimed_by"`
	CreatedAt      dbTime `db:"created_at"`
	ExpiresAt      dbTime `db:"expires_at"`
}

const batchColumns = `id, conversation_id, message_seq, requested_by, status, card_ref, claimed_by, created_at, expires_at`

type callRow struct {
	BatchID        string `db:"batch_id"`
	Key            string `db:"key"`
	Position       int    `db:"position"`
	CallID         string `db:"call_id"`
	Tool           string `db:"tool"`
	Args           string `db:"args"`
	Summary        string `db:"summary"`
	Flagged        bool   `db:"flagged"`
	FlagReason     string `db:"flag_reason"`
	Decision       string `db:"decision"`
	DecidedBy      string `db:"decided_by"`
	DecidedAt      dbTime `db:"decided_at"`
	DenyMessage    string `db:"deny_message"`
	Run            string `db:"run_status"`
	Result         string `db:"result"`
	IdempotencyKey string `db:"idempotency_key"`
	ExpiresAt      dbTime `db:"expires_at"`
}

const callColumns = `batch_id, key, position, call_id, tool, args, summary, flagged, decision, decided_by, decided_at, deny_message, run_status, result, idempotency_key, expires_at, flag_reason`

func (r callRow) call() confirm.Call {
	return confirm.Call{
		BatchID:        r.BatchID,
		Key:            r.Key,
		Position:       r.Position,
		CallID:         r.CallID,
		Tool:           r.Tool,
		Args:           rawBytes(r.Args),
		Summary:        r.Summary,
		Flagged:        r.Flagged,
		FlagReason:     r.FlagReason,
		Decision:       confirm.DecisionStatus(r.Decision),
		DecidedBy:      r.DecidedBy,
		DecidedAt:      r.DecidedAt.ptr(),
		DenyMessage:    r.DenyMessage,
		Run:            confirm.RunStatus(r.Run),
		Result:         r.Result,
		IdempotencyKey: r.IdempotencyKey,
		ExpiresAt:      r.ExpiresAt.t,
	}
}

type auditRow struct {
	ID             int64  `db:"id"`
	At             dbTime `db:"at"`
	Kind           string `db:"kind"`
	ConversationID int64  `db:"conversation_id"`
	BatchID        string `db:"batch_id"`
	CallKey        string `db:"call_key"`
	Tool           string `db:"tool"`
	Actor          string `db:"actor"`
	Detail         string `db:"detail"`
}

// changedCall is a call an UPDATE ... RETURNING touched.
type changedCall struct {
	BatchID  string `db:"batch_id"`
	Key      string `db:"key"`
	Tool     string `db:"tool"`
	Position int    `db:"position"`
}

func rawBytes(s string) json.RawMessage {
	if s == "" {
		return nil
	}
	return json.RawMessage(s)
}

// jsonDetail renders an audit detail object.
func jsonDetail(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprintf(`{"error":%q}`, err.Error())
	}
	return string(b)
}

// toolCallDetail renders a tool_call audit detail: a JSON object with the
// call's arguments spliced in as the exact bytes the model sent
// (json.Marshal would compact them and escape <, > and &).
func toolCallDetail(c confirm.Call) string {
	var o rawObject
	if c.CallID != "" {
		o.add("call_id", c.CallID)
	}
	o.addRaw("args", c.Args)
	o.add("flagged", c.Flagged)
	o.add("decision", string(c.Decision))
	if c.Summary != "" {
		o.add("summary", c.Summary)
	}
	if c.FlagReason != "" {
		o.add("flag_reason", c.FlagReason)
	}
	return o.String()
}

// rawObject builds a JSON object field by field, in order.
type rawObject struct{ b []byte }

// add appends a field whose value json.Marshal renders.
func (o *rawObject) add(key string, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		b, _ = json.Marshal(err.Error())
	}
	o.field(key, b)
}

// addRaw appends a field holding raw verbatim when it is valid JSON, and
// as a JSON string otherwise.
func (o *rawObject) addRaw(key string, raw []byte) {
	if len(raw) > 0 && json.Valid(raw) {
		o.field(key, raw)
		return
	}
	o.add(key, string(raw))
}

func (o *rawObject) field(key string, value []byte) {
	if len(o.b) == 0 {
		o.b = append(o.b, '{')
	} else {
		o.b = append(o.b, ',')
	}
	k, _ := json.Marshal(key)
	o.b = append(o.b, k...)
	o.b = append(o.b, ':')
	o.b = append(o.b, value...)
}

func (o *rawObject) String() string {
	if len(o.b) == 0 {
		return "{}"
	}
	return string(o.b) + "}"
}

// excerpt cuts s to at most n bytes on a rune boundary.
func excerpt(s string, n int) (string, bool) {
	if len(s) <= n {
		return s, false
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n], true
}

// nowOr returns t, or the database clock's now when t is zero, normalised
// as stored.
func (db *DB) nowOr(t time.Time) time.Time {
	if t.IsZero() {
		return utc(db.now())
	}
	return utc(t)
}

// Conversation returns the conversation of a thread, creating it with dm
// (a direct message); an existing conversation keeps its own dm. Concurrent
// callers for one thread get the same row.
func (db *DB) Conversation(ctx context.Context, platform, channel, thread string, dm bool) (confirm.Conversation, error) {
	_, err := db.x.ExecContext(ctx, db.q(`INSERT INTO conversations (platform, channel, thread, dm, created_at) VALUES (?, ?, ?, ?, ?)
		ON CONFLICT (platform, channel, thread) DO NOTHING`), platform, channel, thread, dm, db.ts(db.now()))
	if err != nil {
		return confirm.Conversation{}, fmt.Errorf("create conversation: %w", err)
	}
	return db.FindConversation(ctx, platform, channel, thread)
}

// FindConversation returns the conversation of a thread; ErrNotFound when
// the thread holds none.
func (db *DB) FindConversation(ctx context.Context, platform, channel, thread string) (confirm.Conversation, error) {
	var r conversationRow
	err := db.x.GetContext(ctx, &r, db.q(`SELECT id, platform, channel, thread, dm, created_at FROM conversations
		WHERE platform = ? AND channel = ? AND thread = ?`), platform, channel, thread)
	if err != nil {
		return confirm.Conversation{}, fmt.Errorf("load conversation: %w", notFound(err))
	}
	return r.conversation(), nil
}

// ConversationByID loads a conversation; ErrNotFound when none.
func (db *DB) ConversationByID(ctx context.Context, id int64) (confirm.Conversation, error) {
	var r conversationRow
	err := db.x.GetContext(ctx, &r, db.q(`SELECT id, platform, channel, thread, dm, created_at FROM conversations WHERE id = ?`), id)
	if err != nil {
		return confirm.Conversation{}, fmt.Errorf("load conversation %d: %w", id, notFound(err))
	}
	return r.conversation(), nil
}

// AppendMessages appends msgs in order with the next sequence numbers,
// setting Seq (and a zero CreatedAt) in msgs.
func (db *DB) AppendMessages(ctx context.Context, conversationID int64, msgs ...confirm.Message) error {
	if len(msgs) == 0 {
		return nil
	}
	out := append([]confirm.Message(nil), msgs...)
	err := db.tx(ctx, func(tx *sqlx.Tx) error {
		return db.appendMessages(ctx, tx, conversationID, out)
	})
	if err != nil {
		return fmt.Errorf("append messages: %w", err)
	}
	copy(msgs, out)
	return nil
}

// appendMessages inserts msgs after the conversation's last message,
// setting their ConversationID, Seq and zero CreatedAt. It locks the
// conversation row first so concurrent appenders queue (the primary key on
// (conversation_id, seq) backs this up).
func (db *DB) appendMessages(ctx context.Context, tx *sqlx.Tx, conversationID int64, msgs []confirm.Message) error {
	lock := `SELECT id FROM conversations WHERE id = ?`
	if db.driver == DriverPostgres {
		lock += ` FOR UPDATE`
	}
	var id int64
	if err := tx.GetContext(ctx, &id, db.q(lock), conversationID); err != nil {
		return fmt.Errorf("conversation %d: %w", conversationID, notFound(err))
	}
	var last int
	if err := tx.GetContext(ctx, &last, db.q(`SELECT COALESCE(MAX(seq), 0) FROM messages WHERE conversation_id = ?`), conversationID); err != nil {
		return fmt.Errorf("last seq: %w", err)
	}
	insert := db.q(`INSERT INTO messages (conversation_id, seq, role, body, created_at) VALUES (?, ?, ?, ?, ?)`)
	for i := range msgs {
		m := &msgs[i]
		m.ConversationID = conversationID
		m.Seq = last + 1 + i
		m.CreatedAt = db.nowOr(m.CreatedAt)
		if _, err := tx.ExecContext(ctx, insert, conversationID, m.Seq, m.Role, string(m.Body), db.ts(m.CreatedAt)); err != nil {
			return fmt.Errorf("insert message %d: %w", m.Seq, err)
		}
	}
	return nil
}

// Messages returns the conversation's messages in order.
func (db *DB) Messages(ctx context.Context, conversationID int64) ([]confirm.Message, error) {
	var rows []messageRow
	err := db.x.SelectContext(ctx, &rows, db.q(`SELECT conversation_id, seq, role, body, created_at FROM messages
		WHERE conversation_id = ? ORDER BY seq`), conversationID)
	if err != nil {
		return nil, fmt.Errorf("load messages: %w", err)
	}
	out := make([]confirm.Message, len(rows))
	for i, r := range rows {
		out[i] = confirm.Message{ConversationID: r.ConversationID, Seq: r.Seq, Role: r.Role, Body: rawBytes(r.Body), CreatedAt: r.CreatedAt.t}
	}
	return out, nil
}

// Message loads one message of a conversation; ErrNotFound when none.
func (db *DB) Message(ctx context.Context, conversationID int64, seq int) (confirm.Message, error) {
	var r messageRow
	err := db.x.GetContext(ctx, &r, db.q(`SELECT conversation_id, seq, role, body, created_at FROM messages
		WHERE conversation_id = ? AND seq = ?`), conversationID, seq)
	if err != nil {
		return confirm.Message{}, fmt.Errorf("load message %d: %w", seq, notFound(err))
	}
	return confirm.Message{ConversationID: r.ConversationID, Seq: r.Seq, Role: r.Role, Body: rawBytes(r.Body), CreatedAt: r.CreatedAt.t}, nil
}

// PruneEvents forgets platform event ids seen before the time: platforms
// retry within minutes, so old ids only take space.
func (db *DB) PruneEvents(ctx context.Context, before time.Time) (int64, error) {
	r, err := db.x.ExecContext(ctx, db.q(`DELETE FROM events WHERE seen_at < ?`), db.ts(before))
	if err != nil {
		return 0, fmt.Errorf("prune events: %w", err)
	}
	return affected(r)
}

// CreateBatch stores the assistant message, the batch and its calls, and
// the tool_call and approval_request audit events in one transaction. It
// fills in b: ID (random when empty), MessageSeq, Status (pending when
// empty), CreatedAt (now when zero), and per call BatchID, Decision
// (pending when empty), Run (not_started when empty), IdempotencyKey
// (<batch id>/<key> when empty) and ExpiresAt (the batch's when zero). A
// zero expiry is stored as NULL: the call never expires.
func (db *DB) CreateBatch(ctx context.Context, b *confirm.Batch, assistant confirm.Message) error {
	if b == nil {
		return errors.New("create batch: nil batch")
	}
	if len(b.Calls) == 0 {
		return errors.New("create batch: no calls")
	}
	nb := *b
	nb.Calls = append([]confirm.Call(nil), b.Calls...)
	if nb.ID == "" {
		nb.ID = newID()
	}
	if nb.Status == "" {
		nb.Status = confirm.BatchPending
	}
	now := utc(db.now())
	nb.CreatedAt = db.nowOr(nb.CreatedAt)
	if !nb.ExpiresAt.IsZero() {
		nb.ExpiresAt = utc(nb.ExpiresAt)
	}
	for i := range nb.Calls {
		c := &nb.Calls[i]
		c.BatchID = nb.ID
		if c.Decision == "" {
			c.Decision = confirm.DecisionPending
		}
		if c.Run == "" {
			c.Run = confirm.RunNotStarted
		}
		if c.IdempotencyKey == "" {
			c.IdempotencyKey = nb.ID + "/" + c.Key
		}
		if c.ExpiresAt.IsZero() {
			c.ExpiresAt = nb.ExpiresAt
		} else {
			c.ExpiresAt = utc(c.ExpiresAt)
		}
	}
	msgs := []confirm.Message{assistant}
	err := db.tx(ctx, func(tx *sqlx.Tx) error {
		if err := db.appendMessages(ctx, tx, nb.ConversationID, msgs); err != nil {
			return fmt.Errorf("append assistant message: %w", err)
		}
		nb.MessageSeq = msgs[0].Seq
		_, err := tx.ExecContext(ctx, db.q(`INSERT INTO batches (id, conversation_id, message_seq, requested_by, status, card_ref, claimed_by, created_at, expires_at, updated_at)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`),
			nb.ID, nb.ConversationID, nb.MessageSeq, nb.RequestedBy, string(nb.Status), nb.CardRef, nb.ClaimedBy,
			db.ts(nb.CreatedAt), db.nts(nb.ExpiresAt), db.ts(now))
		if err != nil {
			return fmt.Errorf("insert batch: %w", err)
		}
		insert := db.q(`INSERT INTO calls (` + callColumns + `) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`)
		for _, c := range nb.Calls {
			var decidedAt any
			if c.DecidedAt != nil {
				decidedAt = db.ts(*c.DecidedAt)
			}
			_, err := tx.ExecContext(ctx, insert, c.BatchID, c.Key, c.Position, c.CallID, c.Tool, string(c.Args), c.Summary, c.Flagged,
				string(c.Decision), c.DecidedBy, decidedAt, c.DenyMessage, string(c.Run), c.Result, c.IdempotencyKey, db.nts(c.ExpiresAt), c.FlagReason)
			if err != nil {
				return fmt.Errorf("insert call %q: %w", c.Key, err)
			}
		}
		for _, c := range nb.Calls {
			err := db.insertAudit(ctx, tx, confirm.AuditEvent{
				At: now, Kind: confirm.AuditToolCall, ConversationID: nb.ConversationID, BatchID: nb.ID,
				CallKey: c.Key, Tool: c.Tool, Actor: nb.RequestedBy,
				Detail: toolCallDetail(c),
			})
			if err != nil {
				return err
			}
		}
		var pending []string
		for _, c := range nb.Calls {
			if c.Decision == confirm.DecisionPending {
				pending = append(pending, c.Key)
			}
		}
		var expires *time.Time
		if !nb.ExpiresAt.IsZero() {
			expires = &nb.ExpiresAt
		}
		if nb.Status != confirm.BatchPending {
			return nil // nothing gated: no person is asked
		}
		return db.insertAudit(ctx, tx, confirm.AuditEvent{
			At: now, Kind: confirm.AuditApprovalRequest, ConversationID: nb.ConversationID, BatchID: nb.ID,
			Actor: nb.RequestedBy,
			Detail: jsonDetail(struct {
				MessageSeq int        `json:"message_seq"`
				Calls      int        `json:"calls"`
				Pending    []string   `json:"pending"`
				ExpiresAt  *time.Time `json:"expires_at,omitempty"`
			}{nb.MessageSeq, len(nb.Calls), pending, expires}),
		})
	})
	if err != nil {
		return fmt.Errorf("create batch: %w", err)
	}
	*b = nb
	return nil
}

// Batch loads a batch with its calls in position order; ErrNotFound when none.
func (db *DB) Batch(ctx context.Context, id string) (*confirm.Batch, error) {
	var r batchRow
	if err := db.x.GetContext(ctx, &r, db.q(`SELECT `+batchColumns+` FROM batches WHERE id = ?`), id); err != nil {
		return nil, fmt.Errorf("load batch %s: %w", id, notFound(err))
	}
	return db.withCalls(ctx, r)
}

// PendingBatch returns the conversation's newest batch in status pending;
// ErrNotFound when none.
func (db *DB) PendingBatch(ctx context.Context, conversationID int64) (*confirm.Batch, error) {
	var r batchRow
	err := db.x.GetContext(ctx, &r, db.q(`SELECT `+batchColumns+` FROM batches
		WHERE conversation_id = ? AND status = 'pending' ORDER BY created_at DESC, id DESC LIMIT 1`), conversationID)
	if err != nil {
		return nil, fmt.Errorf("load pending batch: %w", notFound(err))
	}
	return db.withCalls(ctx, r)
}

func (db *DB) withCalls(ctx context.Context, r batchRow) (*confirm.Batch, error) {
	var rows []callRow
	if err := db.x.SelectContext(ctx, &rows, db.q(`SELECT `+callColumns+` FROM calls WHERE batch_id = ? ORDER BY position`), r.ID); err != nil {
		return nil, fmt.Errorf("load calls of batch %s: %w", r.ID, err)
	}
	b := &confirm.Batch{
		ID:             r.ID,
		ConversationID: r.ConversationID,
		MessageSeq:     r.MessageSeq,
		RequestedBy:    r.RequestedBy,
		Status:         confirm.BatchStatus(r.Status),
		CardRef:        r.CardRef,
		ClaimedBy:      r.ClaimedBy,
		CreatedAt:      r.CreatedAt.t,
		ExpiresAt:      r.ExpiresAt.t,
		Calls:          make([]confirm.Call, len(rows)),
	}
	for i, c := range rows {
		b.Calls[i] = c.call()
	}
	return b, nil
}

// SetCardRef stores the platform's reference of the batch's card.
func (db *DB) SetCardRef(ctx context.Context, batchID, ref string) error {
	res, err := db.x.ExecContext(ctx, db.q(`UPDATE batches SET card_ref = ?, updated_at = ? WHERE id = ?`), ref, db.ts(db.now()), batchID)
	if err != nil {
		return fmt.Errorf("set card ref: %w", err)
	}
	n, err := affected(res)
	if err != nil {
		return fmt.Errorf("set card ref: %w", err)
	}
	if n == 0 {
		return fmt.Errorf("set card ref: batch %s: %w", batchID, confirm.ErrNotFound)
	}
	return nil
}

// batchExists reports whether the batch exists.
func (db *DB) batchExists(ctx context.Context, ex sqlx.QueryerContext, batchID string) (bool, error) {
	var n int
	if err := sqlx.GetContext(ctx, ex, &n, db.q(`SELECT COUNT(*) FROM batches WHERE id = ?`), batchID); err != nil {
		return false, err
	}
	return n > 0, nil
}

// callExists reports whether the call exists.
func (db *DB) callExists(ctx context.Context, ex sqlx.QueryerContext, batchID, key string) (bool, error) {
	var n int
	if err := sqlx.GetContext(ctx, ex, &n, db.q(`SELECT COUNT(*) FROM calls WHERE batch_id = ? AND key = ?`), batchID, key); err != nil {
		return false, err
	}
	return n > 0, nil
}

// lostOrMissing explains a conditional UPDATE on a call that changed no
// row: ErrNotFound when the call does not exist, errLost otherwise.
func (db *DB) lostOrMissing(ctx context.Context, ex sqlx.QueryerContext, batchID, key string) error {
	ok, err := db.callExists(ctx, ex, batchID, key)
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("call %s/%s: %w", batchID, key, confirm.ErrNotFound)
	}
	return errLost
}

// lockPendingBatch takes the batch row's write lock while it is pending
// (on PostgreSQL the UPDATE's row lock serialises deciders of one batch).
// It returns false when the batch is not pending.
func (db *DB) lockPendingBatch(ctx context.Context, tx *sqlx.Tx, batchID string, now time.Time) (bool, error) {
	res, err := tx.ExecContext(ctx, db.q(`UPDATE batches SET updated_at = ? WHERE id = ? AND status = 'pending'`), db.ts(now), batchID)
	if err != nil {
		return false, fmt.Errorf("lock batch: %w", err)
	}
	n, err := affected(res)
	return n == 1, err
}

// Decide takes one call from pending to d.Status while it is pending and
// d.Now is before its expiry, audits the decision, and takes the batch to
// decided when no call is left pending. Lost races and decisions on calls no
// longer pending (or expired) return Won=false and no error; a missing batch
// or call returns ErrNotFound.
func (db *DB) Decide(ctx context.Context, d confirm.Decide) (confirm.DecideResult, error) {
	if d.Status == "" || d.Status == confirm.DecisionPending {
		return confirm.DecideResult{}, fmt.Errorf("decide: invalid decision status %q", d.Status)
	}
	now := db.nowOr(d.Now)
	var res confirm.DecideResult
	err := db.tx(ctx, func(tx *sqlx.Tx) error {
		res = confirm.DecideResult{}
		ok, err := db.lockPendingBatch(ctx, tx, d.BatchID, now)
		if err != nil {
			return err
		}
		if !ok {
			exists, err := db.batchExists(ctx, tx, d.BatchID)
			if err != nil {
				return err
			}
			if !exists {
				return fmt.Errorf("batch %s: %w", d.BatchID, confirm.ErrNotFound)
			}
			return db.lostOrMissing(ctx, tx, d.BatchID, d.Key)
		}
		r, err := tx.ExecContext(ctx, db.q(`UPDATE calls SET decision = ?, decided_by = ?, decided_at = ?, deny_message = ?
			WHERE batch_id = ? AND key = ? AND decision = 'pending' AND (expires_at IS NULL OR expires_at > ?)`),
			string(d.Status), d.By, db.ts(now), d.Message, d.BatchID, d.Key, db.ts(now))
		if err != nil {
			return fmt.Errorf("update call: %w", err)
		}
		n, err := affected(r)
		if err != nil {
			return err
		}
		if n == 0 {
			return db.lostOrMissing(ctx, tx, d.BatchID, d.Key)
		}
		res.Won = true
		var info struct {
			ConversationID int64  `db:"conversation_id"`
			Tool           string `db:"tool"`
		}
		if err := tx.GetContext(ctx, &info, db.q(`SELECT b.conversation_id, c.tool FROM calls c JOIN batches b ON b.id = c.batch_id
			WHERE c.batch_id = ? AND c.key = ?`), d.BatchID, d.Key); err != nil {
			return fmt.Errorf("load call: %w", err)
		}
		if err := db.insertAudit(ctx, tx, confirm.AuditEvent{
			At: now, Kind: confirm.AuditDecision, ConversationID: info.ConversationID, BatchID: d.BatchID,
			CallKey: d.Key, Tool: info.Tool, Actor: d.By,
			Detail: decisionDetail(d.Status, d.Message, false),
		}); err != nil {
			return err
		}
		decided, err := db.finishDeciding(ctx, tx, d.BatchID, now)
		res.BatchDecided = decided
		return err
	})
	if errors.Is(err, errLost) {
		return confirm.DecideResult{}, nil
	}
	if err != nil {
		return confirm.DecideResult{}, fmt.Errorf("decide %s/%s: %w", d.BatchID, d.Key, err)
	}
	return res, nil
}

// finishDeciding takes the batch from pending to decided when none of its
// calls is pending any more.
func (db *DB) finishDeciding(ctx context.Context, tx *sqlx.Tx, batchID string, now time.Time) (bool, error) {
	var left int
	if err := tx.GetContext(ctx, &left, db.q(`SELECT COUNT(*) FROM calls WHERE batch_id = ? AND decision = 'pending'`), batchID); err != nil {
		return false, fmt.Errorf("count pending calls: %w", err)
	}
	if left > 0 {
		return false, nil
	}
	r, err := tx.ExecContext(ctx, db.q(`UPDATE batches SET status = 'decided', updated_at = ? WHERE id = ? AND status = 'pending'`), db.ts(now), batchID)
	if err != nil {
		return false, fmt.Errorf("mark batch decided: %w", err)
	}
	n, err := affected(r)
	return n == 1, err
}

func decisionDetail(status confirm.DecisionStatus, message string, abandoned bool) string {
	return jsonDetail(struct {
		Status    string `json:"status"`
		Message   string `json:"message"`
		Abandoned bool   `json:"abandoned,omitempty"`
	}{string(status), message, abandoned})
}

// ResolvePending decides every still-pending call of a pending batch with
// status and message whatever the expiry, and with abandon also denies calls
// allowed earlier that have not started; it audits each changed call and
// takes the batch to decided, in one transaction. It returns how many calls
// it changed; zero when the batch was not pending.
func (db *DB) ResolvePending(ctx context.Context, batchID string, status confirm.DecisionStatus, by, message string, abandon bool, now time.Time) (int, error) {
	if status == "" || status == confirm.DecisionPending {
		return 0, fmt.Errorf("resolve pending: invalid decision status %q", status)
	}
	now = db.nowOr(now)
	var changed int
	err := db.tx(ctx, func(tx *sqlx.Tx) error {
		changed = 0
		ok, err := db.lockPendingBatch(ctx, tx, batchID, now)
		if err != nil {
			return err
		}
		if !ok {
			return errLost
		}
		var calls []changedCall
		if err := tx.SelectContext(ctx, &calls, db.q(`UPDATE calls SET decision = ?, decided_by = ?, decided_at = ?, deny_message = ?
			WHERE batch_id = ? AND decision = 'pending' RETURNING batch_id, key, tool, position`),
			string(status), by, db.ts(now), message, batchID); err != nil {
			return fmt.Errorf("decide pending calls: %w", err)
		}
		var allowed []changedCall
		if abandon {
			if err := tx.SelectContext(ctx, &allowed, db.q(`UPDATE calls SET decision = 'denied', decided_by = ?, decided_at = ?, deny_message = ?
				WHERE batch_id = ? AND decision IN ('allowed', 'allowed_by_policy') AND run_status = 'not_started'
				RETURNING batch_id, key, tool, position`),
				by, db.ts(now), message, batchID); err != nil {
				return fmt.Errorf("deny allowed calls: %w", err)
			}
		}
		type change struct {
			changedCall
			status confirm.DecisionStatus
		}
		all := make([]change, 0, len(calls)+len(allowed))
		for _, c := range calls {
			all = append(all, change{c, status})
		}
		for _, c := range allowed {
			all = append(all, change{c, confirm.DecisionDenied})
		}
		sort.Slice(all, func(i, j int) bool { return all[i].Position < all[j].Position })
		if len(all) > 0 {
			var convID int64
			if err := tx.GetContext(ctx, &convID, db.q(`SELECT conversation_id FROM batches WHERE id = ?`), batchID); err != nil {
				return fmt.Errorf("load batch: %w", err)
			}
			for _, c := range all {
				if err := db.insertAudit(ctx, tx, confirm.AuditEvent{
					At: now, Kind: confirm.AuditDecision, ConversationID: convID, BatchID: batchID,
					CallKey: c.Key, Tool: c.Tool, Actor: by,
					Detail: decisionDetail(c.status, message, abandon),
				}); err != nil {
					return err
				}
			}
		}
		if _, err := db.finishDeciding(ctx, tx, batchID, now); err != nil {
			return err
		}
		changed = len(all)
		return nil
	})
	if errors.Is(err, errLost) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("resolve pending %s: %w", batchID, err)
	}
	return changed, nil
}

// PendingInChannel counts the pending batches of the conversations in a
// channel of a platform, whatever their thread.
func (db *DB) PendingInChannel(ctx context.Context, platform, channel string) (int, error) {
	var n int
	if err := db.x.GetContext(ctx, &n, db.q(`SELECT COUNT(*) FROM batches b JOIN conversations c ON c.id = b.conversation_id
		WHERE c.platform = ? AND c.channel = ? AND b.status = 'pending'`), platform, channel); err != nil {
		return 0, fmt.Errorf("pending in channel: %w", err)
	}
	return n, nil
}

// UnknownCalls lists the conversation's calls whose run outcome is unknown,
// oldest first (by batch creation, then position).
func (db *DB) UnknownCalls(ctx context.Context, conversationID int64) ([]confirm.Call, error) {
	var rows []callRow
	if err := db.x.SelectContext(ctx, &rows, db.q(`SELECT `+prefixed("c.", callColumns)+` FROM calls c JOIN batches b ON b.id = c.batch_id
		WHERE b.conversation_id = ? AND c.run_status = 'unknown'
		ORDER BY b.created_at, b.id, c.position`), conversationID); err != nil {
		return nil, fmt.Errorf("unknown calls: %w", err)
	}
	out := make([]confirm.Call, len(rows))
	for i, r := range rows {
		out[i] = r.call()
	}
	return out, nil
}

// prefixed qualifies each column of a comma-separated list with prefix.
func prefixed(prefix, columns string) string {
	cols := strings.Split(columns, ", ")
	for i, c := range cols {
		cols[i] = prefix + c
	}
	return strings.Join(cols, ", ")
}

// ExpiredBatches lists pending batches with a pending call whose expiry is
// at or before now, oldest first.
func (db *DB) ExpiredBatches(ctx context.Context, now time.Time) ([]string, error) {
	var ids []string
	err := db.x.SelectContext(ctx, &ids, db.q(`SELECT b.id FROM batches b WHERE b.status = 'pending' AND EXISTS (
			SELECT 1 FROM calls c WHERE c.batch_id = b.id AND c.decision = 'pending' AND c.expires_at <= ?)
		ORDER BY b.created_at, b.id`), db.ts(db.nowOr(now)))
	if err != nil {
		return nil, fmt.Errorf("expired batches: %w", err)
	}
	return ids, nil
}

// batchTransition runs one conditional UPDATE on a batch and reports whether
// it changed the row; ErrNotFound when the batch does not exist.
func (db *DB) batchTransition(ctx context.Context, query string, batchID string, args ...any) (bool, error) {
	res, err := db.x.ExecContext(ctx, db.q(query), args...)
	if err != nil {
		return false, err
	}
	n, err := affected(res)
	if err != nil {
		return false, err
	}
	if n == 1 {
		return true, nil
	}
	exists, err := db.batchExists(ctx, db.x, batchID)
	if err != nil {
		return false, err
	}
	if !exists {
		return false, fmt.Errorf("batch %s: %w", batchID, confirm.ErrNotFound)
	}
	return false, nil
}

// ClaimBatch takes a batch from decided to running for worker; only one
// caller wins.
func (db *DB) ClaimBatch(ctx context.Context, batchID, worker string) (bool, error) {
	won, err := db.batchTransition(ctx, `UPDATE batches SET status = 'running', claimed_by = ?, updated_at = ? WHERE id = ? AND status = 'decided'`,
		batchID, worker, db.ts(db.now()), batchID)
	if err != nil {
		return false, fmt.Errorf("claim batch: %w", err)
	}
	return won, nil
}

// ReleaseBatch takes a batch from running back to decided, clearing the
// claim. A batch not running is left alone.
func (db *DB) ReleaseBatch(ctx context.Context, batchID string) error {
	_, err := db.batchTransition(ctx, `UPDATE batches SET status = 'decided', claimed_by = '', updated_at = ? WHERE id = ? AND status = 'running'`,
		batchID, db.ts(db.now()), batchID)
	if err != nil {
		return fmt.Errorf("release batch: %w", err)
	}
	return nil
}

// StartRun takes an allowed call's run from not_started to running; false
// when it was not in not_started or the call is not allowed.
func (db *DB) StartRun(ctx context.Context, batchID, key string) (bool, error) {
	res, err := db.x.ExecContext(ctx, db.q(`UPDATE calls SET run_status = 'running'
		WHERE batch_id = ? AND key = ? AND run_status = 'not_started' AND decision IN ('allowed', 'allowed_by_policy')`), batchID, key)
	if err != nil {
		return false, fmt.Errorf("start run: %w", err)
	}
	n, err := affected(res)
	if err != nil {
		return false, fmt.Errorf("start run: %w", err)
	}
	if n == 1 {
		return true, nil
	}
	if err := db.lostOrMissing(ctx, db.x, batchID, key); !errors.Is(err, errLost) {
		return false, fmt.Errorf("start run: %w", err)
	}
	return false, nil
}

// FinishRun takes a call's run from running to status (succeeded or
// failed), storing result, and records the tool_result audit event, in one
// transaction. It returns ErrNotRunning when the run was not running.
func (db *DB) FinishRun(ctx context.Context, batchID, key string, status confirm.RunStatus, result string) error {
	switch status {
	case confirm.RunSucceeded, confirm.RunFailed, confirm.RunUnknown:
	default:
		return fmt.Errorf("finish run: invalid run status %q", status)
	}
	now := utc(db.now())
	err := db.tx(ctx, func(tx *sqlx.Tx) error {
		res, err := tx.ExecContext(ctx, db.q(`UPDATE calls SET run_status = ?, result = ?
			WHERE batch_id = ? AND key = ? AND run_status = 'running'`), string(status), result, batchID, key)
		if err != nil {
			return fmt.Errorf("update call: %w", err)
		}
		n, err := affected(res)
		if err != nil {
			return err
		}
		if n == 0 {
			if err := db.lostOrMissing(ctx, tx, batchID, key); !errors.Is(err, errLost) {
				return err
			}
			return fmt.Errorf("call %s/%s: %w", batchID, key, ErrNotRunning)
		}
		var info struct {
			ConversationID int64  `db:"conversation_id"`
			Tool           string `db:"tool"`
		}
		if err := tx.GetContext(ctx, &info, db.q(`SELECT b.conversation_id, c.tool FROM calls c JOIN batches b ON b.id = c.batch_id
			WHERE c.batch_id = ? AND c.key = ?`), batchID, key); err != nil {
			return fmt.Errorf("load call: %w", err)
		}
		return db.insertAudit(ctx, tx, confirm.AuditEvent{
			At: now, Kind: confirm.AuditToolResult, ConversationID: info.ConversationID, BatchID: batchID,
			CallKey: key, Tool: info.Tool, Actor: auditSystemActor, Detail: resultDetail(status, result),
		})
	})
	if err != nil {
		return fmt.Errorf("finish run %s/%s: %w", batchID, key, err)
	}
	return nil
}

func resultDetail(status confirm.RunStatus, result string) string {
	ex, cut := excerpt(result, resultExcerptLen)
	return jsonDetail(struct {
		Status    string `json:"status"`
		Result    string `json:"result"`
		Truncated bool   `json:"truncated,omitempty"`
	}{string(status), ex, cut})
}

// CompleteBatch takes the batch from running to done and appends the
// tool-results message, in one transaction; false when it was not running.
func (db *DB) CompleteBatch(ctx context.Context, batchID string, results confirm.Message) (bool, error) {
	now := utc(db.now())
	won := false
	err := db.tx(ctx, func(tx *sqlx.Tx) error {
		won = false
		res, err := tx.ExecContext(ctx, db.q(`UPDATE batches SET status = 'done', updated_at = ? WHERE id = ? AND status = 'running'`), db.ts(now), batchID)
		if err != nil {
			return fmt.Errorf("update batch: %w", err)
		}
		n, err := affected(res)
		if err != nil {
			return err
		}
		if n == 0 {
			exists, err := db.batchExists(ctx, tx, batchID)
			if err != nil {
				return err
			}
			if !exists {
				return fmt.Errorf("batch %s: %w", batchID, confirm.ErrNotFound)
			}
			return errLost
		}
		var convID int64
		if err := tx.GetContext(ctx, &convID, db.q(`SELECT conversation_id FROM batches WHERE id = ?`), batchID); err != nil {
			return fmt.Errorf("load batch: %w", err)
		}
		if err := db.appendMessages(ctx, tx, convID, []confirm.Message{results}); err != nil {
			return fmt.Errorf("append results: %w", err)
		}
		won = true
		return nil
	})
	if errors.Is(err, errLost) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("complete batch %s: %w", batchID, err)
	}
	return won, nil
}

// RecoverRunning marks the running calls of the given batches as unknown
// (result UnknownOutcomeMessage, a tool_result audit event each): the
// worker running them died. It returns the batch ids it touched.
func (db *DB) RecoverRunning(ctx context.Context, batchIDs ...string) ([]string, error) {
	now := utc(db.now())
	var ids []string
	err := db.tx(ctx, func(tx *sqlx.Tx) error {
		ids = nil
		var calls []changedCall
		for _, id := range batchIDs {
			var some []changedCall
			if err := tx.SelectContext(ctx, &some, db.q(`UPDATE calls SET run_status = 'unknown', result = ?
				WHERE run_status = 'running' AND batch_id = ? RETURNING batch_id, key, tool, position`), confirm.UnknownOutcomeMessage, id); err != nil {
				return fmt.Errorf("update calls: %w", err)
			}
			calls = append(calls, some...)
		}
		sort.Slice(calls, func(i, j int) bool {
			if calls[i].BatchID != calls[j].BatchID {
				return calls[i].BatchID < calls[j].BatchID
			}
			return calls[i].Position < calls[j].Position
		})
		conv := map[string]int64{}
		for _, c := range calls {
			convID, ok := conv[c.BatchID]
			if !ok {
				if err := tx.GetContext(ctx, &convID, db.q(`SELECT conversation_id FROM batches WHERE id = ?`), c.BatchID); err != nil {
					return fmt.Errorf("load batch %s: %w", c.BatchID, err)
				}
				conv[c.BatchID] = convID
				ids = append(ids, c.BatchID)
			}
			if err := db.insertAudit(ctx, tx, confirm.AuditEvent{
				At: now, Kind: confirm.AuditToolResult, ConversationID: convID, BatchID: c.BatchID,
				CallKey: c.Key, Tool: c.Tool, Actor: auditSystemActor,
				Detail: resultDetail(confirm.RunUnknown, confirm.UnknownOutcomeMessage),
			}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("recover running: %w", err)
	}
	return ids, nil
}

// BatchesIn lists ids of batches in the status, oldest first.
func (db *DB) BatchesIn(ctx context.Context, status confirm.BatchStatus) ([]string, error) {
	var ids []string
	if err := db.x.SelectContext(ctx, &ids, db.q(`SELECT id FROM batches WHERE status = ? ORDER BY created_at, id`), string(status)); err != nil {
		return nil, fmt.Errorf("batches in %s: %w", status, err)
	}
	return ids, nil
}

// OpenBatches lists ids of the conversation's batches that are decided or
// running (decided but not yet done), oldest first. It is not part of
// confirm.Store.
func (db *DB) OpenBatches(ctx context.Context, conversationID int64) ([]string, error) {
	var ids []string
	if err := db.x.SelectContext(ctx, &ids, db.q(`SELECT id FROM batches
		WHERE conversation_id = ? AND status IN ('decided', 'running') ORDER BY created_at, id`), conversationID); err != nil {
		return nil, fmt.Errorf("open batches: %w", err)
	}
	return ids, nil
}

// Audit appends an audit event; a zero At is now.
func (db *DB) Audit(ctx context.Context, e confirm.AuditEvent) error {
	if err := db.insertAudit(ctx, db.x, e); err != nil {
		return fmt.Errorf("audit: %w", err)
	}
	return nil
}

func (db *DB) insertAudit(ctx context.Context, ex sqlx.ExecerContext, e confirm.AuditEvent) error {
	if e.Kind == "" {
		return errors.New("audit event without kind")
	}
	_, err := ex.ExecContext(ctx, db.q(`INSERT INTO audit (at, kind, conversation_id, batch_id, call_key, tool, actor, detail)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?)`),
		db.ts(db.nowOr(e.At)), string(e.Kind), e.ConversationID, e.BatchID, e.CallKey, e.Tool, e.Actor, e.Detail)
	if err != nil {
		return fmt.Errorf("insert audit %s: %w", e.Kind, err)
	}
	return nil
}

// AuditEvents returns the events the filter selects, in id order.
func (db *DB) AuditEvents(ctx context.Context, f confirm.AuditFilter) ([]confirm.AuditEvent, error) {
	var where []string
	var args []any
	if f.ConversationID != 0 {
		where = append(where, "conversation_id = ?")
		args = append(args, f.ConversationID)
	}
	if !f.Since.IsZero() {
		where = append(where, "at >= ?")
		args = append(args, db.ts(f.Since))
	}
	query := `SELECT id, at, kind, conversation_id, batch_id, call_key, tool, actor, detail FROM audit`
	if len(where) > 0 {
		query += " WHERE " + strings.Join(where, " AND ")
	}
	query += " ORDER BY id"
	var rows []auditRow
	if err := db.x.SelectContext(ctx, &rows, db.q(query), args...); err != nil {
		return nil, fmt.Errorf("load audit: %w", err)
	}
	out := make([]confirm.AuditEvent, len(rows))
	for i, r := range rows {
		out[i] = confirm.AuditEvent{
			ID: r.ID, At: r.At.t, Kind: confirm.AuditKind(r.Kind), ConversationID: r.ConversationID,
			BatchID: r.BatchID, CallKey: r.CallKey, Tool: r.Tool, Actor: r.Actor, Detail: r.Detail,
		}
	}
	return out, nil
}

// MarkEvent records a platform event id; it reports true only the first
// time the id is seen, so a retried delivery never starts a second turn.
func (db *DB) MarkEvent(ctx context.Context, platform, eventID string, at time.Time) (bool, error) {
	if eventID == "" {
		return false, errors.New("mark event: empty event id")
	}
	r, err := db.x.ExecContext(ctx, db.q(`INSERT INTO events (platform, event_id, seen_at) VALUES (?, ?, ?)
		ON CONFLICT (platform, event_id) DO NOTHING`), platform, eventID, db.ts(db.nowOr(at)))
	if err != nil {
		return false, fmt.Errorf("mark event: %w", err)
	}
	n, err := affected(r)
	if err != nil {
		return false, err
	}
	return n == 1, nil
}

// AcquireLease takes or renews the lease on key for holder until now+ttl.
// It succeeds when nobody holds the key, the holder is the same, or the
// previous lease has lapsed; one conditional write decides.
func (db *DB) AcquireLease(ctx context.Context, key, holder string, ttl time.Duration, now time.Time) (bool, error) {
	now = db.nowOr(now)
	r, err := db.x.ExecContext(ctx, db.q(`INSERT INTO leases (key, holder, expires_at) VALUES (?, ?, ?)
		ON CONFLICT (key) DO UPDATE SET holder = excluded.holder, expires_at = excluded.expires_at
		WHERE leases.holder = excluded.holder OR leases.expires_at <= ?`),
		key, holder, db.ts(now.Add(ttl)), db.ts(now))
	if err != nil {
		return false, fmt.Errorf("acquire lease: %w", err)
	}
	n, err := affected(r)
	if err != nil {
		return false, err
	}
	return n == 1, nil
}

// ReleaseLease gives up holder's lease on key; a lease someone else holds
// is left alone.
func (db *DB) ReleaseLease(ctx context.Context, key, holder string) error {
	if _, err := db.x.ExecContext(ctx, db.q(`DELETE FROM leases WHERE key = ? AND holder = ?`), key, holder); err != nil {
		return fmt.Errorf("release lease: %w", err)
	}
	return nil
}

// DueReminders lists pending batches not yet reminded whose expiry is at
// or before due (now + the reminder lead) and still after now.
func (db *DB) DueReminders(ctx context.Context, now, due time.Time) ([]string, error) {
	var ids []string
	if err := db.x.SelectContext(ctx, &ids, db.q(`SELECT id FROM batches
		WHERE status = 'pending' AND reminded_at IS NULL AND expires_at IS NOT NULL AND expires_at <= ? AND expires_at > ?
		ORDER BY expires_at, id`), db.ts(due), db.ts(now)); err != nil {
		return nil, fmt.Errorf("due reminders: %w", err)
	}
	return ids, nil
}

// MarkReminded records that a batch's reminder was posted; true only for
// the first caller.
func (db *DB) MarkReminded(ctx context.Context, batchID string, now time.Time) (bool, error) {
	r, err := db.x.ExecContext(ctx, db.q(`UPDATE batches SET reminded_at = ? WHERE id = ? AND reminded_at IS NULL AND status = 'pending'`),
		db.ts(db.nowOr(now)), batchID)
	if err != nil {
		return false, fmt.Errorf("mark reminded: %w", err)
	}
	n, err := affected(r)
	if err != nil {
		return false, err
	}
	return n == 1, nil
}

// ClearLeases drops every lease. SQLite serves one process, so at its start
// no other holder can be alive; leases left by a killed process go at once
// instead of lapsing.
func (db *DB) ClearLeases(ctx context.Context) error {
	if _, err := db.x.ExecContext(ctx, `DELETE FROM leases`); err != nil {
		return fmt.Errorf("clear leases: %w", err)
	}
	return nil
}

// UnansweredConversations lists conversations whose newest message is a
// tool-results message: the model was never asked to answer it (the
// process died in between).
func (db *DB) UnansweredConversations(ctx context.Context) ([]int64, error) {
	var ids []int64
	if err := db.x.SelectContext(ctx, &ids, `SELECT m.conversation_id FROM messages m
		WHERE m.role = 'tool' AND m.seq = (SELECT MAX(seq) FROM messages WHERE conversation_id = m.conversation_id)
		ORDER BY m.conversation_id`); err != nil {
		return nil, fmt.Errorf("unanswered conversations: %w", err)
	}
	return ids, nil
}
