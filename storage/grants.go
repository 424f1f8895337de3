package storage

import (
	"context"
	"fmt"
	"time"

	"github.com/airlockhq/airlock/confirm"
	"github.com/airlockhq/airlock/internal/ids"
)

// insertGrant stores g, created by the allow d that decided the call
// (batch d.BatchID, key d.Key, of tool in conversation convID), and audits
// grant_created. It fills in g: ID (random when empty), ConversationID,
// Tool (the call's when empty), CreatedBy (d.By when empty), CreatedAt (the
// transaction's now), BatchID and CallKey; a grant is stored not revoked. Its
// Requester and CreatorRoles are the caller's (the bot sets them).
func (db *DB) insertGrant(ctx context.Context, tx *txn, g *confirm.Grant, convID int64, d confirm.Decide, tool string) error {
	now := tx.now
	if g.ID == "" {
		g.ID = ids.New()
	}
	g.ConversationID = convID
	if g.Tool == "" {
		g.Tool = tool
	}
	if g.CreatedBy == "" {
		g.CreatedBy = d.By
	}
	g.CreatedAt = now
	g.ExpiresAt = utc(g.ExpiresAt)
	g.RevokedBy, g.RevokedAt = "", nil
	g.BatchID, g.CallKey = d.BatchID, d.Key
	roles, err := marshalList(g.CreatorRoles)
	if err != nil {
		return fmt.Errorf("insert grant: roles: %w", err)
	}
	_, err = db.exec(ctx, tx, db.q(`INSERT INTO grants (`+grantColumns+`) VALUES (?, ?, ?, ?, ?, ?, '', NULL, ?, ?, ?, ?, ?, ?)`),
		g.ID, g.ConversationID, g.Tool, g.CreatedBy, db.ts(g.CreatedAt), db.ts(g.ExpiresAt), g.BatchID, g.CallKey, g.NoticeRef,
		g.Requester, roles, g.ToolDef)
	if err != nil {
		return fmt.Errorf("insert grant: %w", err)
	}
	return db.insertAudit(ctx, tx, confirm.AuditEvent{
		At: now, Kind: confirm.AuditGrantCreated, ConversationID: convID, BatchID: d.BatchID, CallKey: d.Key,
		Tool: g.Tool, Actor: g.CreatedBy,
		Detail: jsonDetail(struct {
			GrantID   string    `json:"grant_id"`
			Tool      string    `json:"tool"`
			ExpiresAt time.Time `json:"expires_at"`
			Requester string    `json:"requester"`
		}{g.ID, g.Tool, g.ExpiresAt, g.Requester}),
	})
}

// ActiveGrants lists the conversation's grants for the tool that are
// active at the store's clock: not revoked and expiring after it, newest
// first.
func (db *DB) ActiveGrants(ctx context.Context, conversationID int64, tool string) ([]confirm.Grant, error) {
	var rows []grantRow
	err := db.sel(ctx, db.reader(), &rows, db.q(`SELECT `+grantColumns+` FROM grants
		WHERE conversation_id = ? AND tool = ? AND revoked_at IS NULL AND expires_at > ?
		ORDER BY created_at DESC, id DESC`), conversationID, tool, db.ts(db.stamp()))
	if err != nil {
		return nil, fmt.Errorf("active grants: %w", err)
	}
	out := make([]confirm.Grant, len(rows))
	for i, r := range rows {
		out[i] = r.grant()
	}
	return out, nil
}

