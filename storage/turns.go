package storage

import (
	"context"
	"fmt"
	"time"
)

// turnLockClass is the first key of the pg_advisory_xact_lock(int, int)
// that serialises CountTurn per user (the second is a hash of the user).
const turnLockClass int32 = 0x7475726e // "turn"

// CountTurn records one turn of user on platform at now (the store's
// clock) and returns how many of the user's turns fall in
// (now-window, now], this one included; the user's rows at or before
// now-window are pruned. Counters of one user queue (a per-user advisory
// lock on PostgreSQL, the write lock on SQLite), so each sees the turns
// committed before it and no two concurrent callers get the same count.
func (db *DB) CountTurn(ctx context.Context, platform, user string, window time.Duration) (int, error) {
	if window <= 0 {
		return 0, fmt.Errorf("count turn: window %v is not positive", window)
	}
	var n int
	err := db.tx(ctx, func(tx *txn) error {
		now := tx.now
		since := now.Add(-window)
		if db.driver == DriverPostgres {
			if _, err := db.exec(ctx, tx, `SELECT pg_advisory_xact_lock($1::integer, hashtext($2::text || chr(31) || $3::text))`,
				turnLockClass, platform, user); err != nil {
				return fmt.Errorf("lock: %w", err)
			}
		}
		if _, err := db.exec(ctx, tx, db.q(`DELETE FROM turn_log WHERE platform = ? AND user_id = ? AND at <= ?`),
			platform, user, db.ts(since)); err != nil {
			return fmt.Errorf("prune: %w", err)
		}
		if _, err := db.exec(ctx, tx, db.q(`INSERT INTO turn_log (platform, user_id, at) VALUES (?, ?, ?)`),
			platform, user, db.ts(now)); err != nil {
			return fmt.Errorf("insert: %w", err)
		}
		return db.get(ctx, tx, &n, db.q(`SELECT COUNT(*) FROM turn_log WHERE platform = ? AND user_id = ? AND at > ? AND at <= ?`),
			platform, user, db.ts(since), db.ts(now))
	})
	if err != nil {
		return 0, fmt.Errorf("count turn: %w", err)
	}
	return n, nil
}
