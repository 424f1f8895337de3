package storage

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/airlockhq/airlock/confirm"
)

// ChangeCard implements confirm.CardSyncStore: one change of the batch's
// card, in one transaction that locks the batch's row first (as
// AddCardMessage does).
func (db *DB) ChangeCard(ctx context.Context, batchID string) error {
	err := db.tx(ctx, func(tx *txn) error {
		if _, err := db.exec(ctx, tx, db.q(`UPDATE batches SET card_version = card_version + 1 WHERE id = ?`), batchID); err != nil {
			return err
		}
		_, err := db.exec(ctx, tx, db.q(`UPDATE cards SET desired = (SELECT card_version FROM batches WHERE batches.id = cards.batch_id),
			changed_at = COALESCE(changed_at, ?) WHERE batch_id = ? AND gone_at IS NULL`), db.ts(tx.now), batchID)
		return err
	})
	if err != nil {
		return fmt.Errorf("change card of %s: %w", batchID, err)
	}
	return nil
}

// ChangeAndClaimCards implements confirm.CardSyncStore.
func (db *DB) ChangeAndClaimCards(ctx context.Context, batchID, holder string, ttl time.Duration, limit int) ([]confirm.CardSync, bool, error) {
	return db.ChangeAndClaim(ctx, confirm.Subject{Kind: confirm.SubjectBatch, ID: batchID}, confirm.CardClaim{Holder: holder, TTL: ttl, Limit: limit})
}

// ChangeAndClaim implements confirm.CardSyncStore.
func (db *DB) ChangeAndClaim(ctx context.Context, s confirm.Subject, c confirm.CardClaim) ([]confirm.CardSync, bool, error) {
	var (
		claimed []confirm.CardSync
		listed  bool
	)
	err := db.tx(ctx, func(tx *txn) (err error) {
		claimed, listed, err = db.changeAndClaim(ctx, tx, s, c)
		return err
	})
	if err != nil {
		return nil, false, fmt.Errorf("change and claim messages of %s %s: %w", s.Kind, s.ID, err)
	}
	return claimed, listed, nil
}

// changeAndClaim is ChangeAndClaim in tx.
func (db *DB) changeAndClaim(ctx context.Context, tx *txn, s confirm.Subject, c confirm.CardClaim) ([]confirm.CardSync, bool, error) {
	table, column, err := subjectOf(s)
	if err != nil {
		return nil, false, fmt.Errorf("change and claim: %w", err)
	}
	limit := c.Limit
	if limit <= 0 {
		limit = 100
	}
	if c.Holder == "" || c.TTL <= 0 {
		return nil, false, errors.New("change and claim cards: a holder and a positive ttl are needed")
	}
	now := db.ts(tx.now)
	var version int64
	err = db.updateReturning(ctx, tx, &version, `UPDATE `+table+` SET card_version = card_version + 1 WHERE id = ?`, []any{s.ID},
		`card_version`, db.q(`SELECT card_version FROM `+table+` WHERE id = ?`), s.ID)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	// Every message not gone wants the new version; those no live claim
	// holds and no wait keeps are claimed, lowest id first.
	if _, err := db.exec(ctx, tx, db.q(`UPDATE cards SET desired = ?, changed_at = COALESCE(changed_at, ?) WHERE `+column+` = ? AND gone_at IS NULL`),
		version, now, s.ID); err != nil {
		return nil, false, err
	}
	var ids []int64
	if err := db.sel(ctx, tx, &ids, db.q(`SELECT id FROM cards WHERE `+column+` = ? AND gone_at IS NULL AND rendered < desired
		AND (retry_at IS NULL OR retry_at <= ?) AND (claimed_until IS NULL OR claimed_until <= ?) ORDER BY id LIMIT ?`), s.ID, now, now, limit); err != nil {
		return nil, false, err
	}
	var claimed []confirm.CardSync
	for _, id := range ids {
		if _, err := db.exec(ctx, tx, db.q(`UPDATE cards SET claimed_by = ?, claimed_until = ? WHERE id = ?`), c.Holder, db.ts(tx.now.Add(c.TTL)), id); err != nil {
			return nil, false, err
		}
		var r cardSyncRow
		if err := db.get(ctx, tx, &r, db.q(`SELECT id, `+cardColumns+`, desired, changed_at, failures FROM cards WHERE id = ?`), id); err != nil {
			return nil, false, err
		}
		m := r.card()
		m.Version = r.Desired
		claimed = append(claimed, confirm.CardSync{ID: r.ID, Holder: c.Holder, Message: m, Version: r.Desired, ChangedAt: r.ChangedAt.t, Failures: r.Failures})
	}
	if len(claimed) > 0 {
		return claimed, true, nil
	}
	// None claimed: any messages at all (gone ones included)?
	var n int
	if err := db.get(ctx, tx, &n, db.q(`SELECT COUNT(*) FROM cards WHERE `+column+` = ?`), s.ID); err != nil {
		return nil, false, err
	}
	return nil, n > 0, nil
}

// CardVersion implements confirm.CardSyncStore. It reads the writer, so
// a version is never older than a change this process made.
func (db *DB) CardVersion(ctx context.Context, batchID string) (int64, error) {
	return db.SubjectVersion(ctx, confirm.Subject{Kind: confirm.SubjectBatch, ID: batchID})
}

