package storage

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/airlockhq/airlock/confirm"
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
	setWebhooks(t, db, WebhookTarget{ID: "w", Events: []EventType{EventAuditCheckpoint}})
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
	if err := db.tx(t.Context(), func(tx dbtx) error { _, err := db.storeCheckpoint(t.Context(), tx, c); return err }); err != nil {
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
