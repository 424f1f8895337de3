package storage

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/airlockhq/airlock/confirm"
)

// errLost rolls back a transaction whose conditional UPDATE lost; callers
// turn it into a plain "not won" (see transition).
var errLost = errors.New("lost")

// transition runs fn in one transaction as a conditional transition:
// true when it committed; false, and no error, when fn returned errLost
// (the transaction rolls back, nothing is written).
func (db *DB) transition(ctx context.Context, fn func(tx *txn) error) (bool, error) {
	err := db.tx(ctx, fn)
	if errors.Is(err, errLost) {
		return false, nil
	}
	return err == nil, err
}

// lostIfNoRows is a conditional statement's error in a transition:
// errLost when no row was in the state required (sql.ErrNoRows), any other
// error wrapped with what, nil when it changed its row.
func lostIfNoRows(err error, what string) error {
	if errors.Is(err, sql.ErrNoRows) {
		return errLost
	}
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return nil
}

// updateRow runs an UPDATE (query, args) of the one row what names, such
// as "grant <id>", outside a transaction; op prefixes its errors, which
// wrap ErrNotFound when no row matched.
func (db *DB) updateRow(ctx context.Context, op, what, query string, args ...any) error {
	n, err := db.execCount(ctx, db.x, db.q(query), args...)
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	if n == 0 {
		return fmt.Errorf("%s: %s: %w", op, what, confirm.ErrNotFound)
	}
	return nil
}

// conditions is a WHERE clause built from a filter's conditions, each
// with its arguments.
type conditions struct {
	where []string
	args  []any
}

// add adds cond, with its arguments, when the filter sets it (on).
func (c *conditions) add(on bool, cond string, args ...any) {
	if on {
		c.where = append(c.where, cond)
		c.args = append(c.args, args...)
	}
}

// sql is " WHERE " and the conditions joined with AND, or "" when none.
func (c *conditions) sql() string {
	if len(c.where) == 0 {
		return ""
	}
	return " WHERE " + strings.Join(c.where, " AND ")
}

type batchRow struct {
	ID             string         `db:"id"`
	ConversationID int64          `db:"conversation_id"`
	MessageSeq     int            `db:"message_seq"`
	RequestedBy    string         `db:"requested_by"`
	Status         string         `db:"status"`
	CardRef        string         `db:"card_ref"`
	ClaimedBy      string         `db:"claimed_by"`
	CreatedAt      dbTime         `db:"created_at"`
	ExpiresAt      dbTime         `db:"expires_at"`
	ExtendedBy     string         `db:"extended_by"`
	ExtendedAt     dbTime         `db:"extended_at"`
	Intro          sql.NullString `db:"intro"`
	CopiesPending  bool           `db:"copies_pending"`
	ClientLeftAt   dbTime         `db:"client_left_at"`
}

const batchColumns = `id, conversation_id, message_seq, requested_by, status, card_ref, claimed_by, created_at, expires_at, extended_by, extended_at, intro, copies_pending, client_left_at`

// fields are the scan destinations of batchColumns, in order.
func (r *batchRow) fields() []any {
	return []any{&r.ID, &r.ConversationID, &r.MessageSeq, &r.RequestedBy, &r.Status, &r.CardRef, &r.ClaimedBy, &r.CreatedAt, &r.ExpiresAt,
		&r.ExtendedBy, &r.ExtendedAt, &r.Intro, &r.CopiesPending, &r.ClientLeftAt}
}

// batch converts the row, without calls.
func (r batchRow) batch() *confirm.Batch {
	return &confirm.Batch{
		ID:             r.ID,
		ConversationID: r.ConversationID,
		MessageSeq:     r.MessageSeq,
		RequestedBy:    r.RequestedBy,
		Status:         confirm.BatchStatus(r.Status),
		CardRef:        r.CardRef,
		ClaimedBy:      r.ClaimedBy,
		CreatedAt:      r.CreatedAt.t,
		ExpiresAt:      r.ExpiresAt.t,
		ExtendedBy:     r.ExtendedBy,
		ExtendedAt:     r.ExtendedAt.ptr(),
		Intro:          nullString(r.Intro),
		CopiesPending:  r.CopiesPending,
		ClientLeftAt:   r.ClientLeftAt.ptr(),
	}
}

// nullString is a nullable text as a pointer: nil for NULL.
func nullString(s sql.NullString) *string {
	if !s.Valid {
		return nil
	}
	return &s.String
}

