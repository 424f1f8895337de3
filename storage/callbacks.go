package storage

import (
	"context"
	"fmt"

	"github.com/airlockhq/airlock/confirm"
	"github.com/airlockhq/airlock/internal/ids"
	"github.com/airlockhq/airlock/redact"
)

var _ confirm.CallbackStore = (*DB)(nil)

// CallbackEvent is the type of a callback's outbox row.
const CallbackEvent = "approval_decided"

// AddCallback registers a callback of the batch; adding one again is a
// no-op.
func (db *DB) AddCallback(ctx context.Context, c confirm.Callback) error {
	err := db.tx(ctx, func(tx *txn) error {
		_, err := db.exec(ctx, tx, db.q(`INSERT INTO callbacks (batch_id, url, client, conversation_id, created_at)
			VALUES (?, ?, ?, ?, ?) ON CONFLICT (batch_id, url) DO NOTHING`), c.BatchID, c.URL, c.Client, c.ConversationID, db.ts(tx.now))
		return err
	})
	if err != nil {
		return fmt.Errorf("add callback of %s: %w", c.BatchID, err)
	}
	return nil
}

// DueCallbacks lists up to limit callbacks of batches no longer pending
// that are not queued yet, oldest first.
func (db *DB) DueCallbacks(ctx context.Context, limit int) ([]confirm.Callback, error) {
	var rows []struct {
		BatchID        string `db:"batch_id"`
		URL            string `db:"url"`
		Client         string `db:"client"`
		ConversationID int64  `db:"conversation_id"`
	}
	if err := db.sel(ctx, db.reader(), &rows, db.q(`SELECT c.batch_id, c.url, c.client, c.conversation_id FROM callbacks c
		JOIN batches b ON b.id = c.batch_id
		WHERE c.queued_at IS NULL AND b.status <> 'pending' ORDER BY c.created_at, c.batch_id, c.url LIMIT ?`), limit); err != nil {
		return nil, fmt.Errorf("due callbacks: %w", err)
	}
	out := make([]confirm.Callback, len(rows))
	for i, r := range rows {
		out[i] = confirm.Callback{BatchID: r.BatchID, URL: r.URL, Client: r.Client, ConversationID: r.ConversationID}
	}
	return out, nil
}

// QueueCallback queues body (scrubbed of secrets, as every event is) for
// the callback in the outbox, to target, and marks it queued, in one
// transaction: false when it was queued already (another replica won).
func (db *DB) QueueCallback(ctx context.Context, c confirm.Callback, target string, body []byte) (bool, error) {
	won := false
	err := db.tx(ctx, func(tx *txn) error {
		n, err := db.execCount(ctx, tx, db.q(`UPDATE callbacks SET queued_at = ? WHERE batch_id = ? AND url = ? AND queued_at IS NULL`),
			db.ts(tx.now), c.BatchID, c.URL)
		if err != nil || n == 0 {
			return err
		}
		won = true
		_, err = db.exec(ctx, tx, db.q(`INSERT INTO outbox (event_id, target, type, conversation_id, audit_id, body, url, status, created_at, next_attempt_at)
			VALUES (?, ?, ?, ?, 0, ?, ?, 'pending', ?, ?)`), ids.New(), target, CallbackEvent, c.ConversationID,
			string(redact.JSON(body, db.scrub)), c.URL, db.ts(tx.now), db.ts(tx.now))
		return err
	})
	if err != nil {
		return false, fmt.Errorf("queue callback of %s: %w", c.BatchID, err)
	}
	return won, nil
}
