package storage

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"database/sql"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/airlockhq/airlock/events/webhook"
	"github.com/airlockhq/airlock/internal/ids"
	"github.com/airlockhq/airlock/redact"
)

// Stored checkpoints (audit_checkpoints, migration 015): the audit-checkpoint
// job signs the chain's head every so many rows or so long
// (CheckpointAudit), stores it and sends it as the audit_checkpoint
// webhook event, so a system outside Airlock holds anchors; verify with
// the public key checks each against the chain. Retention writes a start
// checkpoint (Start) before it prunes (PruneAudit).

// CheckpointPolicy is when CheckpointAudit writes a checkpoint: once Rows
// rows were added since the last one, or Interval passed since it and a
// row was added.
type CheckpointPolicy struct {
	Rows     int
	Interval time.Duration
}

type checkpointRow struct {
	ID        int64  `db:"head_id"`
	Hash      string `db:"head_hash"`
	At        dbTime `db:"at"`
	Signature string `db:"signature"`
	PublicKey string `db:"public_key"`
	Start     bool   `db:"start"`
}

func (r checkpointRow) checkpoint() AuditCheckpoint {
	return AuditCheckpoint{ID: r.ID, Hash: r.Hash, At: r.At.t, Signature: r.Signature, PublicKey: r.PublicKey, Start: r.Start}
}

const checkpointColumns = `head_id, head_hash, at, signature, public_key, start`

// AuditCheckpoints are the stored checkpoints in head id order (a start
// checkpoint after the periodic one of the same row).
func (db *DB) AuditCheckpoints(ctx context.Context) ([]AuditCheckpoint, error) {
	return db.auditCheckpointsOn(ctx, db.reader())
}

func (db *DB) auditCheckpointsOn(ctx context.Context, rd sqlx.QueryerContext) ([]AuditCheckpoint, error) {
	var rows []checkpointRow
	if err := db.sel(ctx, rd, &rows, `SELECT `+checkpointColumns+` FROM audit_checkpoints ORDER BY head_id, start`); err != nil {
		return nil, fmt.Errorf("audit checkpoints: %w", err)
	}
	out := make([]AuditCheckpoint, len(rows))
	for i, r := range rows {
		out[i] = r.checkpoint()
	}
	return out, nil
}

// ErrNoSigningKey: checkpoints need audit.signing_key.
var ErrNoSigningKey = errors.New("no audit signing key")