type callRow struct {
	BatchID        string `db:"batch_id"`
	Key            string `db:"key"`
	Position       int    `db:"position"`
	CallID         string `db:"call_id"`
	Tool           string `db:"tool"`
	Args           string `db:"args"`
	Summary        string `db:"summary"`
	Flagged        bool   `db:"flagged"`
	Decision       string `db:"decision"`
	DecidedBy      string `db:"decided_by"`
	DecidedAt      dbTime `db:"decided_at"`
	DenyMessage    string `db:"deny_message"`
	Run            string `db:"run_status"`
	Result         string `db:"result"`
	IdempotencyKey string `db:"idempotency_key"`
	ExpiresAt      dbTime `db:"expires_at"`
	Reasons        string `db:"reasons"`     // JSON array
	Approvals      int    `db:"approvals"`   // distinct allows needed
	Restrict       string `db:"restrict_to"` // JSON array
	Grantable      bool   `db:"grantable"`
	DenyReason     string `db:"deny_reason"`
	GrantID        string `db:"grant_id"`
	EditedArgs     string `db:"edited_args"` // "": not edited
	EditedBy       string `db:"edited_by"`
	EditedAt       dbTime `db:"edited_at"`
	Revision       int    `db:"revision"`
	CheckedBy      string `db:"checked_by"`
	CheckedAt      dbTime `db:"checked_at"` // NULL: not checked
	NoticeRef      string `db:"notice_ref"`
	Risk           string `db:"risk"`
	PreviewState   string `db:"preview_state"`
	PreviewOutput  string `db:"preview_output"`
	PreviewHash    string `db:"preview_hash"`
	RecheckState   string `db:"recheck_state"`
	RecheckHash    string `db:"recheck_hash"`
	PreviewSize    int64  `db:"preview_size"`
	DecidedVia     string `db:"decided_via"`
}

const callColumns = `batch_id, key, position, call_id, tool, args, summary, flagged, decision, decided_by, decided_at, deny_message, run_status, result, idempotency_key, expires_at, reasons, approvals, restrict_to, grantable, deny_reason, grant_id, edited_args, edited_by, edited_at, revision, checked_by, checked_at, notice_ref, risk, preview_state, preview_output, preview_hash, recheck_state, recheck_hash, preview_size, decided_via`

// fields are the scan destinations of callColumns, in order.
func (r *callRow) fields() []any {
	return []any{&r.BatchID, &r.Key, &r.Position, &r.CallID, &r.Tool, &r.Args, &r.Summary, &r.Flagged, &r.Decision, &r.DecidedBy,
		&r.DecidedAt, &r.DenyMessage, &r.Run, &r.Result, &r.IdempotencyKey, &r.ExpiresAt, &r.Reasons, &r.Approvals, &r.Restrict,
		&r.Grantable, &r.DenyReason, &r.GrantID, &r.EditedArgs, &r.EditedBy, &r.EditedAt, &r.Revision, &r.CheckedBy, &r.CheckedAt, &r.NoticeRef, &r.Risk,
		&r.PreviewState, &r.PreviewOutput, &r.PreviewHash, &r.RecheckState, &r.RecheckHash, &r.PreviewSize, &r.DecidedVia}
}

// call converts the row; Votes are loaded separately (see attachVotes).
func (r callRow) call() (confirm.Call, error) {
	var reasons []confirm.Reason
	if err := unmarshalList(r.Reasons, &reasons); err != nil {
		return confirm.Call{}, fmt.Errorf("call %s/%s reasons: %w", r.BatchID, r.Key, err)
	}
	var restrict []confirm.Approvers
	if err := unmarshalList(r.Restrict, &restrict); err != nil {
		return confirm.Call{}, fmt.Errorf("call %s/%s restrict: %w", r.BatchID, r.Key, err)
	}
	return confirm.Call{
		BatchID:        r.BatchID,
		Key:            r.Key,
		Position:       r.Position,
		CallID:         r.CallID,
		Tool:           r.Tool,
		Args:           rawBytes(r.Args),
		Summary:        r.Summary,
		Flagged:        r.Flagged,
		Reasons:        reasons,
		Approvals:      r.Approvals,
		Restrict:       restrict,
		Grantable:      r.Grantable,
		Risk:           confirm.Risk(r.Risk),
		Decision:       confirm.DecisionStatus(r.Decision),
		DecidedBy:      r.DecidedBy,
		DecidedAt:      r.DecidedAt.ptr(),
		DecidedVia:     confirm.Assurance(r.DecidedVia),
		DenyMessage:    r.DenyMessage,
		DenyReason:     r.DenyReason,
		GrantID:        r.GrantID,
		Run:            confirm.RunStatus(r.Run),
		Result:         r.Result,
		IdempotencyKey: r.IdempotencyKey,
		ExpiresAt:      r.ExpiresAt.t,
		EditedArgs:     rawBytes(r.EditedArgs),
		EditedBy:       r.EditedBy,
		EditedAt:       r.EditedAt.ptr(),
		Revision:       r.Revision,
		CheckedBy:      r.CheckedBy,
		CheckedAt:      r.CheckedAt.ptr(),
		NoticeRef:      r.NoticeRef,
		Preview: confirm.Preview{State: confirm.PreviewState(r.PreviewState), Output: r.PreviewOutput, Hash: r.PreviewHash,
			Size: r.PreviewSize, Recheck: confirm.RecheckState(r.RecheckState), RecheckHash: r.RecheckHash},
	}, nil
}

