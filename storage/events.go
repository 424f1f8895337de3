package storage

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// PruneEvents forgets platform event ids seen before the time: platforms
// retry within minutes, so old ids only take space.
func (db *DB) PruneEvents(ctx context.Context, before time.Time) (int64, error) {
	n, err := db.execCount(ctx, db.x, db.q(`DELETE FROM events WHERE seen_at < ?`), db.ts(before))
	if err != nil {
		return 0, fmt.Errorf("prune events: %w", err)
	}
	return n, nil
}

// MarkEvent records a platform event id; it reports true only the first
// time the id is seen, so a retried delivery never starts a second turn.
func (db *DB) MarkEvent(ctx context.Context, platform, eventID string) (bool, error) {
	if eventID == "" {
		return false, errors.New("mark event: empty event id")
	}
	n, err := db.execCount(ctx, db.x, db.q(`INSERT INTO events (platform, event_id, seen_at) VALUES (?, ?, ?)
		ON CONFLICT (platform, event_id) DO NOTHING`), platform, eventID, db.ts(db.stamp()))
	if err != nil {
		return false, fmt.Errorf("mark event: %w", err)
	}
	return n == 1, nil
}