// SubjectVersion implements confirm.CardSyncStore, reading the writer as
// CardVersion does.
func (db *DB) SubjectVersion(ctx context.Context, s confirm.Subject) (int64, error) {
	table, _, err := subjectOf(s)
	if err != nil {
		return 0, fmt.Errorf("card version: %w", err)
	}
	var v int64
	err = db.get(ctx, db.x, &v, db.q(`SELECT card_version FROM `+table+` WHERE id = ?`), s.ID)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("card version of %s %s: %w", s.Kind, s.ID, err)
	}
	return v, nil
}

// BehindCards implements confirm.CardSyncStore, through the cards_behind
// index. It reads a reader: a message listed that is no longer behind is
// refused by its claim, and every change this process made is committed
// before its caller returns, so none is missed.
func (db *DB) BehindCards(ctx context.Context, platform, batchID string, limit int) ([]int64, error) {
	if limit <= 0 {
		limit = 100
	}
	now := db.ts(db.now())
	var ids []int64
	if err := db.sel(ctx, db.reader(), &ids, db.q(`SELECT id FROM cards
		WHERE rendered < desired AND gone_at IS NULL AND (? = '' OR platform = ?) AND (? = '' OR batch_id = ?)
		AND (retry_at IS NULL OR retry_at <= ?) AND (claimed_until IS NULL OR claimed_until <= ?)
		ORDER BY changed_at, id LIMIT ?`), platform, platform, batchID, batchID, now, now, limit); err != nil {
		return nil, fmt.Errorf("cards behind: %w", err)
	}
	return ids, nil
}

type cardSyncRow struct {
	cardRow
	ID        int64  `db:"id"`
	Desired   int64  `db:"desired"`
	ChangedAt dbTime `db:"changed_at"`
	Failures  int    `db:"failures"`
}

// ClaimCard implements confirm.CardSyncStore.
func (db *DB) ClaimCard(ctx context.Context, id int64, holder string, ttl time.Duration) (confirm.CardSync, bool, error) {
	if holder == "" || ttl <= 0 {
		return confirm.CardSync{}, false, errors.New("claim card: a holder and a positive ttl are needed")
	}
	now := db.now()
	n, err := db.execCount(ctx, db.x, db.q(`UPDATE cards SET claimed_by = ?, claimed_until = ?
		WHERE id = ? AND rendered < desired AND gone_at IS NULL AND (retry_at IS NULL OR retry_at <= ?)
		AND (claimed_until IS NULL OR claimed_until <= ? OR claimed_by = ?)`),
		holder, db.ts(now.Add(ttl)), id, db.ts(now), db.ts(now), holder)
	if err != nil {
		return confirm.CardSync{}, false, fmt.Errorf("claim card %d: %w", id, err)
	}
	if n != 1 {
		return confirm.CardSync{}, false, nil
	}
	var r cardSyncRow
	if err := db.get(ctx, db.x, &r, db.q(`SELECT id, `+cardColumns+`, desired, changed_at, failures FROM cards WHERE id = ?`), id); err != nil {
		return confirm.CardSync{}, false, fmt.Errorf("claim card %d: %w", id, err)
	}
	m := r.card()
	m.Version = r.Desired
	return confirm.CardSync{ID: r.ID, Holder: holder, Message: m, Version: r.Desired, ChangedAt: r.ChangedAt.t, Failures: r.Failures}, true, nil
}

// CardRendered implements confirm.CardSyncStore.
func (db *DB) CardRendered(ctx context.Context, id int64, holder string, version int64) (bool, error) {
	n, err := db.execCount(ctx, db.x, db.q(`UPDATE cards SET
		rendered = CASE WHEN rendered > ? THEN rendered ELSE ? END,
		changed_at = CASE WHEN desired <= ? THEN NULL ELSE changed_at END,
		rendered_at = ?, failures = 0, retry_at = NULL, claimed_by = '', claimed_until = NULL
		WHERE id = ? AND claimed_by = ?`), version, version, version, db.ts(db.stamp()), id, holder)
	if err != nil {
		return false, fmt.Errorf("card %d rendered: %w", id, err)
	}
	return n == 1, nil
}

// CardRetry implements confirm.CardSyncStore.
func (db *DB) CardRetry(ctx context.Context, id int64, holder string, after time.Duration, failed bool) error {
	inc := 0
	if failed {
		inc = 1
	}
	if _, err := db.exec(ctx, db.x, db.q(`UPDATE cards SET retry_at = ?, failures = failures + ?, claimed_by = '', claimed_until = NULL
		WHERE id = ? AND claimed_by = ?`), db.ts(db.now().Add(after)), inc, id, holder); err != nil {
		return fmt.Errorf("card %d retry: %w", id, err)
	}
	return nil
}

// CardGone implements confirm.CardSyncStore.
func (db *DB) CardGone(ctx context.Context, id int64, holder string) error {
	if _, err := db.exec(ctx, db.x, db.q(`UPDATE cards SET gone_at = ?, claimed_by = '', claimed_until = NULL
		WHERE id = ? AND claimed_by = ?`), db.ts(db.now()), id, holder); err != nil {
		return fmt.Errorf("card %d gone: %w", id, err)
	}
	return nil
}

// CardsBehind implements confirm.CardSyncStore.
func (db *DB) CardsBehind(ctx context.Context) (int, error) {
	var n int
	if err := db.get(ctx, db.reader(), &n, `SELECT COUNT(*) FROM cards WHERE rendered < desired AND gone_at IS NULL`); err != nil {
		return 0, fmt.Errorf("cards behind: %w", err)
	}
	return n, nil
}
