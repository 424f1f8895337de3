package storage

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/airlockhq/airlock/confirm"
)

var _ confirm.InboxStore = (*DB)(nil)

// inboxRow is an inbox row as ClaimInbox returns it.
type inboxRow struct {
	Platform   string `db:"platform"`
	Key        string `db:"key"`
	Kind       string `db:"kind"`
	Payload    string `db:"payload"`
	ReceivedAt dbTime `db:"received_at"`
	Attempts   int    `db:"attempts"`
}

func (r inboxRow) item() confirm.InboxItem {
	return confirm.InboxItem{Platform: r.Platform, Key: r.Key, Kind: r.Kind, Payload: []byte(r.Payload), ReceivedAt: r.ReceivedAt.t, Attempts: r.Attempts}
}

// RecordInbox implements confirm.InboxStore: one INSERT, which writes
// nothing when the platform's key is recorded already.
//
// On SQLite the records that wait for the one writer meanwhile go in one
// INSERT of many rows: each click's acknowledgement waits for its record,
// and a record each, one behind the other, made the clicks of a busy
// moment wait for each other's turns at the writer (BENCHMARKS.md,
// issue 35). The wait for the writer ends with the oldest waiting
// caller's ctx (the others came after it); once the records' turn has
// come they are written whatever ctx says, and the caller waits for that:
// it is never told a record failed that was written.
func (db *DB) RecordInbox(ctx context.Context, it confirm.InboxItem, worker string, ttl time.Duration) (bool, error) {
	switch {
	case it.Platform == "" || it.Key == "" || it.Kind == "":
		return false, errors.New("record inbox: a platform, a key and a kind are needed")
	case worker == "" || ttl <= 0:
		return false, errors.New("record inbox: a worker and a positive ttl are needed")
	}
	if db.driver != DriverSQLite {
		first, err := db.recordInbox(ctx, []*inboxRecord{{it: it, worker: worker, ttl: ttl}})
		if err != nil {
			return false, err
		}
		return first[0], nil
	}
	r := &inboxRecord{it: it, worker: worker, ttl: ttl, ctx: ctx, done: make(chan struct{})}
	db.recording.mu.Lock()
	db.recording.waiting = append(db.recording.waiting, r)
	start := !db.recording.running
	db.recording.running = true
	db.recording.mu.Unlock()
	if start {
		go db.recordLoop()
	}
	<-r.done
	return r.first, r.err
}

// inboxRecord is one RecordInbox waiting for its INSERT.
type inboxRecord struct {
	it     confirm.InboxItem
	worker string
	ttl    time.Duration
	ctx    context.Context // the caller's: ends its wait for the writer
	done   chan struct{}   // closed with first and err set
	first  bool
	err    error
}

// recording is the records waiting for SQLite's writer; running while
// recordLoop writes them.
type recording struct {
	mu      sync.Mutex
	waiting []*inboxRecord
	running bool
}

// maxRecordRows bounds the rows of one INSERT (SQLite binds at most
// 32,766 values; a row has 7).
const maxRecordRows = 200

// recordLoop writes the records waiting, as many as have come at each
// turn, until none waits.
func (db *DB) recordLoop() {
	for {
		db.recording.mu.Lock()
		batch := db.recording.waiting
		if len(batch) > maxRecordRows {
			batch = batch[:maxRecordRows]
		}
		db.recording.waiting = db.recording.waiting[len(batch):]
		if len(batch) == 0 {
			db.recording.waiting, db.recording.running = nil, false
			db.recording.mu.Unlock()
			return
		}
		db.recording.mu.Unlock()
		// The wait for the writer ends with the oldest caller's ctx:
		// the others came later, and are told no sooner than it.
		var live []*inboxRecord
		for _, r := range batch {
			if err := r.ctx.Err(); err != nil {
				r.err = fmt.Errorf("record inbox: %w", err)
				close(r.done)
				continue
			}
			live = append(live, r)
		}
		if len(live) > 0 {
			first, err := db.recordInbox(live[0].ctx, live)
			for i, r := range live {
				if err != nil {
					r.err = err
				} else {
					r.first = first[i]
				}
				close(r.done)
			}
		}
	}
}

// recordInbox writes records in one INSERT and says which were new.
func (db *DB) recordInbox(ctx context.Context, recs []*inboxRecord) ([]bool, error) {
	now := db.stamp()
	var values strings.Builder
	args := make([]any, 0, 7*len(recs))
	for i, r := range recs {
		if i > 0 {
			values.WriteString(", ")
		}
		values.WriteString("(?, ?, ?, ?, ?, ?, ?)")
		args = append(args, r.it.Platform, r.it.Key, r.it.Kind, string(r.it.Payload), db.ts(now), r.worker, db.ts(now.Add(r.ttl)))
	}
	var inserted []struct {
		Platform string `db:"platform"`
		Key      string `db:"key"`
	}
	if err := db.sel(ctx, db.x, &inserted, db.q(`INSERT INTO inbox (platform, key, kind, payload, received_at, claimed_by, claimed_until)
		VALUES `+values.String()+` ON CONFLICT (platform, key) DO NOTHING RETURNING platform, key`), args...); err != nil {
		return nil, fmt.Errorf("record inbox: %w", err)
	}
	isNew := map[[2]string]bool{}
	for _, r := range inserted {
		isNew[[2]string{r.Platform, r.Key}] = true
	}
	first := make([]bool, len(recs))
	for i, r := range recs {
		k := [2]string{r.it.Platform, r.it.Key}
		first[i] = isNew[k]
		delete(isNew, k) // the same key twice in one INSERT: the first is new
	}
	return first, nil
}

