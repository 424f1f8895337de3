package storage

import (
	"context"
	"errors"
	"fmt"

	"github.com/airlockhq/airlock/confirm"
)

// auditSystemActor is the actor of events Airlock itself causes.
const auditSystemActor = "airlock"

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

// Audit appends an audit event (and its webhook deliveries, in the same
// transaction); a zero At is now.
func (db *DB) Audit(ctx context.Context, e confirm.AuditEvent) error {
	if err := db.tx(ctx, func(tx *txn) error { return db.insertAudit(ctx, tx, e) }); err != nil {
		return fmt.Errorf("audit: %w", err)
	}
	return nil
}

// insertAudit is the one place audit rows are written: chained to the
// head (chain.go) in tx, with the event's outbox rows when webhooks are
// set, so both commit or neither does; a zero At is the transaction's
// clock reading. On PostgreSQL the row is written just before the commit
// (flushAudits), so the chain's head is locked for as short a time as
// can be.
func (db *DB) insertAudit(ctx context.Context, tx *txn, e confirm.AuditEvent) error {
	if e.Kind == "" {
		return errors.New("audit event without kind")
	}
	e.At = tx.nowOr(e.At)
	if tx.deferAudits {
		tx.audits = append(tx.audits, e)
		return nil
	}
	return db.writeAudit(ctx, tx, e)
}

// writeAudit writes the audit row and its outbox rows now.
func (db *DB) writeAudit(ctx context.Context, ex dbtx, e confirm.AuditEvent) error {
	id, err := db.insertChained(ctx, ex, AuditRecord{At: utc(e.At), Kind: string(e.Kind), ConversationID: e.ConversationID,
		BatchID: e.BatchID, CallKey: e.CallKey, Tool: e.Tool, Actor: e.Actor, Detail: e.Detail})
	if err != nil {
		return fmt.Errorf("insert audit %s: %w", e.Kind, err)
	}
	e.ID = id
	targets := db.webhookTargets()
	if len(targets) == 0 {
		return nil
	}
	if err := db.enqueue(ctx, ex, e, targets); err != nil {
		return fmt.Errorf("outbox of audit %s: %w", e.Kind, err)
	}
	return nil
}

// AuditEvents returns the events the filter selects, in id order.
func (db *DB) AuditEvents(ctx context.Context, f confirm.AuditFilter) ([]confirm.AuditEvent, error) {
	var c conditions
	c.add(f.ConversationID != 0, "conversation_id = ?", f.ConversationID)
	c.add(f.BatchID != "", "batch_id = ?", f.BatchID)
	c.add(!f.Since.IsZero(), "at >= ?", db.ts(f.Since))
	query := `SELECT id, at, kind, conversation_id, batch_id, call_key, tool, actor, detail FROM audit` + c.sql() + ` ORDER BY id`
	var rows []auditRow
	if err := db.sel(ctx, db.reader(), &rows, db.q(query), c.args...); err != nil {
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
