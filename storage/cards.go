package storage

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/airlockhq/airlock/confirm"
)

type cardRow struct {
	BatchID   string `db:"batch_id"`
	RunID     string `db:"run_id"`
	GrantID   string `db:"grant_id"`
	HomeID    string `db:"home_id"`
	Kind      string `db:"kind"`
	Platform  string `db:"platform"`
	Channel   string `db:"channel"`
	Thread    string `db:"thread"`
	Ref       string `db:"ref"`
	CreatedAt dbTime `db:"created_at"`
}

const cardColumns = `batch_id, run_id, grant_id, home_id, kind, platform, channel, thread, ref, created_at`

func (r cardRow) card() confirm.CardMessage {
	return confirm.CardMessage{
		BatchID: r.BatchID, RunID: r.RunID, GrantID: r.GrantID, HomeID: r.HomeID, Kind: r.Kind, Platform: r.Platform, Channel: r.Channel, Thread: r.Thread,
		Ref: r.Ref, CreatedAt: r.CreatedAt.t,
	}
}

// subjectOf is the table of a card message's subject (a batch, a
// runbook run, a grant) and the column of cards naming it.
func subjectOf(s confirm.Subject) (table, column string, err error) {
	switch s.Kind {
	case confirm.SubjectBatch:
		table, column = "batches", "batch_id"
	case confirm.SubjectRun:
		table, column = "runbook_runs", "run_id"
	case confirm.SubjectGrant:
		table, column = "grants", "grant_id"
	case confirm.SubjectHome:
		table, column = "homes", "home_id"
	default:
		return "", "", fmt.Errorf("unknown subject kind %q", s.Kind)
	}
	if s.ID == "" {
		return "", "", fmt.Errorf("empty %s id", s.Kind)
	}
	return table, column, nil
}

// AddCardMessage remembers a message posted for a batch (a run's message
// for a run, a grant's notice for a grant; CreatedAt now when zero).
// Recording the same message again is a no-op; a reference already
// recorded for the batch as another kind or place is an error, so a
// pointer can never become a card that takes clicks. ErrNotFound when
// the batch (run, grant) does not exist.
func (db *DB) AddCardMessage(ctx context.Context, m confirm.CardMessage) error {
	subject := m.Subject()
	var other string // an id of another subject's kind set
	switch m.Kind {
	case confirm.CardMain, confirm.CardDM, confirm.CardPointer:
		other = m.RunID + m.GrantID + m.HomeID
	case confirm.CardRun:
		other = m.BatchID + m.GrantID + m.HomeID
	case confirm.CardGrant:
		other = m.BatchID + m.RunID + m.HomeID
	case confirm.CardHome:
		other = m.BatchID + m.RunID + m.GrantID
	default:
		return fmt.Errorf("add card message: unknown kind %q (want %s, %s, %s, %s, %s or %s)", m.Kind,
			confirm.CardMain, confirm.CardDM, confirm.CardPointer, confirm.CardRun, confirm.CardGrant, confirm.CardHome)
	}
	table, column, err := subjectOf(subject)
	switch {
	case err != nil:
		return fmt.Errorf("add card message: %w", err)
	case other != "":
		return fmt.Errorf("add card message: a %s message names only its %s", m.Kind, subject.Kind)
	case strings.TrimSpace(m.Ref) == "":
		return errors.New("add card message: empty ref")
	case m.Platform == "" || m.Channel == "":
		return fmt.Errorf("add card message: platform %q and channel %q must be set", m.Platform, m.Channel)
	}
	// The subject's row is locked first (a change of the card locks it
	// too), so a message is recorded either before a change, which then
	// raises its desired version, or after it, with the version then.
	var n int64
	err = db.tx(ctx, func(tx *txn) error {
		if _, err := db.exec(ctx, tx, db.q(`UPDATE `+table+` SET card_version = card_version WHERE id = ?`), subject.ID); err != nil {
			return err
		}
		stamp := "?"
		if db.driver == DriverPostgres {
			stamp = "CAST(? AS TIMESTAMPTZ)"
		}
		var err error
		n, err = db.execCount(ctx, tx, db.q(`INSERT INTO cards (`+column+`, kind, platform, channel, thread, ref, created_at, desired, rendered, changed_at)
			SELECT id, ?, ?, ?, ?, ?, ?, card_version, CASE WHEN card_version > ? THEN ? ELSE card_version END,
				CASE WHEN card_version > ? THEN `+stamp+` ELSE NULL END
			FROM `+table+` WHERE id = ?
			ON CONFLICT (batch_id, run_id, grant_id, ref) DO NOTHING`),
			m.Kind, m.Platform, m.Channel, m.Thread, m.Ref, db.ts(tx.nowOr(m.CreatedAt)), m.Version, m.Version, m.Version, db.ts(tx.now), subject.ID)
		return err
	})
	if err != nil {
		return fmt.Errorf("add card message: %w", err)
	}
	if n == 1 {
		return nil
	}
	var old cardRow
	err = db.get(ctx, db.x, &old, db.q(`SELECT `+cardColumns+` FROM cards WHERE `+column+` = ? AND ref = ?`), subject.ID, m.Ref)
	if errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("add card message: %s %s: %w", subject.Kind, subject.ID, confirm.ErrNotFound)
	}
	if err != nil {
		return fmt.Errorf("add card message: %w", err)
	}
	if old.Kind != m.Kind || old.Platform != m.Platform || old.Channel != m.Channel || old.Thread != m.Thread {
		return fmt.Errorf("add card message: %s %s: ref %q is already recorded as a %s message in %s/%s",
			subject.Kind, subject.ID, m.Ref, old.Kind, old.Platform, old.Channel)
	}
	return nil
}

// CardMessages lists a batch's messages, oldest first; none (and no
// error) for an unknown batch.
func (db *DB) CardMessages(ctx context.Context, batchID string) ([]confirm.CardMessage, error) {
	if batchID == "" {
		return nil, nil
	}
	var rows []cardRow
	if err := db.sel(ctx, db.reader(), &rows, db.q(`SELECT `+cardColumns+` FROM cards WHERE batch_id = ? ORDER BY created_at, id`), batchID); err != nil {
		return nil, fmt.Errorf("card messages of %s: %w", batchID, err)
	}
	out := make([]confirm.CardMessage, len(rows))
	for i, r := range rows {
		out[i] = r.card()
	}
	return out, nil
}
