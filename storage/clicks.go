package storage

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/airlockhq/airlock/confirm"
)

// RejectedClickWindow is how long one audit row of a rejected click stands
// for the same person's same rejection on the same batch.
const RejectedClickWindow = time.Minute

// AuditRejectedClick records a rejected click coalesced: the first of its
// (actor, batch, reason) in its minute window (e.At truncated to
// RejectedClickWindow) writes a rejected_click audit row (and its webhook
// deliveries) and returns true; the later ones of that window are counted
// and return false. The audit row carries, as "suppressed" in its detail,
// how many rejections of its key were counted and not written since the
// key's previous row. A count not yet carried stays in rejected_clicks.
// Replicas sharing a database coalesce too: one INSERT wins a window.
func (db *DB) AuditRejectedClick(ctx context.Context, e confirm.AuditEvent, reason string) (bool, error) {
	e.Kind = confirm.AuditRejectedClick
	key := []any{e.Actor, e.BatchID, reason}
	var written bool
	err := db.tx(ctx, func(tx *txn) error {
		e := e
		e.At = tx.nowOr(e.At)
		window := db.ts(e.At.Truncate(RejectedClickWindow))
		written = false
		// A window's row deleted by a later window's first click between
		// this click's INSERT and UPDATE (another replica) is inserted
		// again: at most one more audit row, never a lost count.
		for range 3 {
			n, err := db.execCount(ctx, tx, db.q(`INSERT INTO rejected_clicks (actor, batch_id, reason, window_start, suppressed)
				VALUES (?, ?, ?, ?, 0) ON CONFLICT DO NOTHING`), append(key, window)...)
			if err != nil {
				return fmt.Errorf("insert window: %w", err)
			}
			if n == 1 {
				written = true
				break
			}
			n, err = db.execCount(ctx, tx, db.q(`UPDATE rejected_clicks SET suppressed = suppressed + 1
				WHERE actor = ? AND batch_id = ? AND reason = ? AND window_start = ?`), append(key, window)...)
			if err != nil {
				return fmt.Errorf("count in window: %w", err)
			}
			if n == 1 {
				return nil
			}
		}
		if !written {
			return errors.New("window neither inserted nor counted")
		}
		var earlier []int64
		if err := db.sel(ctx, tx, &earlier, db.q(`DELETE FROM rejected_clicks
			WHERE actor = ? AND batch_id = ? AND reason = ? AND window_start < ? RETURNING suppressed`), append(key, window)...); err != nil {
			return fmt.Errorf("collect earlier windows: %w", err)
		}
		var suppressed int64
		for _, n := range earlier {
			suppressed += n
		}
		if suppressed > 0 {
			d, err := withSuppressed(e.Detail, suppressed)
			if err != nil {
				return err
			}
			e.Detail = d
		}
		return db.insertAudit(ctx, tx, e)
	})
	if err != nil {
		return false, fmt.Errorf("audit rejected click: %w", err)
	}
	return written, nil
}

// withSuppressed adds "suppressed": n to a JSON object detail (an empty
// detail is an empty object).
func withSuppressed(detail string, n int64) (string, error) {
	m := map[string]json.RawMessage{}
	if detail != "" {
		if err := json.Unmarshal([]byte(detail), &m); err != nil {
			return "", fmt.Errorf("rejected click detail: %w", err)
		}
	}
	m["suppressed"] = json.RawMessage(fmt.Sprint(n))
	b, err := json.Marshal(m)
	if err != nil {
		return "", fmt.Errorf("rejected click detail: %w", err)
	}
	return string(b), nil
}