// checkGrantsActive checks, in the transaction that stores a batch, that
// the grant of each call a grant allowed is still active at now:
// ErrGrantInactive when one was revoked or expired since it was looked up.
// On PostgreSQL the grant row is share-locked, so a revocation racing the
// batch waits for it and comes after it.
func (db *DB) checkGrantsActive(ctx context.Context, tx *txn, calls []confirm.Call) error {
	now := tx.now
	query := `SELECT COUNT(*) FROM grants WHERE id = ? AND revoked_at IS NULL AND expires_at > ?`
	if db.driver == DriverPostgres {
		query = `SELECT COUNT(*) FROM (SELECT 1 FROM grants WHERE id = ? AND revoked_at IS NULL AND expires_at > ? FOR SHARE) g`
	}
	checked := map[string]bool{}
	for _, c := range calls {
		if c.Decision != confirm.DecisionAllowedByGrant || checked[c.GrantID] {
			continue
		}
		var n int
		if err := db.get(ctx, tx, &n, db.q(query), c.GrantID, db.ts(now)); err != nil {
			return fmt.Errorf("check grant %s: %w", c.GrantID, err)
		}
		if n == 0 {
			return fmt.Errorf("call %q, grant %s: %w", c.Key, c.GrantID, confirm.ErrGrantInactive)
		}
		checked[c.GrantID] = true
	}
	return nil
}

// Grant loads one grant; ErrNotFound when none.
func (db *DB) Grant(ctx context.Context, id string) (*confirm.Grant, error) {
	var r grantRow
	if err := db.get(ctx, db.reader(), &r, db.q(`SELECT `+grantColumns+` FROM grants WHERE id = ?`), id); err != nil {
		return nil, fmt.Errorf("load grant %s: %w", id, notFound(err))
	}
	g := r.grant()
	return &g, nil
}

// Grants lists the grants the filter selects, newest first.
func (db *DB) Grants(ctx context.Context, f confirm.GrantFilter) ([]confirm.Grant, error) {
	var c conditions
	c.add(f.ConversationID != 0, "conversation_id = ?", f.ConversationID)
	c.add(!f.ActiveAt.IsZero(), "revoked_at IS NULL AND expires_at > ?", db.ts(f.ActiveAt))
	query := `SELECT ` + grantColumns + ` FROM grants` + c.sql() + ` ORDER BY created_at DESC, id DESC`
	var rows []grantRow
	if err := db.sel(ctx, db.reader(), &rows, db.q(query), c.args...); err != nil {
		return nil, fmt.Errorf("load grants: %w", err)
	}
	out := make([]confirm.Grant, len(rows))
	for i, r := range rows {
		out[i] = r.grant()
	}
	return out, nil
}

// RevokeGrant revokes a grant not yet revoked, by one conditional UPDATE,
// and audits grant_revoked, in one transaction; false when the grant was
// already revoked or does not exist. It is stamped with the store's clock.
func (db *DB) RevokeGrant(ctx context.Context, id, by string) (bool, error) {
	won, err := db.transition(ctx, func(tx *txn) error {
		now := tx.now
		var g grantRow
		err := db.get(ctx, tx, &g, db.q(`UPDATE grants SET revoked_by = ?, revoked_at = ? WHERE id = ? AND revoked_at IS NULL
			RETURNING `+grantColumns), by, db.ts(now), id)
		if err := lostIfNoRows(err, "update grant"); err != nil {
			return err
		}
		return db.insertAudit(ctx, tx, confirm.AuditEvent{
			At: now, Kind: confirm.AuditGrantRevoked, ConversationID: g.ConversationID, BatchID: g.BatchID, CallKey: g.CallKey,
			Tool: g.Tool, Actor: by,
			Detail: jsonDetail(struct {
				GrantID string `json:"grant_id"`
			}{g.ID}),
		})
	})
	if err != nil {
		return false, fmt.Errorf("revoke grant %s: %w", id, err)
	}
	return won, nil
}

// SetGrantNoticeRef records the platform's reference of the grant's notice;
// ErrNotFound when the grant does not exist.
func (db *DB) SetGrantNoticeRef(ctx context.Context, id, ref string) error {
	return db.updateRow(ctx, "set grant notice ref", "grant "+id, `UPDATE grants SET notice_ref = ? WHERE id = ?`, ref, id)
}
