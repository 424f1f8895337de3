package storage

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/airlockhq/airlock/confirm"
)

// MarkChecked records that by checked a call's unknown outcome at the
// store's clock, by one conditional UPDATE (run_status
// unknown, not checked yet), and audits unknown_checked, in one
// transaction; false, and nothing written, when the run is not unknown,
// was checked already or the call does not exist. Two clicks at once: one
// wins.
func (db *DB) MarkChecked(ctx context.Context, batchID, key, by string) (bool, error) {
	now := db.stamp()
	won := false
	err := db.tx(ctx, func(tx dbtx) error {
		won = false
		var c struct {
			Tool           string `db:"tool"`
			ConversationID int64  `db:"conversation_id"`
		}
		err := db.updateReturning(ctx, tx, &c,
			`UPDATE calls SET checked_by = ?, checked_at = ?
			WHERE batch_id = ? AND key = ? AND run_status = 'unknown' AND checked_at IS NULL`,
			[]any{by, db.ts(now), batchID, key},
			`tool, (SELECT conversation_id FROM batches WHERE id = calls.batch_id) AS conversation_id`,
			`SELECT c.tool, b.conversation_id FROM calls c JOIN batches b ON b.id = c.batch_id WHERE c.batch_id = ? AND c.key = ?`, batchID, key)
		if errors.Is(err, sql.ErrNoRows) {
			return errLost
		}
		if err != nil {
			return fmt.Errorf("update call: %w", err)
		}
		won = true
		return db.insertAudit(ctx, tx, confirm.AuditEvent{
			At: now, Kind: confirm.AuditUnknownChecked, ConversationID: c.ConversationID, BatchID: batchID, CallKey: key,
			Tool: c.Tool, Actor: by,
			Detail: jsonDetail(struct {
				Run string `json:"run_status"`
			}{string(confirm.RunUnknown)}),
		})
	})
	if errors.Is(err, errLost) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("mark checked %s/%s: %w", batchID, key, err)
	}
	return won, nil
}

// SetUnknownNoticeRef records the platform's reference of the thread line
// announcing the call's unknown outcome; ErrNotFound when the call does
// not exist.
func (db *DB) SetUnknownNoticeRef(ctx context.Context, batchID, key, ref string) error {
	n, err := db.execCount(ctx, db.x, db.q(`UPDATE calls SET notice_ref = ? WHERE batch_id = ? AND key = ?`), ref, batchID, key)
	if err != nil {
		return fmt.Errorf("set unknown notice ref: %w", err)
	}
	if n == 0 {
		return fmt.Errorf("set unknown notice ref: call %s/%s: %w", batchID, key, confirm.ErrNotFound)
	}
	return nil
}
