package storage

import (
	"context"
	"fmt"

	"github.com/airlockhq/airlock/confirm"
)

// FinishPreview implements confirm.PreviewStore: one conditional UPDATE,
// only while the call's preview is running. A pending call's revision goes
// up with it, so a click on a card rendered before the preview showed is
// stale (see confirm.RefAt).
func (db *DB) FinishPreview(ctx context.Context, batchID, key string, state confirm.PreviewState, output, hash string, size int64) (bool, error) {
	switch {
	case state != confirm.PreviewDone && state != confirm.PreviewFailed:
		return false, fmt.Errorf("finish preview: invalid state %q", state)
	case state == confirm.PreviewDone && size < int64(len(output)):
		return false, fmt.Errorf("finish preview: size %d is less than the %d bytes kept", size, len(output))
	case state == confirm.PreviewDone && size == int64(len(output)) && hash != confirm.PreviewHash(output):
		return false, fmt.Errorf("finish preview: the hash is not the output's")
	case state == confirm.PreviewDone && len(hash) != 64:
		return false, fmt.Errorf("finish preview: the hash is no hex sha256")
	case state == confirm.PreviewFailed:
		hash, size = "", 0
	}
	var n int64
	err := db.tx(ctx, func(tx *txn) error {
		var err error
		n, err = db.execCount(ctx, tx, db.q(`UPDATE calls SET preview_state = ?, preview_output = ?, preview_hash = ?, preview_size = ?,
				revision = revision + CASE WHEN decision = 'pending' THEN 1 ELSE 0 END
			WHERE batch_id = ? AND key = ? AND preview_state = 'running'`),
			string(state), output, hash, size, batchID, key)
		return err
	})
	if err != nil {
		return false, fmt.Errorf("finish preview %s/%s: %w", batchID, key, err)
	}
	return n == 1, nil
}

// RecordRecheck implements confirm.PreviewStore.
func (db *DB) RecordRecheck(ctx context.Context, batchID, key string, state confirm.RecheckState, hash string) error {
	switch state {
	case confirm.RecheckMatched, confirm.RecheckChanged, confirm.RecheckFailed:
	default:
		return fmt.Errorf("record recheck: invalid state %q", state)
	}
	err := db.tx(ctx, func(tx *txn) error {
		n, err := db.execCount(ctx, tx, db.q(`UPDATE calls SET recheck_state = ?, recheck_hash = ? WHERE batch_id = ? AND key = ?`),
			string(state), hash, batchID, key)
		if err == nil && n == 0 {
			err = confirm.ErrNotFound
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("record recheck %s/%s: %w", batchID, key, err)
	}
	return nil
}

// RunningPreviews implements confirm.PreviewStore.
func (db *DB) RunningPreviews(ctx context.Context) ([]confirm.CallKey, error) {
	var rows []struct {
		BatchID string `db:"batch_id"`
		Key     string `db:"key"`
	}
	if err := db.sel(ctx, db.reader(), &rows, db.q(`SELECT batch_id, key FROM calls
		WHERE preview_state = 'running' AND decision = 'pending' ORDER BY batch_id, position`)); err != nil {
		return nil, fmt.Errorf("list running previews: %w", err)
	}
	out := make([]confirm.CallKey, len(rows))
	for i, r := range rows {
		out[i] = confirm.CallKey{BatchID: r.BatchID, Key: r.Key}
	}
	return out, nil
}
