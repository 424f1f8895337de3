package storage

import (
	"context"
	"fmt"
	"time"

	"github.com/airlockhq/airlock/confirm"
)

var _ confirm.PasskeyStore = (*DB)(nil)

// AddPasskey stores a person's new passkey.
func (db *DB) AddPasskey(ctx context.Context, email, id, credential string) error {
	return db.tx(ctx, func(tx *txn) error {
		if _, err := db.exec(ctx, tx, db.q(`INSERT INTO web_passkeys (id, email, credential, created_at) VALUES (?, ?, ?, ?)`),
			id, email, credential, db.ts(tx.now)); err != nil {
			return fmt.Errorf("add passkey: %w", err)
		}
		return nil
	})
}

// Passkeys lists a person's passkeys, oldest first.
func (db *DB) Passkeys(ctx context.Context, email string) ([]string, error) {
	var out []string
	if err := db.sel(ctx, db.reader(), &out, db.q(`SELECT credential FROM web_passkeys WHERE email = ? ORDER BY created_at, id`), email); err != nil {
		return nil, fmt.Errorf("passkeys: %w", err)
	}
	return out, nil
}

// UpdatePasskey replaces a passkey's stored credential (its signature
// counter after a use); ErrNotFound when there is none.
func (db *DB) UpdatePasskey(ctx context.Context, id, credential string) error {
	return db.updateRow(ctx, "update passkey", "passkey "+id, `UPDATE web_passkeys SET credential = ? WHERE id = ?`, credential, id)
}

// StartCeremony keeps a WebAuthn ceremony in progress until ttl from now.
func (db *DB) StartCeremony(ctx context.Context, idHash, email, kind, data string, ttl time.Duration) error {
	return db.tx(ctx, func(tx *txn) error {
		if _, err := db.exec(ctx, tx, db.q(`DELETE FROM web_ceremonies WHERE expires_at <= ?`), db.ts(tx.now)); err != nil {
			return fmt.Errorf("prune ceremonies: %w", err)
		}
		if _, err := db.exec(ctx, tx, db.q(`INSERT INTO web_ceremonies (id_hash, email, kind, data, expires_at) VALUES (?, ?, ?, ?, ?)`),
			idHash, email, kind, data, db.ts(tx.now.Add(ttl))); err != nil {
			return fmt.Errorf("start ceremony: %w", err)
		}
		return nil
	})
}

// TakeCeremony returns and deletes a live ceremony of the person and
// kind, by one conditional DELETE; ErrNotFound otherwise.
func (db *DB) TakeCeremony(ctx context.Context, idHash, email, kind string) (string, error) {
	var data string
	err := db.tx(ctx, func(tx *txn) error {
		return db.takeRow(ctx, tx, &data, "web_ceremonies", "data", "id_hash = ? AND email = ? AND kind = ? AND expires_at > ?",
			idHash, email, kind, db.ts(tx.now))
	})
	if err != nil {
		return "", fmt.Errorf("take ceremony: %w", err)
	}
	return data, nil
}