// FinishInbox implements confirm.InboxStore.
func (db *DB) FinishInbox(ctx context.Context, platform, key string) error {
	if _, err := db.exec(ctx, db.x, db.q(`UPDATE inbox SET done_at = ?, payload = '', claimed_by = '', claimed_until = NULL
		WHERE platform = ? AND key = ? AND done_at IS NULL`), db.ts(db.stamp()), platform, key); err != nil {
		return fmt.Errorf("finish inbox: %w", err)
	}
	return nil
}

// RenewInbox implements confirm.InboxStore.
func (db *DB) RenewInbox(ctx context.Context, worker string, ttl time.Duration) (int64, error) {
	if worker == "" || ttl <= 0 {
		return 0, errors.New("renew inbox: a worker and a positive ttl are needed")
	}
	n, err := db.execCount(ctx, db.x, db.q(`UPDATE inbox SET claimed_until = ? WHERE claimed_by = ? AND done_at IS NULL`),
		db.ts(db.stamp().Add(ttl)), worker)
	if err != nil {
		return 0, fmt.Errorf("renew inbox: %w", err)
	}
	return n, nil
}

// claimableInbox is the condition of a delivery a worker (bound first)
// may claim at a time (bound second): not finished, not its own (the
// claimer is alive: what it holds it is working on), and its claim
// lapsed or cleared.
const claimableInbox = `done_at IS NULL AND claimed_by <> ? AND (claimed_by = '' OR claimed_until IS NULL OR claimed_until <= ?)`

// ClaimInbox implements confirm.InboxStore: it lists candidates on a
// reader, then claims each with a conditional UPDATE that checks again,
// so of two replicas listing the same delivery one claims it.
func (db *DB) ClaimInbox(ctx context.Context, worker string, platforms []string, ttl time.Duration, limit int) ([]confirm.InboxItem, error) {
	if worker == "" || ttl <= 0 || limit <= 0 {
		return nil, errors.New("claim inbox: a worker, a positive ttl and a positive limit are needed")
	}
	if len(platforms) == 0 {
		return nil, nil
	}
	now := db.stamp()
	in, args := "?", []any{platforms[0]}
	for _, p := range platforms[1:] {
		in += ", ?"
		args = append(args, p)
	}
	var ids []int64
	if err := db.sel(ctx, db.reader(), &ids, db.q(`SELECT id FROM inbox WHERE `+claimableInbox+` AND platform IN (`+in+`)
		ORDER BY id LIMIT ?`), append(append([]any{worker, db.ts(now)}, args...), limit)...); err != nil {
		return nil, fmt.Errorf("claim inbox: list: %w", err)
	}
	claim := db.q(`UPDATE inbox SET claimed_by = ?, claimed_until = ?, attempts = attempts + 1
		WHERE id = ? AND ` + claimableInbox + ` RETURNING platform, key, kind, payload, received_at, attempts`)
	var out []confirm.InboxItem
	for _, id := range ids {
		var r inboxRow
		err := db.get(ctx, db.x, &r, claim, worker, db.ts(now.Add(ttl)), id, worker, db.ts(now))
		if errors.Is(err, sql.ErrNoRows) {
			continue // another replica won it, or it was finished meanwhile
		}
		if err != nil {
			return out, fmt.Errorf("claim inbox %d: %w", id, err)
		}
		out = append(out, r.item())
	}
	return out, nil
}

// ReleaseInbox implements confirm.InboxStore.
func (db *DB) ReleaseInbox(ctx context.Context, platform, key, worker string) error {
	if _, err := db.exec(ctx, db.x, db.q(`UPDATE inbox SET claimed_by = '', claimed_until = NULL,
		attempts = CASE WHEN attempts > 0 THEN attempts - 1 ELSE 0 END
		WHERE platform = ? AND key = ? AND claimed_by = ? AND done_at IS NULL`), platform, key, worker); err != nil {
		return fmt.Errorf("release inbox: %w", err)
	}
	return nil
}

// AppendInboxMessage implements confirm.InboxStore.
func (db *DB) AppendInboxMessage(ctx context.Context, conversationID int64, platform, key string, m confirm.Message) error {
	msgs := []confirm.Message{m}
	err := db.tx(ctx, func(tx *txn) error {
		if err := db.appendMessages(ctx, tx, conversationID, msgs); err != nil {
			return err
		}
		_, err := db.exec(ctx, tx, db.q(`UPDATE inbox SET conversation_id = ?, message_seq = ? WHERE platform = ? AND key = ?`),
			conversationID, msgs[0].Seq, platform, key)
		return err
	})
	if err != nil {
		return fmt.Errorf("append inbox message: %w", err)
	}
	return nil
}

// InboxMessage implements confirm.InboxStore.
func (db *DB) InboxMessage(ctx context.Context, platform, key string) (int64, int, bool, error) {
	var r struct {
		Conv int64 `db:"conversation_id"`
		Seq  int   `db:"message_seq"`
	}
	err := db.get(ctx, db.reader(), &r, db.q(`SELECT conversation_id, message_seq FROM inbox WHERE platform = ? AND key = ?`), platform, key)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, 0, false, nil
	}
	if err != nil {
		return 0, 0, false, fmt.Errorf("inbox message: %w", err)
	}
	return r.Conv, r.Seq, r.Seq > 0, nil
}

// PruneInbox implements confirm.InboxStore.
func (db *DB) PruneInbox(ctx context.Context, before time.Time) (int64, error) {
	n, err := db.execCount(ctx, db.x, db.q(`DELETE FROM inbox WHERE received_at < ?`), db.ts(before))
	if err != nil {
		return 0, fmt.Errorf("prune inbox: %w", err)
	}
	return n, nil
}
