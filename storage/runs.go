package storage

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sort"

	"github.com/airlockhq/airlock/confirm"
)

// updateReturning runs a conditional UPDATE (args its arguments) and,
// when it changed a row, reads dest: on PostgreSQL with the UPDATE's
// RETURNING returning, on SQLite with the SELECT sel (selArgs) after it,
// as SQLite runs RETURNING through a temporary table, dearer than a second
// statement. sql.ErrNoRows when no row changed.
func (db *DB) updateReturning(ctx context.Context, tx dbtx, dest any, update string, args []any, returning, sel string, selArgs ...any) error {
	if db.driver != DriverSQLite {
		return db.get(ctx, tx, dest, db.q(update+` RETURNING `+returning), args...)
	}
	n, err := db.execCount(ctx, tx, update, args...)
	if err != nil {
		return err
	}
	if n == 0 {
		return sql.ErrNoRows
	}
	return db.get(ctx, tx, dest, sel, selArgs...)
}

// resultExcerptLen bounds the result text copied into a tool_result event.
const resultExcerptLen = 2000

// batchTransition runs one conditional UPDATE on a batch and reports whether
// it changed the row; ErrNotFound when the batch does not exist.
func (db *DB) batchTransition(ctx context.Context, query string, batchID string, args ...any) (bool, error) {
	n, err := db.execCount(ctx, db.x, db.q(query), args...)
	if err != nil {
		return false, err
	}
	if n == 1 {
		return true, nil
	}
	if err := db.batchLostOrMissing(ctx, db.reader(), batchID); !errors.Is(err, errLost) {
		return false, err
	}
	return false, nil
}

// claimBatch takes a decided batch (id) to running for a worker.
const claimBatch = `UPDATE batches SET status = 'running', claimed_by = ?, updated_at = ? WHERE id = ? AND status = 'decided'`

// startRun takes an allowed call's run (batch_id, key) from not_started
// to running.
const startRun = `UPDATE calls SET run_status = 'running'
	WHERE batch_id = ? AND key = ? AND run_status = 'not_started' AND decision IN ('allowed', 'allowed_by_policy', 'allowed_by_grant')`

// ClaimBatch takes a batch from decided to running for worker; only one
// caller wins.
func (db *DB) ClaimBatch(ctx context.Context, batchID, worker string) (bool, error) {
	won, err := db.batchTransition(ctx, claimBatch, batchID, worker, db.ts(db.now()), batchID)
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
	n, err := db.execCount(ctx, db.x, db.q(startRun), batchID, key)
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
	err := db.tx(ctx, func(tx *txn) error { return db.finishRun(ctx, tx, batchID, key, status, result) })
	if err != nil {
		return fmt.Errorf("finish run %s/%s: %w", batchID, key, err)
	}
	return nil
}

// finishRun is FinishRun inside a transaction.
func (db *DB) finishRun(ctx context.Context, tx *txn, batchID, key string, status confirm.RunStatus, result string) error {
	now := tx.now
	// The UPDATE returns what the audit event needs.
	var info struct {
		ConversationID int64  `db:"conversation_id"`
		Tool           string `db:"tool"`
	}
	err := db.updateReturning(ctx, tx, &info,
		`UPDATE calls SET run_status = ?, result = ? WHERE batch_id = ? AND key = ? AND run_status = 'running'`,
		[]any{string(status), result, batchID, key},
		`(SELECT conversation_id FROM batches WHERE id = calls.batch_id) AS conversation_id, tool`,
		`SELECT b.conversation_id, c.tool FROM calls c JOIN batches b ON b.id = c.batch_id WHERE c.batch_id = ? AND c.key = ?`, batchID, key)
	if errors.Is(err, sql.ErrNoRows) {
		if err := db.lostOrMissing(ctx, tx, batchID, key); !errors.Is(err, errLost) {
			return err
		}
		return fmt.Errorf("call %s/%s: %w", batchID, key, ErrNotRunning)
	}
	if err != nil {
		return fmt.Errorf("update call: %w", err)
	}
	detail := resultDetail(status, result)
	var pv struct {
		Hash    string `db:"preview_hash"`
		Recheck string `db:"recheck_state"`
		Now     string `db:"recheck_hash"`
	}
	if err := db.get(ctx, tx, &pv, db.q(`SELECT preview_hash, recheck_state, recheck_hash FROM calls WHERE batch_id = ? AND key = ?`), batchID, key); err != nil {
		return fmt.Errorf("load preview: %w", err)
	}
	if pv.Hash != "" || pv.Recheck != "" {
		detail = previewResultDetail(status, result, pv.Hash, pv.Recheck, pv.Now)
	}
	return db.insertAudit(ctx, tx, confirm.AuditEvent{
		At: now, Kind: confirm.AuditToolResult, ConversationID: info.ConversationID, BatchID: batchID,
		CallKey: key, Tool: info.Tool, Actor: auditSystemActor, Detail: detail,
	})
}

// previewResultDetail is resultDetail with the approved preview's hash
// and the recheck's outcome and hash (a call with a preview).
func previewResultDetail(status confirm.RunStatus, result, hash, recheck, recheckHash string) string {
	ex, cut := excerpt(result, resultExcerptLen)
	return jsonDetail(struct {
		Status      string `json:"status"`
		Result      string `json:"result"`
		Truncated   bool   `json:"truncated,omitempty"`
		PreviewHash string `json:"preview_hash,omitempty"`
		Recheck     string `json:"recheck,omitempty"`
		RecheckHash string `json:"recheck_hash,omitempty"`
	}{string(status), ex, cut, hash, recheck, recheckHash})
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
	won, err := db.transition(ctx, func(tx *txn) error { return db.completeBatch(ctx, tx, batchID, results) })
	if err != nil {
		return false, fmt.Errorf("complete batch %s: %w", batchID, err)
	}
	return won, nil
}

// completeBatch is CompleteBatch inside a transaction; errLost when the
// batch was not running.
func (db *DB) completeBatch(ctx context.Context, tx *txn, batchID string, results confirm.Message) error {
	now := tx.now
	var convID int64
	err := db.updateReturning(ctx, tx, &convID,
		`UPDATE batches SET status = 'done', updated_at = ? WHERE id = ? AND status = 'running'`, []any{db.ts(now), batchID},
		`conversation_id`, `SELECT conversation_id FROM batches WHERE id = ?`, batchID)
	if errors.Is(err, sql.ErrNoRows) {
		return db.batchLostOrMissing(ctx, tx, batchID)
	}
	if err != nil {
		return fmt.Errorf("update batch: %w", err)
	}
	if err := db.appendMessages(ctx, tx, convID, []confirm.Message{results}); err != nil {
		return fmt.Errorf("append results: %w", err)
	}
	return nil
}

// RecoverRunning marks the running calls of the given batches as unknown
// (result UnknownOutcomeMessage, a tool_result audit event each): the
// worker running them died. It returns the batch ids it touched.
func (db *DB) RecoverRunning(ctx context.Context, batchIDs ...string) ([]string, error) {
	var ids []string
	err := db.tx(ctx, func(tx *txn) error {
		now := tx.now
		ids = nil
		var calls []changedCall
		for _, id := range batchIDs {
			var some []changedCall
			if err := db.sel(ctx, tx, &some, db.q(`UPDATE calls SET run_status = 'unknown', result = ?
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
				if err := db.get(ctx, tx, &convID, db.q(`SELECT conversation_id FROM batches WHERE id = ?`), c.BatchID); err != nil {
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
