package storage

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/airlockhq/airlock/confirm"
	"github.com/airlockhq/airlock/events/webhook"
)

// retentionTests are audit retention's contract, run by runConformance on
// both databases.
var retentionTests = []conformanceTest{
	{"PruneThenVerify", testPruneThenVerify},
	{"PruneThenHandDelete", testPruneThenHandDelete},
	{"PruneStartMissing", testPruneStartMissing},
	{"PruneStartForged", testPruneStartForged},
	{"PruneKeepsHead", testPruneKeepsHead},
	{"DeleteStillRefused", testDeleteStillRefused},
	{"PruneGuardHandRow", testPruneGuardHandRow},
}

// prunedChain writes 10 rows a day apart from t0 with a checkpoint after
// every three, then at day 9 prunes what is older than 5 days: rows of
// days 0–4. It returns the rows' ids and the key.
func prunedChain(t *testing.T, db *DB) ([]int64, []byte, func() time.Time) {
	t.Helper()
	pub, key := checkpointKey(t)
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	db.setClock(clock)
	var ids []int64
	for i := range 10 {
		if err := db.Audit(t.Context(), confirm.AuditEvent{Kind: confirm.AuditDecision, Actor: "U1", Tool: "deploy"}); err != nil {
			t.Fatal(err)
		}
		id, _, _ := db.AuditHead(t.Context())
		ids = append(ids, id)
		if (i+1)%3 == 0 {
			checkpoint(t, db, key, everyThree)
		}
		now = now.Add(24 * time.Hour)
	}
	now = now.Add(-24 * time.Hour).Add(time.Hour) // day 9, 13:00
	n, err := db.PruneAudit(t.Context(), key, now.Add(-5*24*time.Hour))
	if err != nil || n != 5 {
		t.Fatalf("PruneAudit = %d, %v; want 5 rows", n, err)
	}
	return ids, pub, clock
}

func testPruneThenVerify(t *testing.T, db *DB) {
	setWebhooks(t, db, WebhookTarget{ID: "w", Events: []webhook.EventType{webhook.EventAuditCheckpoint}})
	ids, pub, _ := prunedChain(t, db)
	for _, o := range []VerifyOptions{{}, {PublicKey: pub}} {
		v, err := db.VerifyAuditWith(t.Context(), o)
		if err != nil || v.Rows != 5 || v.Start.ID != ids[4] || !v.Start.Start || v.HeadID != ids[9] {
			t.Fatalf("verify after the prune (key %v): %+v, %v", o.PublicKey != nil, v, err)
		}
		if o.PublicKey != nil && v.Checkpoints != 2 { // rows 5 and 8; row 2's was pruned with it
			t.Fatalf("stored checkpoints checked: %d, want 2", v.Checkpoints)
		}
	}
	// The start checkpoint went out as an event.
	starts := 0
	for _, d := range deliveries(t, db, DeliveryFilter{}) {
		if bytes.Contains(d.Body, []byte(`"start":true`)) {
			starts++
		}
	}
	if starts != 1 {
		t.Fatalf("%d start checkpoints sent, want 1", starts)
	}
	// Pruning again with nothing older does nothing.
	_, key := checkpointKey(t)
	if n, err := db.PruneAudit(t.Context(), key, time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)); err != nil || n != 0 {
		t.Fatalf("second prune: %d, %v", n, err)
	}
	// An export of the pruned audit verifies from its first row.
	path := filepath.Join(t.TempDir(), "a.jsonl")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.ExportAudit(t.Context(), AuditRecordFilter{}, "jsonl", f); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if v, err := VerifyAuditExport(t.Context(), path); err != nil || v.Rows != 5 {
		t.Fatalf("verify the export: %+v, %v", v, err)
	}
}

// After a prune, a row deleted by hand in the middle, or the first rows
// deleted by hand past the start, still break the chain.
func testPruneThenHandDelete(t *testing.T, db *DB) {
	ids, pub, _ := prunedChain(t, db)
	dropAuditTriggers(t, db)
	if _, err := db.x.ExecContext(t.Context(), db.q(`DELETE FROM audit WHERE id = ?`), ids[7]); err != nil {
		t.Fatal(err)
	}
	wantBreak(t, db, ids[7], "deleted")
	wantBreakWith(t, db, VerifyOptions{PublicKey: pub}, ids[7], "deleted")
	if _, err := db.x.ExecContext(t.Context(), db.q(`DELETE FROM audit WHERE id <= ?`), ids[5]); err != nil {
		t.Fatal(err)
	}
	wantBreak(t, db, ids[5], "deleted")
}

