package storage

import (
	"crypto/ed25519"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/airlockhq/airlock/confirm"
)

// chainRows writes n audit rows and returns their ids.
func chainRows(t *testing.T, db *DB, n int) []int64 {
	t.Helper()
	conv := newConversation(t, db)
	for i := range n {
		if err := db.Audit(t.Context(), confirm.AuditEvent{Kind: confirm.AuditDecision, ConversationID: conv.ID, BatchID: "b",
			CallKey: fmt.Sprint(i), Tool: "deploy", Actor: "U1", Detail: fmt.Sprintf(`{"n":%d,"s":"é\n"}`, i)}); err != nil {
			t.Fatal(err)
		}
	}
	var ids []int64
	if err := db.x.SelectContext(t.Context(), &ids, `SELECT id FROM audit ORDER BY id`); err != nil {
		t.Fatal(err)
	}
	return ids
}

// dropAuditTriggers does what a person with the database can: the
// append-only triggers stop Airlock, not them.
func dropAuditTriggers(t *testing.T, db *DB) {
	t.Helper()
	qs := []string{`DROP TRIGGER audit_no_update`, `DROP TRIGGER audit_no_delete`}
	if db.driver == DriverPostgres {
		qs = []string{`DROP TRIGGER audit_no_update ON audit`, `DROP TRIGGER audit_append_only ON audit`}
	}
	for _, q := range qs {
		if _, err := db.x.ExecContext(t.Context(), q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
}

func wantBreak(t *testing.T, db *DB, id int64, what string) {
	t.Helper()
	_, err := db.VerifyAudit(t.Context())
	var b *AuditBreak
	if !errors.As(err, &b) || !errors.Is(err, ErrAuditChain) {
		t.Fatalf("verify = %v, want a break at row %d (%s)", err, id, what)
	}
	if b.ID != id || b.What != what {
		t.Fatalf("verify = %v, want row %d %s", err, id, what)
	}
}

func testAuditChainVerifies(t *testing.T, db *DB) {
	ctx := t.Context()
	v, err := db.VerifyAudit(ctx)
	if err != nil || v.Rows != 0 || v.HeadHash != AuditGenesis {
		t.Fatalf("fresh: %+v, %v", v, err)
	}
	ids := chainRows(t, db, 5)
	v, err = db.VerifyAudit(ctx)
	if err != nil || v.Rows != 5 || v.HeadID != ids[4] {
		t.Fatalf("verify: %+v, %v", v, err)
	}
	// The stored hashes are the documented function of the rows as read back.
	prev := AuditGenesis
	err = db.AuditRecords(ctx, 0, AuditRecordFilter{}, func(r AuditRecord) error {
		if r.PrevHash != prev || r.Hash != AuditHash(prev, r) || len(r.Hash) != 64 {
			return fmt.Errorf("row %d: prev %s hash %s, want prev %s", r.ID, r.PrevHash, r.Hash, prev)
		}
		prev = r.Hash
		return nil
	})
	if err != nil || prev != v.HeadHash {
		t.Fatalf("%v (head %s, last %s)", err, v.HeadHash, prev)
	}
	// The triggers still refuse edits of chained rows and the head cannot
	// re-chain them.
	for _, q := range []string{`UPDATE audit SET actor = 'X'`, `UPDATE audit SET hash = 'x'`, `DELETE FROM audit`} {
		if _, err := db.x.ExecContext(ctx, q); err == nil {
			t.Errorf("%s succeeded", q)
		}
	}
}

// chainTamperTests are what a person with the database can do to the audit
// rows once the triggers are dropped, each one statement on the ids of the
// rows chainRows wrote, with the row and the break verify must then name.
var chainTamperTests = func() []conformanceTest {
	var tests []conformanceTest
	for _, tc := range []struct {
		name  string
		rows  int
		query string
		args  func(ids []int64) []any
		at    int // the index in ids of the row verify names
		what  string
	}{
		{"AuditChainEdited", 6, `UPDATE audit SET detail = '{"n":99}' WHERE id = ?`, func(ids []int64) []any { return []any{ids[3]} }, 3, "edited"},
		{"AuditChainDeletedMiddle", 6, `DELETE FROM audit WHERE id = ?`, func(ids []int64) []any { return []any{ids[2]} }, 2, "deleted"},
		{"AuditChainDeletedTwo", 6, `DELETE FROM audit WHERE id IN (?, ?)`, func(ids []int64) []any { return []any{ids[2], ids[3]} }, 2, "deleted"},
		{"AuditChainDeletedFirst", 3, `DELETE FROM audit WHERE id = ?`, func(ids []int64) []any { return []any{ids[0]} }, 0, "deleted"},
		{"AuditChainDeletedTail", 6, `DELETE FROM audit WHERE id >= ?`, func(ids []int64) []any { return []any{ids[4]} }, 4, "deleted"},
		// Rows 2 and 3 change places: each takes the other's contents,
		// hashes and all.
		{"AuditChainSwapped", 6, `UPDATE audit SET at = o.at, kind = o.kind, conversation_id = o.conversation_id,
			batch_id = o.batch_id, call_key = o.call_key, tool = o.tool, actor = o.actor, detail = o.detail,
			prev_hash = o.prev_hash, hash = o.hash
		FROM audit o WHERE (audit.id = ? AND o.id = ?) OR (audit.id = ? AND o.id = ?)`,
			func(ids []int64) []any { return []any{ids[2], ids[3], ids[3], ids[2]} }, 2, "reordered"},
	} {
		tests = append(tests, conformanceTest{tc.name, func(t *testing.T, db *DB) {
			ids := chainRows(t, db, tc.rows)
			dropAuditTriggers(t, db)
			if _, err := db.x.ExecContext(t.Context(), db.q(tc.query), tc.args(ids)...); err != nil {
				t.Fatal(err)
			}
			wantBreak(t, db, ids[tc.at], tc.what)
		}})
	}
	return tests
}()

func testAuditChainEditedAndRehashed(t *testing.T, db *DB) {
	ids := chainRows(t, db, 6)
	dropAuditTriggers(t, db)
	r := AuditRecord{}
	err := db.AuditRecords(t.Context(), ids[2], AuditRecordFilter{}, func(x AuditRecord) error {
		if r.ID == 0 {
			r = x
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	r.Actor = "U-mallory"
	if _, err := db.x.ExecContext(t.Context(), db.q(`UPDATE audit SET actor = ?, hash = ? WHERE id = ?`), r.Actor, AuditHash(r.PrevHash, r), r.ID); err != nil {
		t.Fatal(err)
	}
	// The next row chains to the row as it was: the row is named.
	wantBreak(t, db, ids[3], "edited")
}

func testAuditChainInserted(t *testing.T, db *DB) {
	ids := chainRows(t, db, 3)
	dropAuditTriggers(t, db)
	// A row added at the end, chained as Airlock would, but outside it.
	r := AuditRecord{ID: ids[2] + 1, At: time.Now(), Kind: string(confirm.AuditDecision), Actor: "U-mallory"}
	_, r.PrevHash, _ = db.AuditHead(t.Context())
	r.Hash = AuditHash(r.PrevHash, r)
	q := `INSERT INTO audit (id, at, kind, actor, prev_hash, hash) VALUES (?, ?, ?, ?, ?, ?)`
	if db.driver == DriverPostgres {
		q = `INSERT INTO audit (id, at, kind, actor, prev_hash, hash) OVERRIDING SYSTEM VALUE VALUES (?, ?, ?, ?, ?, ?)`
	}
	if _, err := db.x.ExecContext(t.Context(), db.q(q), r.ID, db.ts(r.At), r.Kind, r.Actor, r.PrevHash, r.Hash); err != nil {
		t.Fatal(err)
	}
	wantBreak(t, db, r.ID, "inserted")
}

func testAuditChainConcurrent(t *testing.T, db *DB) {
	conv := newConversation(t, db)
	raceAll(t, 8, func(w int) error {
		for i := range 25 {
			if err := db.Audit(t.Context(), confirm.AuditEvent{Kind: confirm.AuditDecision, ConversationID: conv.ID, Actor: fmt.Sprintf("U%d-%d", w, i)}); err != nil {
				return err
			}
		}
		return nil
	})
	v, err := db.VerifyAudit(t.Context())
	if err != nil || v.Rows != 200 {
		t.Fatalf("verify: %+v, %v", v, err)
	}
}

func TestPostgresAuditChain(t *testing.T) {
	admin, dsn := postgresAdmin(t)
	fresh := func(t *testing.T) string { return postgresSchema(t, admin, dsn) }
	t.Run("Replicas", func(t *testing.T) { testAuditChainReplicas(t, fresh(t)) })
	t.Run("OlderReleaseBeside", func(t *testing.T) { testAuditChainOlderReleaseBeside(t, fresh(t)) })
}

// During a rolling upgrade an older release's pod writes audit rows the
// old way (the id from the column's default) beside this one: neither's
// writes fail on the other's ids, and verify names the unchained row.
func testAuditChainOlderReleaseBeside(t *testing.T, dsn string) {
	db := openDB(t, DriverPostgres, dsn)
	audit := func(actor string) {
		t.Helper()
		if err := db.Audit(t.Context(), confirm.AuditEvent{Kind: confirm.AuditDecision, Actor: actor}); err != nil {
			t.Fatalf("chained write %s: %v", actor, err)
		}
	}
	audit("U1")
	audit("U2")
	if _, err := db.x.ExecContext(t.Context(), `INSERT INTO audit (at, kind, conversation_id, batch_id, call_key, tool, actor, detail)
		VALUES (now(), 'decision', 0, '', '', '', 'old-release', '')`); err != nil {
		t.Fatalf("an older release's write failed: %v", err)
	}
	audit("U3")
	_, err := db.VerifyAudit(t.Context())
	var br *AuditBreak
	if !errors.As(err, &br) || br.What != "unchained" {
		t.Fatalf("verify after an older release's row: %v, want it named unchained", err)
	}
}

// testAuditChainMigrated upgrades a database whose audit rows were written
// before the chain: Open chains them, verify passes, new rows extend the
// chain, and opening again changes nothing.
func testAuditChainMigrated(t *testing.T, driver, dsn string) {
	ctx := t.Context()
	old := openAtMigration(t, driver, dsn, 13)
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 123456789, time.UTC)
	for i := range 2500 { // more than a page
		insertOldAudit(t, old, confirm.AuditEvent{At: t0.Add(time.Duration(i) * time.Second), Kind: confirm.AuditDecision,
			ConversationID: int64(i % 7), Actor: "U1", Detail: fmt.Sprintf(`{"n":%d}`, i)})
	}
	old.Close()
	db := openDB(t, driver, dsn)
	v, err := db.VerifyAudit(ctx)
	if err != nil || v.Rows != 2500 {
		t.Fatalf("verify after the upgrade: %+v, %v", v, err)
	}
	if err := db.Audit(ctx, confirm.AuditEvent{Kind: confirm.AuditDecision, Actor: "U2"}); err != nil {
		t.Fatal(err)
	}
	v, err = db.VerifyAudit(ctx)
	if err != nil || v.Rows != 2501 {
		t.Fatalf("verify after a new row: %+v, %v", v, err)
	}
	db.Close()
	w, err := openDB(t, driver, dsn).VerifyAudit(ctx)
	if err != nil || w != v {
		t.Fatalf("verify after opening again: %+v, %v, want %+v", w, err, v)
	}
}

// testAuditChainReplicas: two replicas writing at once keep one chain.
func testAuditChainReplicas(t *testing.T, dsn string) {
	dbs := openReplicas(t, DriverPostgres, dsn, 2)
	raceAll(t, 16, func(w int) error {
		for i := range 20 {
			if err := dbs[w%2].Audit(t.Context(), confirm.AuditEvent{Kind: confirm.AuditDecision, Actor: fmt.Sprintf("U%d-%d", w, i)}); err != nil {
				return err
			}
		}
		return nil
	})
	v, err := dbs[1].VerifyAudit(t.Context())
	if err != nil || v.Rows != 320 {
		t.Fatalf("verify: %+v, %v", v, err)
	}
}

// A person who deletes the tail and moves the head back leaves a chain that
// verifies; a checkpoint held outside names the truncation.
func testAuditChainTruncatedAfterCheckpoint(t *testing.T, db *DB) {
	ctx := t.Context()
	ids := chainRows(t, db, 6)
	var hashes = map[int64]string{}
	if err := db.AuditRecords(ctx, 0, AuditRecordFilter{}, func(r AuditRecord) error { hashes[r.ID] = r.Hash; return nil }); err != nil {
		t.Fatal(err)
	}
	pub, key, err := ed25519.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	c := AuditCheckpoint{ID: ids[3], Hash: hashes[ids[3]], At: time.Now()}
	c.Sign(key)
	if err := c.VerifySignature(pub); err != nil {
		t.Fatal(err)
	}
	forged := c
	forged.ID = ids[1]
	if err := forged.VerifySignature(pub); !errors.Is(err, ErrCheckpointSignature) {
		t.Fatalf("a checkpoint with another id verified: %v", err)
	}
	if _, err := db.VerifyAudit(ctx, c); err != nil {
		t.Fatalf("intact chain with its checkpoint: %v", err)
	}
	dropAuditTriggers(t, db)
	if _, err := db.x.ExecContext(ctx, db.q(`DELETE FROM audit WHERE id >= ?`), ids[2]); err != nil {
		t.Fatal(err)
	}
	if _, err := db.x.ExecContext(ctx, db.q(`UPDATE audit_head SET last_id = ?, last_hash = ?`), ids[1], hashes[ids[1]]); err != nil {
		t.Fatal(err)
	}
	if v, err := db.VerifyAudit(ctx); err != nil || v.Rows != 2 {
		t.Fatalf("without the checkpoint the truncated chain should verify: %+v, %v", v, err)
	}
	_, err = db.VerifyAudit(ctx, c)
	var b *AuditBreak
	if !errors.As(err, &b) || b.ID != ids[3] || b.What != "truncated" {
		t.Fatalf("verify with the checkpoint: %v, want row %d truncated", err, ids[3])
	}
}

// insertUnchained writes an audit row as someone with the database can: a
// plain INSERT, no hashes. It returns the row's id.
func insertUnchained(t *testing.T, db *DB, actor string) int64 {
	t.Helper()
	var id int64
	if err := db.x.GetContext(t.Context(), &id, db.q(`INSERT INTO audit (at, kind, conversation_id, batch_id, call_key, tool, actor, detail)
		VALUES (?, 'decision', 0, '', '', 'deploy', ?, '{"status":"allowed"}') RETURNING id`), db.ts(time.Now()), actor); err != nil {
		t.Fatal(err)
	}
	return id
}

// testAuditUnchainedStaysNamed: a row inserted by hand without hashes is
// never chained in later, by opening the store again or by verify: it is
// named unchained every time, and Airlock's next rows go on around it.
func testAuditUnchainedStaysNamed(t *testing.T, driver, dsn string) {
	db := openDB(t, driver, dsn)
	chainRows(t, db, 3)
	forged := insertUnchained(t, db, "U-mallory")
	wantBreak(t, db, forged, "unchained")
	db.Close()
	for range 2 {
		db = openDB(t, driver, dsn)
		wantBreak(t, db, forged, "unchained")
		if err := db.Audit(t.Context(), confirm.AuditEvent{Kind: confirm.AuditDecision, Actor: "U1"}); err != nil {
			t.Fatalf("Airlock's next row beside the unchained one: %v", err)
		}
		wantBreak(t, db, forged, "unchained")
		db.Close()
	}
}