// calls converts rows in order.
func calls(rows []callRow) ([]confirm.Call, error) {
	out := make([]confirm.Call, len(rows))
	for i, r := range rows {
		c, err := r.call()
		if err != nil {
			return nil, err
		}
		out[i] = c
	}
	return out, nil
}

// marshalList renders a slice for a JSON list column; nil and empty are "[]".
func marshalList[T any](v []T) (string, error) {
	if len(v) == 0 {
		return "[]", nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return "", err
	}
	return string(b), nil
}

// unmarshalList reads a JSON list column; "[]" and "" read as nil.
func unmarshalList[T any](s string, v *[]T) error {
	*v = nil
	if s == "" || s == "[]" {
		return nil
	}
	if err := json.Unmarshal([]byte(s), v); err != nil {
		return err
	}
	if len(*v) == 0 {
		*v = nil
	}
	return nil
}

// voteRow is one row of votes.
type voteRow struct {
	BatchID   string `db:"batch_id"`
	Key       string `db:"key"`
	Approver  string `db:"approver"`
	At        dbTime `db:"at"`
	Assurance string `db:"assurance"`
}

type grantRow struct {
	ID             string `db:"id"`
	ConversationID int64  `db:"conversation_id"`
	Tool           string `db:"tool"`
	CreatedBy      string `db:"created_by"`
	CreatedAt      dbTime `db:"created_at"`
	ExpiresAt      dbTime `db:"expires_at"`
	RevokedBy      string `db:"revoked_by"`
	RevokedAt      dbTime `db:"revoked_at"`
	BatchID        string `db:"batch_id"`
	CallKey        string `db:"call_key"`
	NoticeRef      string `db:"notice_ref"`
	Requester      string `db:"requester"`
	CreatorRoles   string `db:"creator_roles"` // JSON array
	ToolDef        string `db:"tool_def"`
}

const grantColumns = `id, conversation_id, tool, created_by, created_at, expires_at, revoked_by, revoked_at, batch_id, call_key, notice_ref, requester, creator_roles, tool_def`

func (r grantRow) grant() confirm.Grant {
	g := confirm.Grant{
		ID: r.ID, ConversationID: r.ConversationID, Tool: r.Tool, CreatedBy: r.CreatedBy,
		CreatedAt: r.CreatedAt.t, ExpiresAt: r.ExpiresAt.t, RevokedBy: r.RevokedBy, RevokedAt: r.RevokedAt.ptr(),
		BatchID: r.BatchID, CallKey: r.CallKey, NoticeRef: r.NoticeRef, Requester: r.Requester, ToolDef: r.ToolDef,
	}
	if err := unmarshalList(r.CreatorRoles, &g.CreatorRoles); err != nil {
		g.CreatorRoles = nil // unreadable roles admit nothing a role restriction asks for
	}
	return g
}

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

// stamp is the store's clock now, normalised as stored. A write
// transaction reads it once, as it begins (txn.now); a statement outside
// one reads it for itself.
func (db *DB) stamp() time.Time { return utc(db.now()) }

// nowOr returns t, or the store's clock now when t is zero, normalised
// as stored.
func (db *DB) nowOr(t time.Time) time.Time {
	if t.IsZero() {
		return utc(db.now())
	}
	return utc(t)
}

// prefixed qualifies each column of a comma-separated list with prefix.
func prefixed(prefix, columns string) string {
	cols := strings.Split(columns, ", ")
	for i, c := range cols {
		cols[i] = prefix + c
	}
	return strings.Join(cols, ", ")
}
