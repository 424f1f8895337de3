package storage

import (
	"context"
	"errors"
	"fmt"

	"github.com/airlockhq/airlock/confirm"
)

var _ confirm.HomeStore = (*DB)(nil)

// OpenHome implements confirm.HomeStore: the home's row (its opening
// time updated when it was there) and then its one card-sync message,
// recorded as AddCardMessage records any (at the home's version: in sync
// until the next change).
func (db *DB) OpenHome(ctx context.Context, k confirm.HomeKey) error {
	if k.Platform == "" || k.User == "" {
		return errors.New("open home: platform and user must be set")
	}
	err := db.tx(ctx, func(tx *txn) error {
		_, err := db.exec(ctx, tx, db.q(`INSERT INTO homes (id, platform, user_id, opened_at) VALUES (?, ?, ?, ?)
			ON CONFLICT (id) DO UPDATE SET opened_at = excluded.opened_at`), k.ID(), k.Platform, k.User, db.ts(tx.now))
		return err
	})
	if err != nil {
		return fmt.Errorf("open home %s: %w", k.ID(), err)
	}
	return db.AddCardMessage(ctx, confirm.CardMessage{HomeID: k.ID(), Kind: confirm.CardHome, Platform: k.Platform,
		Channel: confirm.HomeChannel, Ref: k.ID()})
}

// OpenHomes implements confirm.HomeStore.
func (db *DB) OpenHomes(ctx context.Context, platform string) ([]confirm.HomeKey, error) {
	var users []string
	if err := db.sel(ctx, db.reader(), &users, db.q(`SELECT user_id FROM homes WHERE platform = ? ORDER BY user_id`), platform); err != nil {
		return nil, fmt.Errorf("open homes of %s: %w", platform, err)
	}
	out := make([]confirm.HomeKey, len(users))
	for i, u := range users {
		out[i] = confirm.HomeKey{Platform: platform, User: u}
	}
	return out, nil
}
