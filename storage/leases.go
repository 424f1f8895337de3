package storage

import (
	"context"
	"fmt"
	"time"
)

// AcquireLease takes or renews the lease on key for holder for ttl from
// the store's clock.
// It succeeds when nobody holds the key, the holder is the same, or the
// previous lease has lapsed; one conditional write decides.
func (db *DB) AcquireLease(ctx context.Context, key, holder string, ttl time.Duration) (bool, error) {
	now := db.stamp()
	n, err := db.execCount(ctx, db.x, db.q(`INSERT INTO leases (key, holder, expires_at) VALUES (?, ?, ?)
		ON CONFLICT (key) DO UPDATE SET holder = excluded.holder, expires_at = excluded.expires_at
		WHERE leases.holder = excluded.holder OR leases.expires_at <= ?`),
		key, holder, db.ts(now.Add(ttl)), db.ts(now))
	if err != nil {
		return false, fmt.Errorf("acquire lease: %w", err)
	}
	return n == 1, nil
}

// ReleaseLease gives up holder's lease on key; a lease someone else holds
// is left alone.
func (db *DB) ReleaseLease(ctx context.Context, key, holder string) error {
	if _, err := db.exec(ctx, db.x, db.q(`DELETE FROM leases WHERE key = ? AND holder = ?`), key, holder); err != nil {
		return fmt.Errorf("release lease: %w", err)
	}
	return nil
}

// DueReminders lists pending batches not yet reminded whose expiry is at
// or before due (now + the reminder lead) and still after the store's
// clock.
func (db *DB) DueReminders(ctx context.Context, due time.Time) ([]string, error) {
	now := db.stamp()
	var ids []string
	if err := db.sel(ctx, db.reader(), &ids, db.q(`SELECT id FROM batches
		WHERE status = 'pending' AND status <> 'done' AND reminded_at IS NULL AND expires_at IS NOT NULL AND expires_at <= ? AND expires_at > ?
		ORDER BY expires_at, id`), db.ts(due), db.ts(now)); err != nil {
		return nil, fmt.Errorf("due reminders: %w", err)
	}
	return ids, nil
}

// MarkReminded records that a batch's reminder was posted; true only for
// the first caller.
func (db *DB) MarkReminded(ctx context.Context, batchID string) (bool, error) {
	n, err := db.execCount(ctx, db.x, db.q(`UPDATE batches SET reminded_at = ? WHERE id = ? AND reminded_at IS NULL AND status = 'pending'`),
		db.ts(db.stamp()), batchID)
	if err != nil {
		return false, fmt.Errorf("mark reminded: %w", err)
	}
	return n == 1, nil
}

// ClearLeases drops every lease. SQLite serves one process, so at its start
// no other holder can be alive; leases left by a killed process go at once
// instead of lapsing; so do card messages' claims, the inbox's and the
// answers'.
func (db *DB) ClearLeases(ctx context.Context) error {
	if _, err := db.exec(ctx, db.x, `DELETE FROM leases`); err != nil {
		return fmt.Errorf("clear leases: %w", err)
	}
	// Claims of card messages too (card-sync): they are rendered at once.
	if _, err := db.exec(ctx, db.x, `UPDATE cards SET claimed_by = '', claimed_until = NULL WHERE claimed_by <> ''`); err != nil {
		return fmt.Errorf("clear card claims: %w", err)
	}
	// Deliveries the killed process had not finished: the inbox job
	// takes them at once.
	if _, err := db.exec(ctx, db.x, `UPDATE inbox SET claimed_by = '', claimed_until = NULL WHERE claimed_by <> '' AND done_at IS NULL`); err != nil {
		return fmt.Errorf("clear inbox claims: %w", err)
	}
	// Answers the killed process stored and was posting: the answers
	// job posts them at once.
	if _, err := db.exec(ctx, db.x, `UPDATE answers SET claimed_by = '', claimed_until = NULL WHERE claimed_by <> ''`); err != nil {
		return fmt.Errorf("clear answer claims: %w", err)
	}
	return nil
}