// Without its start checkpoint a pruned chain names its first row: rows
// before it were deleted.
func testPruneStartMissing(t *testing.T, db *DB) {
	ids, _, _ := prunedChain(t, db)
	q := `DROP TRIGGER audit_checkpoints_no_delete`
	if db.driver == DriverPostgres {
		q = `DROP TRIGGER audit_checkpoints_append_only ON audit_checkpoints`
	}
	if _, err := db.x.ExecContext(t.Context(), q); err != nil {
		t.Fatal(err)
	}
	if _, err := db.x.ExecContext(t.Context(), db.q(`DELETE FROM audit_checkpoints WHERE start = ?`), true); err != nil {
		t.Fatal(err)
	}
	wantBreak(t, db, ids[4], "deleted")
}

// A start checkpoint forged (signed with another key) to cover rows
// deleted by hand passes only without the key.
func testPruneStartForged(t *testing.T, db *DB) {
	ids, pub, clock := prunedChain(t, db)
	dropAuditTriggers(t, db)
	var last AuditRecord
	if err := db.AuditRecords(t.Context(), 0, AuditRecordFilter{}, func(r AuditRecord) error {
		if r.ID == ids[6] {
			last = r
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := db.x.ExecContext(t.Context(), db.q(`DELETE FROM audit WHERE id <= ?`), ids[6]); err != nil {
		t.Fatal(err)
	}
	_, other := checkpointKey(t)
	c := AuditCheckpoint{ID: last.ID, Hash: last.Hash, At: clock(), Start: true}
	c.Sign(other)
	if err := db.tx(t.Context(), func(tx *txn) error { _, err := db.storeCheckpoint(t.Context(), tx, c); return err }); err != nil {
		t.Fatal(err)
	}
	if v, err := db.VerifyAudit(t.Context()); err != nil || v.Start.ID != ids[6] {
		t.Fatalf("without the key the forged start is taken as stored: %+v, %v", v, err)
	}
	wantBreakWith(t, db, VerifyOptions{PublicKey: pub}, ids[6], "forged")
}

// However old, the chain's last row stays.
func testPruneKeepsHead(t *testing.T, db *DB) {
	_, key := checkpointKey(t)
	ids := chainRows(t, db, 3)
	n, err := db.PruneAudit(t.Context(), key, time.Now().Add(time.Hour))
	if err != nil || n != 2 {
		t.Fatalf("PruneAudit = %d, %v; want 2", n, err)
	}
	v, err := db.VerifyAudit(t.Context())
	if err != nil || v.Rows != 1 || v.HeadID != ids[2] || v.Start.ID != ids[1] {
		t.Fatalf("verify: %+v, %v", v, err)
	}
	if _, err := db.PruneAudit(t.Context(), nil, time.Now()); !errors.Is(err, ErrNoSigningKey) {
		t.Fatalf("no key: %v", err)
	}
}

// The prune path opens nothing else: a DELETE outside it is refused, before
// a prune and after one.
func testDeleteStillRefused(t *testing.T, db *DB) {
	ids := chainRows(t, db, 4)
	del := func() error {
		_, err := db.x.ExecContext(t.Context(), db.q(`DELETE FROM audit WHERE id = ?`), ids[1])
		return err
	}
	if del() == nil {
		t.Fatal("a DELETE outside the prune went through")
	}
	_, key := checkpointKey(t)
	if _, err := db.PruneAudit(t.Context(), key, time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	ids = chainRows(t, db, 3)
	if del() == nil {
		t.Fatal("a DELETE after a prune went through")
	}
	if _, err := db.x.ExecContext(t.Context(), `DELETE FROM audit`); err == nil {
		t.Fatal("a DELETE of every row went through")
	}
	if db.driver == DriverPostgres {
		if _, err := db.x.ExecContext(t.Context(), `TRUNCATE audit`); err == nil {
			t.Fatal("TRUNCATE went through")
		}
	}
}

// handPruneRow puts a row in the prune's bookkeeping table through ex, as
// someone with the database can, whatever columns it has: allowing the
// rows up to upto (with its hash, where the table asks for one).
func handPruneRow(t *testing.T, db *DB, ex dbtx, upto int64, hash string) error {
	t.Helper()
	rows, err := ex.QueryxContext(t.Context(), `SELECT * FROM audit_prune WHERE 1 = 0`)
	if err != nil {
		t.Fatal(err)
	}
	cols, _ := rows.Columns()
	rows.Close()
	switch {
	case slices.Contains(cols, "one"): // migration 016's
		_, err = ex.ExecContext(t.Context(), db.q(`INSERT INTO audit_prune (one, upto) VALUES (1, ?)`), upto)
	case slices.Contains(cols, "txid"):
		_, err = ex.ExecContext(t.Context(), db.q(`INSERT INTO audit_prune (txid, upto, upto_hash) VALUES (txid_current(), ?, ?)`), upto, hash)
	default:
		_, err = ex.ExecContext(t.Context(), db.q(`INSERT INTO audit_prune (n, upto, upto_hash) VALUES (?, ?, ?)`), time.Now().UnixNano(), upto, hash)
	}
	return err
}

// inTx runs fn in a transaction on a connection of its own (not Airlock's
// writer), as another client of the database would, and commits.
func inTx(t *testing.T, db *DB, fn func(tx *sqlx.Tx) error) error {
	t.Helper()
	x := db.x
	if db.driver == DriverSQLite {
		var err error
		if x, err = sqlx.Open("sqlite3", db.sqlitePathForTest(t)); err != nil {
			t.Fatal(err)
		}
		defer x.Close()
	}
	tx, err := x.BeginTxx(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := fn(tx); err != nil {
		tx.Rollback()
		return err
	}
	return tx.Commit()
}

// testPruneGuardHandRow: a row put in the prune's bookkeeping table by hand
// opens the audit's DELETE trigger for nothing: not in its own
// transaction without a start checkpoint of its row, not from another
// transaction at all. Deleting the oldest rows the way a prune does, with
// a start checkpoint nobody could sign, goes through but verify with the
// key names that checkpoint forged.
func testPruneGuardHandRow(t *testing.T, db *DB) {
	ids := chainRows(t, db, 6)
	var rows []AuditRecord
	if err := db.AuditRecords(t.Context(), 0, AuditRecordFilter{}, func(r AuditRecord) error { rows = append(rows, r); return nil }); err != nil {
		t.Fatal(err)
	}
	del := func(tx *sqlx.Tx, q string, args ...any) error {
		_, err := tx.ExecContext(t.Context(), db.q(q), args...)
		return err
	}
	// Its own transaction, a middle row.
	if err := inTx(t, db, func(tx *sqlx.Tx) error {
		if err := handPruneRow(t, db, tx, ids[3], rows[3].Hash); err != nil {
			t.Fatalf("a row in audit_prune by hand: %v", err)
		}
		return del(tx, `DELETE FROM audit WHERE id = ?`, ids[1])
	}); err == nil {
		t.Fatal("a row put in audit_prune by hand let a DELETE of a middle row through")
	}
	// A hand row and a start checkpoint of its row, committed: a DELETE
	// in another transaction is refused.
	_, other := checkpointKey(t)
	forged := AuditCheckpoint{ID: ids[3], Hash: rows[3].Hash, At: time.Now(), Start: true}
	forged.Sign(other)
	if err := inTx(t, db, func(tx *sqlx.Tx) error {
		if err := handPruneRow(t, db, tx, ids[3], rows[3].Hash); err != nil {
			return err
		}
		_, err := db.storeCheckpoint(t.Context(), tx, forged)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if err := inTx(t, db, func(tx *sqlx.Tx) error { return del(tx, `DELETE FROM audit WHERE id <= ?`, ids[3]) }); err == nil {
		t.Fatal("a committed hand row opened a DELETE in another transaction")
	}
	if v, err := db.VerifyAudit(t.Context()); err != nil || v.Rows != 6 {
		t.Fatalf("after refused deletes: %+v, %v", v, err)
	}
	// Done as a prune is, in one transaction, the oldest rows go; verify
	// with the key names the start checkpoint forged.
	if err := inTx(t, db, func(tx *sqlx.Tx) error {
		if err := handPruneRow(t, db, tx, ids[3], rows[3].Hash); err != nil {
			return err
		}
		return del(tx, `DELETE FROM audit WHERE id <= ?`, ids[3])
	}); err != nil {
		t.Fatalf("a prune done by hand: %v", err)
	}
	pub := other.Public().(ed25519.PublicKey)
	if _, err := db.VerifyAuditWith(t.Context(), VerifyOptions{PublicKey: pub}); err != nil {
		t.Fatalf("with the forger's own key the prune passes: %v", err)
	}
	realPub, _ := checkpointKey(t)
	wantBreakWith(t, db, VerifyOptions{PublicKey: realPub}, ids[3], "forged")
}

// sqlitePathForTest is the file of db's main database.
func (db *DB) sqlitePathForTest(t *testing.T) string {
	t.Helper()
	var path string
	if err := db.x.GetContext(t.Context(), &path, `SELECT file FROM pragma_database_list WHERE name = 'main'`); err != nil || path == "" {
		t.Fatalf("the database's file: %q, %v", path, err)
	}
	return path
}
