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
	Kind      string `db:"kind"`
	Platform  string `db:"platform"`
	Channel   string `db:"channel"`
	Thread    string `db:"thread"`
	Ref       string `db:"ref"`
	CreatedAt dbTime `db:"created_at"`
}

const cardColumns = `batch_id, kind, platform, channel, thread, ref, created_at`

func (r cardRow) card() confirm.CardMessage {
	return confirm.CardMessage{
		BatchID: r.BatchID, Kind: r.Kind, Platform: r.Platform, Channel: r.Channel, Thread: r.Thread,
		Ref: r.Ref, CreatedAt: r.CreatedAt.t,
	}
}

// AddCardMessage remembers a message posted for a batch (CreatedAt now
// when zero). Recording the same message again is a no-op; a reference
// already recorded for the batch as another kind or place is an error, so
// a pointer can never become a card that takes clicks. ErrNotFound when
// the batch does not exist.
func (db *DB) AddCardMessage(ctx context.Context, m confirm.CardMessage) error {
	switch {
	case m.Kind != confirm.CardMain && m.Kind != confirm.CardDM && m.Kind != confirm.CardPointer:
		return fmt.Errorf("add card message: unknown kind %q (want %s, %s or %s)", m.Kind, confirm.CardMain, confirm.CardDM, confirm.CardPointer)
	case m.BatchID == "":
		return errors.New("add card message: empty batch id")
	case strings.TrimSpace(m.Ref) == "":
		return errors.New("add card message: empty ref")
	case m.Platform == "" || m.Channel == "":
		return fmt.Errorf("add card message: platform %q and channel %q must be set", m.Platform, m.Channel)
	}
	// The batch's row is locked first (a change of the card locks it too),
	// so a message is recorded either before a change, which then raises
	// its desired version, or after it, with the batch's version then.
	var n int64
	err := db.tx(ctx, func(tx dbtx) error {
		if _, err := db.exec(ctx, tx, db.q(`UPDATE batches SET card_version = card_version WHERE id = ?`), m.BatchID); err != nil {
			return err
		}
		stamp := "?"
		if db.driver == DriverPostgres {
			stamp = "CAST(? AS TIMESTAMPTZ)"
		}
		var err error
		n, err = db.execCount(ctx, tx, db.q(`INSERT INTO cards (`+cardColumns+`, desired, rendered, changed_at)
			SELECT id, ?, ?, ?, ?, ?, ?, card_version, CASE WHEN card_version > ? THEN ? ELSE card_version END,
				CASE WHEN card_version > ? THEN `+stamp+` ELSE NULL END
			FROM batches WHERE id = ?
			ON CONFLICT (batch_id, ref) DO NOTHING`),
			m.Kind, m.Platform, m.Channel, m.Thread, m.Ref, db.ts(db.nowOr(m.CreatedAt)), m.Version, m.Version, m.Version, db.ts(db.now()), m.BatchID)
		return err
	})
	if err != nil {
		return fmt.Errorf("add card message: %w", err)
	}
	if n == 1 {
		return nil
	}
	var old cardRow
	err = db.get(ctx, db.x, &old, db.q(`SELECT `+cardColumns+` FROM cards WHERE batch_id = ? AND ref = ?`), m.BatchID, m.Ref)
	if errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("add card message: batch %s: %w", m.BatchID, confirm.ErrNotFound)
	}
	if err != nil {
		return fmt.Errorf("add card message: %w", err)
	}
	if old.Kind != m.Kind || old.Platform != m.Platform || old.Channel != m.Channel || old.Thread != m.Thread {
		return fmt.Errorf("add card message: batch %s: ref %q is already recorded as a %s message in %s/%s",
			m.BatchID, m.Ref, old.Kind, old.Platform, old.Channel)
	}
	return nil
}

// CardMessages lists a batch's messages, oldest first; none (and no
// error) for an unknown batch.
func (db *DB) CardMessages(ctx context.Context, batchID string) ([]confirm.CardMessage, error) {
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
