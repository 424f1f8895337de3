package storage

import (
	"context"
	"fmt"
	"time"

	"github.com/airlockhq/airlock/confirm"
)

var _ confirm.WebStore = (*DB)(nil)

// StartLogin keeps a sign-in in progress until ttl from now, and drops
// the logins and sessions that expired.
func (db *DB) StartLogin(ctx context.Context, stateHash string, l confirm.WebLogin, ttl time.Duration) error {
	return db.tx(ctx, func(tx *txn) error {
		if err := db.pruneWeb(ctx, tx); err != nil {
			return err
		}
		if _, err := db.exec(ctx, tx, db.q(`INSERT INTO web_logins (state_hash, nonce, verifier, return_to, expires_at) VALUES (?, ?, ?, ?, ?)`),
			stateHash, l.Nonce, l.Verifier, l.ReturnTo, db.ts(tx.now.Add(ttl))); err != nil {
			return fmt.Errorf("start login: %w", err)
		}
		return nil
	})
}

// pruneWeb deletes the expired logins and sessions.
func (db *DB) pruneWeb(ctx context.Context, tx *txn) error {
	for _, table := range []string{"web_logins", "web_sessions"} {
		if _, err := db.exec(ctx, tx, db.q(`DELETE FROM `+table+` WHERE expires_at <= ?`), db.ts(tx.now)); err != nil {
			return fmt.Errorf("prune %s: %w", table, err)
		}
	}
	return nil
}

// TakeLogin returns and deletes the login of stateHash by one
// conditional DELETE (not expired); ErrNotFound when none was taken.
func (db *DB) TakeLogin(ctx context.Context, stateHash string) (confirm.WebLogin, error) {
	var r struct {
		Nonce    string `db:"nonce"`
		Verifier string `db:"verifier"`
		ReturnTo string `db:"return_to"`
	}
	err := db.tx(ctx, func(tx *txn) error {
		return db.takeRow(ctx, tx, &r, "web_logins", "nonce, verifier, return_to", "state_hash = ? AND expires_at > ?", stateHash, db.ts(tx.now))
	})
	if err != nil {
		return confirm.WebLogin{}, fmt.Errorf("take login: %w", err)
	}
	return confirm.WebLogin{Nonce: r.Nonce, Verifier: r.Verifier, ReturnTo: r.ReturnTo}, nil
}

// takeRow reads cols of the one row of table that where selects into
// dest and deletes it: one conditional DELETE (PostgreSQL: with
// RETURNING; SQLite: the SELECT, then the DELETE, in the same write
// transaction), so a row is taken once; confirm.ErrNotFound when none.
func (db *DB) takeRow(ctx context.Context, tx *txn, dest any, table, cols, where string, args ...any) error {
	if db.driver == DriverPostgres {
		return notFound(db.get(ctx, tx, dest, db.q(`DELETE FROM `+table+` WHERE `+where+` RETURNING `+cols), args...))
	}
	if err := db.get(ctx, tx, dest, `SELECT `+cols+` FROM `+table+` WHERE `+where, args...); err != nil {
		return notFound(err)
	}
	n, err := db.execCount(ctx, tx, `DELETE FROM `+table+` WHERE `+where, args...)
	if err == nil && n != 1 {
		err = confirm.ErrNotFound
	}
	return err
}

// CreateWebSession stores a signed-in session until ttl from now.
func (db *DB) CreateWebSession(ctx context.Context, idHash string, s confirm.WebSession, ttl time.Duration) (confirm.WebSession, error) {
	err := db.tx(ctx, func(tx *txn) error {
		s.CreatedAt, s.ExpiresAt = tx.now, tx.now.Add(ttl)
		_, err := db.exec(ctx, tx, db.q(`INSERT INTO web_sessions (id_hash, email, csrf, auth_time, created_at, expires_at) VALUES (?, ?, ?, ?, ?, ?)`),
			idHash, s.Email, s.CSRF, db.ts(s.AuthTime), db.ts(s.CreatedAt), db.ts(s.ExpiresAt))
		return err
	})
	if err != nil {
		return s, fmt.Errorf("create web session: %w", err)
	}
	return s, nil
}

// WebSession is the session of idHash, unexpired at the store's clock;
// ErrNotFound otherwise.
func (db *DB) WebSession(ctx context.Context, idHash string) (confirm.WebSession, error) {
	var r struct {
		Email     string `db:"email"`
		CSRF      string `db:"csrf"`
		AuthTime  dbTime `db:"auth_time"`
		CreatedAt dbTime `db:"created_at"`
		ExpiresAt dbTime `db:"expires_at"`
	}
	if err := db.get(ctx, db.reader(), &r, db.q(`SELECT email, csrf, auth_time, created_at, expires_at FROM web_sessions WHERE id_hash = ? AND expires_at > ?`),
		idHash, db.ts(db.stamp())); err != nil {
		return confirm.WebSession{}, fmt.Errorf("web session: %w", notFound(err))
	}
	return confirm.WebSession{Email: r.Email, CSRF: r.CSRF, AuthTime: r.AuthTime.t, CreatedAt: r.CreatedAt.t, ExpiresAt: r.ExpiresAt.t}, nil
}

// EndWebSession deletes the session of idHash (signing out); none is no
// error.
func (db *DB) EndWebSession(ctx context.Context, idHash string) error {
	if _, err := db.exec(ctx, db.x, db.q(`DELETE FROM web_sessions WHERE id_hash = ?`), idHash); err != nil {
		return fmt.Errorf("end web session: %w", err)
	}
	return nil
}
