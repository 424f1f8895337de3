package storage

import (
	"context"
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
	won, err := db.transition(ctx, func(tx *txn) error {
		now := tx.now
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
		if err := lostIfNoRows(err, "update call"); err != nil {
			return err
		}
		return db.insertAudit(ctx, tx, confirm.AuditEvent{
			At: now, Kind: confirm.AuditUnknownChecked, ConversationID: c.ConversationID, BatchID: batchID, CallKey: key,
			Tool: c.Tool, Actor: by,
			Detail: jsonDetail(struct {
				Run string `json:"run_status"`
			}{string(confirm.RunUnknown)}),
		})
	})
	if err != nil {
		return false, fmt.Errorf("mark checked %s/%s: %w", batchID, key, err)
	}
	return won, nil
}

// SetUnknownNoticeRef records the platform's reference of the thread line
// announcing the call's unknown outcome; ErrNotFound when the call does
// not exist.
func (db *DB) SetUnknownNoticeRef(ctx context.Context, batchID, key, ref string) error {
	return db.updateRow(ctx, "set unknown notice ref", "call "+batchID+"/"+key,
		`UPDATE calls SET notice_ref = ? WHERE batch_id = ? AND key = ?`, ref, batchID, key)
}
