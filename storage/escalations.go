package storage

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/airlockhq/airlock/confirm"
)

// DueEscalations lists pending batches created at or before pausedBefore
// for which step has not fired, oldest first.
func (db *DB) DueEscalations(ctx context.Context, step int, pausedBefore time.Time) ([]string, error) {
	var ids []string
	if err := db.sel(ctx, db.reader(), &ids, db.q(`SELECT b.id FROM batches b
		WHERE b.status = 'pending' AND b.status <> 'done' AND b.created_at <= ?
		AND NOT EXISTS (SELECT 1 FROM batch_escalations e WHERE e.batch_id = b.id AND e.step = ?)
		ORDER BY b.created_at, b.id`), db.ts(pausedBefore), step); err != nil {
		return nil, fmt.Errorf("due escalations of step %d: %w", step, err)
	}
	return ids, nil
}

// MarkEscalated records that step fired for a pending batch and audits it
// (escalated, actor airlock, detail {"step":N}, N = step+1), in one transaction; false
// when the step had fired already or the batch is not pending (or does not
// exist). The batch row is locked while pending first (as Decide does), so
// a step never fires on a batch whose decision committed before it, and of
// replicas racing on one step exactly one wins.
func (db *DB) MarkEscalated(ctx context.Context, batchID string, step int) (bool, error) {
	if step < 0 {
		return false, fmt.Errorf("mark escalated: negative step %d", step)
	}
	won, err := db.transition(ctx, func(tx *txn) error {
		now := tx.now
		convID, ok, err := db.lockPendingBatch(ctx, tx, batchID)
		if err != nil {
			return err
		}
		if !ok {
			return errLost
		}
		n, err := db.execCount(ctx, tx, db.q(`INSERT INTO batch_escalations (batch_id, step, fired_at) VALUES (?, ?, ?)
			ON CONFLICT (batch_id, step) DO NOTHING`), batchID, step, db.ts(now))
		if err != nil {
			return fmt.Errorf("insert escalation: %w", err)
		}
		if n == 0 {
			return errLost
		}
		return db.insertAudit(ctx, tx, confirm.AuditEvent{
			At: now, Kind: confirm.AuditEscalated, ConversationID: convID, BatchID: batchID, Actor: auditSystemActor,
			Detail: jsonDetail(struct {
				Step int `json:"step"` // 1-based, as people count steps
			}{step + 1}),
		})
	})
	if err != nil {
		return false, fmt.Errorf("mark escalated %s step %d: %w", batchID, step, err)
	}
	return won, nil
}

// ExtendBatch pushes a pending batch's deadline to until, once per batch:
// one conditional UPDATE (pending, never extended, not expired at now (the
// store's clock), and
// until later than the deadline) records by and now, and clears the
// reminder mark so a reminder can fire before the new deadline; in the
// same transaction the batch's pending calls expiring before until are
// pushed to it (calls that never expire stay so), and the extend is
// audited (extended, detail until and before). False when it did not
// apply.
func (db *DB) ExtendBatch(ctx context.Context, batchID, by string, until time.Time) (bool, error) {
	if by == "" {
		return false, errors.New("extend batch: empty actor")
	}
	if until.IsZero() {
		return false, errors.New("extend batch: zero deadline")
	}
	until = utc(until)
	won, err := db.transition(ctx, func(tx *txn) error {
		now := tx.now
		var cur struct {
			ConversationID int64  `db:"conversation_id"`
			ExpiresAt      dbTime `db:"expires_at"`
		}
		err := db.get(ctx, tx, &cur, db.q(`SELECT conversation_id, expires_at FROM batches WHERE id = ?`), batchID)
		if err := lostIfNoRows(err, "load batch"); err != nil {
			return err
		}
		if cur.ExpiresAt.t.IsZero() {
			return errLost // never expires: nothing to push
		}
		// expires_at = the deadline read: when another replica extended in
		// between, this one loses rather than audit the wrong "before".
		n, err := db.execCount(ctx, tx, db.q(`UPDATE batches SET expires_at = ?, extended_by = ?, extended_at = ?, reminded_at = NULL, updated_at = ?
			WHERE id = ? AND status = 'pending' AND extended_by = '' AND expires_at = ? AND expires_at > ? AND expires_at < ?`),
			db.ts(until), by, db.ts(now), db.ts(now), batchID, db.ts(cur.ExpiresAt.t), db.ts(now), db.ts(until))
		if err != nil {
			return fmt.Errorf("update batch: %w", err)
		}
		if n == 0 {
			return errLost
		}
		if _, err := db.exec(ctx, tx, db.q(`UPDATE calls SET expires_at = ?
			WHERE batch_id = ? AND decision = 'pending' AND expires_at IS NOT NULL AND expires_at < ?`),
			db.ts(until), batchID, db.ts(until)); err != nil {
			return fmt.Errorf("update calls: %w", err)
		}
		return db.insertAudit(ctx, tx, confirm.AuditEvent{
			At: now, Kind: confirm.AuditExtended, ConversationID: cur.ConversationID, BatchID: batchID, Actor: by,
			Detail: jsonDetail(struct {
				Until  string `json:"until"`
				Before string `json:"before"`
			}{until.Format(time.RFC3339Nano), cur.ExpiresAt.t.Format(time.RFC3339Nano)}),
		})
	})
	if err != nil {
		return false, fmt.Errorf("extend batch %s: %w", batchID, err)
	}
	return won, nil
}