// CheckpointAudit signs and stores a checkpoint of the chain's head when p
// says one is due, and queues its audit_checkpoint event in the same
// transaction. It returns the checkpoint written, or nil when none was due
// or another replica stored one of the same head first (the insert is
// conditional: one checkpoint per head).
func (db *DB) CheckpointAudit(ctx context.Context, key ed25519.PrivateKey, p CheckpointPolicy) (*AuditCheckpoint, error) {
	if len(key) != ed25519.PrivateKeySize {
		return nil, ErrNoSigningKey
	}
	var written *AuditCheckpoint
	mac := NewAuditMAC(key)
	err := db.tx(ctx, func(tx *txn) error {
		written = nil
		var head chainHead
		if err := db.get(ctx, tx, &head, `SELECT last_id AS prev_id, last_hash AS prev_hash, last_mac AS prev_mac FROM audit_head WHERE one = 1`); err != nil {
			return fmt.Errorf("head: %w", err)
		}
		if !head.authentic(mac) {
			// Never sign a head Airlock did not write: record it (its
			// audit_foreign_row row, chained around it) and go on from
			// there.
			var err error
			if head, err = db.repairHead(ctx, tx, mac); err != nil {
				return err
			}
		}
		if head.ID == 0 {
			return nil
		}
		now := tx.now
		last, err := db.lastSignedCheckpoint(ctx, tx, key.Public().(ed25519.PublicKey))
		switch {
		case errors.Is(err, sql.ErrNoRows): // the first: due now
		case err != nil:
			return fmt.Errorf("last checkpoint: %w", err)
		case last.ID >= head.ID:
			return nil // nothing added since
		case now.Sub(last.At.t) < p.Interval:
			var n int
			if err := db.get(ctx, tx, &n, db.q(`SELECT COUNT(*) FROM (SELECT 1 FROM audit WHERE id > ? AND id <= ? LIMIT ?) r`), last.ID, head.ID, p.Rows); err != nil {
				return fmt.Errorf("rows since the last checkpoint: %w", err)
			}
			if n < p.Rows {
				return nil
			}
		}
		c := AuditCheckpoint{ID: head.ID, Hash: head.Hash, At: now}
		c.Sign(key)
		ok, err := db.storeCheckpoint(ctx, tx, c)
		if ok {
			written = &c
		}
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("audit checkpoint: %w", err)
	}
	return written, nil
}

// lastSignedCheckpoint is the newest periodic checkpoint whose signature
// verifies with pub (sql.ErrNoRows: none among the newest): one stored
// by someone else, say at a row the chain has not reached, does not make
// Airlock think it checkpointed (verify names it forged).
func (db *DB) lastSignedCheckpoint(ctx context.Context, tx dbtx, pub ed25519.PublicKey) (checkpointRow, error) {
	var rows []checkpointRow
	if err := db.sel(ctx, tx, &rows, db.q(`SELECT `+checkpointColumns+` FROM audit_checkpoints WHERE start = ? ORDER BY head_id DESC LIMIT 100`), false); err != nil {
		return checkpointRow{}, err
	}
	for _, r := range rows {
		if r.checkpoint().VerifySignature(pub) == nil {
			return r, nil
		}
	}
	return checkpointRow{}, sql.ErrNoRows
}

// storeCheckpoint inserts c unless a checkpoint of its head (and kind) is
// stored already, and then queues its event; it reports whether it did.
func (db *DB) storeCheckpoint(ctx context.Context, tx dbtx, c AuditCheckpoint) (bool, error) {
	res, err := db.exec(ctx, tx, db.q(`INSERT INTO audit_checkpoints (`+checkpointColumns+`) VALUES (?, ?, ?, ?, ?, ?)
		ON CONFLICT (head_id, start) DO NOTHING`), c.ID, c.Hash, db.ts(c.At), c.Signature, c.PublicKey, c.Start)
	if err != nil {
		return false, fmt.Errorf("store checkpoint: %w", err)
	}
	if n, err := res.RowsAffected(); err != nil || n == 0 {
		return false, err
	}
	return true, db.enqueueCheckpoint(ctx, tx, c)
}

// enqueueCheckpoint queues the audit_checkpoint event of c for the
// webhooks that take it (conversation 0; audit_id the head's row).
func (db *DB) enqueueCheckpoint(ctx context.Context, tx dbtx, c AuditCheckpoint) error {
	cp, err := json.Marshal(c)
	if err != nil {
		return fmt.Errorf("encode checkpoint: %w", err)
	}
	ev := webhook.Event{ID: ids.New(), Type: webhook.EventAuditCheckpoint, Time: c.At, Actor: auditSystemActor, Checkpoint: cp}
	body := string(redact.JSON(ev.Encode(), db.scrub))
	insert := db.q(`INSERT INTO outbox (event_id, target, type, conversation_id, audit_id, body, status, created_at, next_attempt_at)
		VALUES (?, ?, ?, 0, ?, ?, 'pending', ?, ?)`)
	for _, t := range db.webhookTargets() {
		if !t.takes(ev.Type) {
			continue
		}
		if _, err := db.exec(ctx, tx, insert, ev.ID, t.ID, string(ev.Type), c.ID, body, db.ts(c.At), db.ts(c.At)); err != nil {
			return fmt.Errorf("insert checkpoint delivery to %s: %w", t.ID, err)
		}
	}
	return nil
}

// prunePage is how many rows one PruneAudit transaction deletes at most.
const prunePage = 10000

// pruneLockKey is the pg_advisory_xact_lock key serialising replicas'
// prunes.
const pruneLockKey int64 = 0x6169726c6f636b01

// PruneAudit deletes the audit rows older than before, oldest first in id
// order, stopping at the first row that is not (the chain's last row is
// always kept). Each transaction of up to prunePage rows first stores a
// signed start checkpoint of the last row it deletes (queuing its
// audit_checkpoint event), so verify begins the chain after it; the
// migration's trigger lets only this DELETE through (audit_prune). It
// returns how many rows it deleted.
func (db *DB) PruneAudit(ctx context.Context, key ed25519.PrivateKey, before time.Time) (int64, error) {
	if len(key) != ed25519.PrivateKeySize {
		return 0, ErrNoSigningKey
	}
	var total int64
	for {
		var n int64
		done := false
		err := db.tx(ctx, func(tx *txn) error {
			n, done = 0, true
			if db.driver == DriverPostgres {
				if _, err := db.exec(ctx, tx, `SELECT pg_advisory_xact_lock($1)`, pruneLockKey); err != nil {
					return fmt.Errorf("lock: %w", err)
				}
			}
			var headID int64
			if err := db.get(ctx, tx, &headID, `SELECT last_id FROM audit_head WHERE one = 1`); err != nil {
				return fmt.Errorf("head: %w", err)
			}
			var rows []struct {
				ID   int64  `db:"id"`
				At   dbTime `db:"at"`
				Hash string `db:"hash"`
			}
			if err := db.sel(ctx, tx, &rows, db.q(`SELECT id, at, hash FROM audit WHERE id < ? ORDER BY id LIMIT ?`), headID, prunePage); err != nil {
				return fmt.Errorf("load: %w", err)
			}
			last := -1
			for i, r := range rows {
				if !r.At.t.Before(before) || r.Hash == "" {
					break
				}
				last = i
			}
			if last < 0 {
				return nil
			}
			done = last < len(rows)-1 || len(rows) < prunePage
			upto := rows[last]
			c := AuditCheckpoint{ID: upto.ID, Hash: upto.Hash, At: tx.now, Start: true}
			c.Sign(key)
			if _, err := db.storeCheckpoint(ctx, tx, c); err != nil {
				return err
			}
			// The guard row last: on SQLite the trigger takes it as the
			// connection's last insert (migration 021).
			guard := db.q(`INSERT INTO audit_prune (txid, upto, upto_hash) VALUES (txid_current(), ?, ?)`)
			args := []any{upto.ID, upto.Hash}
			if db.driver == DriverSQLite {
				guard = `INSERT INTO audit_prune (n, upto, upto_hash) VALUES (?, ?, ?)`
				args = append([]any{pruneGuardID()}, args...)
			}
			if _, err := db.exec(ctx, tx, guard, args...); err != nil {
				return fmt.Errorf("guard: %w", err)
			}
			res, err := db.exec(ctx, tx, db.q(`DELETE FROM audit WHERE id <= ?`), upto.ID)
			if err != nil {
				return fmt.Errorf("delete: %w", err)
			}
			if n, err = res.RowsAffected(); err != nil {
				return err
			}
			if _, err := db.exec(ctx, tx, `DELETE FROM audit_prune`); err != nil {
				return fmt.Errorf("guard: %w", err)
			}
			return nil
		})
		if err != nil {
			return total, fmt.Errorf("prune audit: %w", err)
		}
		total += n
		if done || ctx.Err() != nil {
			return total, ctx.Err()
		}
	}
}

// pruneGuardID is a SQLite prune's bookkeeping row's id: random, so that
// no other table's last insert has it.
func pruneGuardID() int64 {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return int64(binary.BigEndian.Uint64(b[:])>>2) + 1
}
