package storage

import (
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/airlockhq/airlock/confirm"
	"github.com/airlockhq/airlock/events/webhook"
)

// macTests are the row MACs' contract (docs/audit.md), in dsnTests: each
// opens its stores with the audit key.
var macTests = []struct {
	name string
	fn   func(t *testing.T, driver, dsn string)
}{
	{"AuditForgedAppendNotSigned", testAuditForgedAppendNotSigned},
	{"AuditForgedAppendChainedAround", testAuditForgedAppendChainedAround},
	{"AuditMACAfterRowsWithout", testAuditMACAfterRowsWithout},
	{"AuditMACRowWithoutKeyAfter", testAuditMACRowWithoutKeyAfter},
	{"AuditMACReplicas", testAuditMACReplicas},
	{"AuditHeadMACKept", testAuditHeadMACKept},
	{"AuditHeadMovedBack", testAuditHeadMovedBack},
}

// alarms records what a store raises (OnAuditAlarm).
type alarms struct {
	mu  sync.Mutex
	got []AuditAlarm
}

func (a *alarms) add(x AuditAlarm) { a.mu.Lock(); a.got = append(a.got, x); a.mu.Unlock() }

func (a *alarms) all() []AuditAlarm {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]AuditAlarm(nil), a.got...)
}

// keyedDB opens dsn as Airlock with audit.signing_key does, with webhooks
// and its alarms recorded.
func keyedDB(t *testing.T, driver, dsn string, key ed25519.PrivateKey) (*DB, *alarms) {
	t.Helper()
	db := openDB(t, driver, dsn, WithAuditKey(key))
	a := &alarms{}
	db.OnAuditAlarm(a.add)
	setWebhooks(t, db, WebhookTarget{ID: "siem"})
	return db, a
}

// forgeAppend does what someone with write access to the database can,
// with plain SQL: append a row with a correctly computed hash after the
// head and move the head to it. It returns the row.
func forgeAppend(t *testing.T, db *DB, actor string) AuditRecord {
	t.Helper()
	id, hash, err := db.AuditHead(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	r := AuditRecord{ID: id + 1, At: time.Now(), Kind: string(confirm.AuditDecision), Tool: "deploy", Actor: actor,
		Detail: `{"status":"allowed","surface":"thread"}`, PrevHash: hash}
	r.Hash = AuditHash(r.PrevHash, r)
	q := `INSERT INTO audit (id, at, kind, conversation_id, batch_id, call_key, tool, actor, detail, prev_hash, hash) VALUES (?, ?, ?, 0, '', '', ?, ?, ?, ?, ?)`
	if db.driver == DriverPostgres {
		q = `INSERT INTO audit (id, at, kind, conversation_id, batch_id, call_key, tool, actor, detail, prev_hash, hash) OVERRIDING SYSTEM VALUE VALUES (?, ?, ?, 0, '', '', ?, ?, ?, ?, ?)`
	}
	if _, err := db.x.ExecContext(t.Context(), db.q(q), r.ID, db.ts(r.At), r.Kind, r.Tool, r.Actor, r.Detail, r.PrevHash, r.Hash); err != nil {
		t.Fatal(err)
	}
	if _, err := db.x.ExecContext(t.Context(), db.q(`UPDATE audit_head SET last_id = ?, last_hash = ? WHERE one = 1`), r.ID, r.Hash); err != nil {
		t.Fatal(err)
	}
	return r
}

// wantForeignRowEvent checks the audit_foreign_row webhook event naming
// row was queued, once.
func wantForeignRowEvent(t *testing.T, db *DB, row int64) {
	t.Helper()
	n := 0
	for _, d := range deliveries(t, db, DeliveryFilter{}) {
		if d.Type != webhook.EventAuditForeignRow {
			continue
		}
		n++
		var ev struct {
			Type     string `json:"type"`
			Actor    string `json:"actor"`
			AuditRow int64  `json:"audit_row"`
			Reason   string `json:"reason"`
		}
		if err := json.Unmarshal(d.Body, &ev); err != nil {
			t.Fatal(err)
		}
		if ev.Type != "audit_foreign_row" || ev.Actor != "airlock" || ev.AuditRow != row || ev.Reason == "" {
			t.Fatalf("event: %s, want audit_row %d", d.Body, row)
		}
	}
	if n != 1 {
		t.Fatalf("%d audit_foreign_row events, want 1", n)
	}
}

// testAuditForgedAppendNotSigned: a row appended by hand with a correctly
// computed hash, the head moved to it. Verify with the key names it; the
// checkpoint job signs no checkpoint over it: it records the foreign head
// (a row chained around it, an alarm, a webhook event) and signs that,
// so verify with the public key alone names the forged row too.
func testAuditForgedAppendNotSigned(t *testing.T, driver, dsn string) {
	ctx := t.Context()
	pub, key := checkpointKey(t)
	mac := NewAuditMAC(key)
	db, raised := keyedDB(t, driver, dsn, key)
	chainRows(t, db, 3)
	if v, err := db.VerifyAuditWith(ctx, VerifyOptions{MAC: mac, PublicKey: pub}); err != nil || v.MACRows != 3 || v.BareRows != 0 {
		t.Fatalf("Airlock's own rows: %+v, %v", v, err)
	}
	forged := forgeAppend(t, db, "U-mallory")
	wantBreakWith(t, db, VerifyOptions{MAC: mac}, forged.ID, "unauthenticated")

	c := checkpoint(t, db, key, CheckpointPolicy{Rows: 1, Interval: time.Hour})
	all, err := db.AuditCheckpoints(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range all {
		if s.ID == forged.ID || s.Hash == forged.Hash {
			t.Fatalf("a checkpoint signed the forged row: %+v", s)
		}
	}
	if c == nil {
		t.Fatal("no checkpoint of the chain as Airlock wrote it")
	}
	got := raised.all()
	if len(got) != 1 || got[0].Row != forged.ID || got[0].ChainedTo != forged.ID-1 || got[0].AlarmRow != c.ID {
		t.Fatalf("alarms %+v, want one naming row %d, chained to %d, recorded in row %d", got, forged.ID, forged.ID-1, c.ID)
	}
	wantForeignRowEvent(t, db, forged.ID)
	// Without the key, the public half names it: the chain goes around it.
	wantBreakWith(t, db, VerifyOptions{PublicKey: pub}, forged.ID, "inserted")
	wantBreakWith(t, db, VerifyOptions{MAC: mac, PublicKey: pub}, forged.ID, "unauthenticated")
	// The head is Airlock's again: the next rows raise nothing more.
	chainRow(t, db, "U1")
	if checkpoint(t, db, key, CheckpointPolicy{Rows: 1, Interval: time.Hour}) == nil || len(raised.all()) != 1 {
		t.Fatalf("after the alarm: alarms %+v", raised.all())
	}
}

// testAuditForgedAppendChainedAround: after the same forgery, Airlock's
// next row (a decision) is recorded, chained to the last row Airlock
// wrote behind its audit_foreign_row row; the forged row stays named.
func testAuditForgedAppendChainedAround(t *testing.T, driver, dsn string) {
	ctx := t.Context()
	pub, key := checkpointKey(t)
	mac := NewAuditMAC(key)
	db, raised := keyedDB(t, driver, dsn, key)
	chainRows(t, db, 3)
	last, lastHash, _ := db.AuditHead(ctx)
	forged := forgeAppend(t, db, "U-mallory")
	forged2 := forgeAppend(t, db, "U-mallory")
	if err := db.Audit(ctx, confirm.AuditEvent{Kind: confirm.AuditDecision, Tool: "deploy", Actor: "U-alice", Detail: `{"status":"denied"}`}); err != nil {
		t.Fatalf("Airlock's row after a forged head: %v", err)
	}
	var rows []AuditRecord
	if err := db.AuditRecords(ctx, forged2.ID, AuditRecordFilter{}, func(r AuditRecord) error { rows = append(rows, r); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(rows) != 2 || rows[0].Kind != string(confirm.AuditForeignRow) || rows[0].PrevHash != lastHash || rows[1].Actor != "U-alice" || rows[1].PrevHash != rows[0].Hash {
		t.Fatalf("rows after the forged ones: %+v, want the alarm chained to row %d, then Airlock's", rows, last)
	}
	got := raised.all()
	if len(got) != 1 || got[0].Row != forged2.ID || got[0].ChainedTo != last {
		t.Fatalf("alarms %+v", got)
	}
	wantForeignRowEvent(t, db, forged2.ID)
	wantBreakWith(t, db, VerifyOptions{MAC: mac}, forged.ID, "unauthenticated")
	wantBreakWith(t, db, VerifyOptions{PublicKey: pub}, forged.ID, "inserted")
}

// testAuditMACAfterRowsWithout: rows written before the key (or before
// migration 021) carry no MAC; the first row written with the key
// extends them without an alarm, and verify with the key counts both.
func testAuditMACAfterRowsWithout(t *testing.T, driver, dsn string) {
	ctx := t.Context()
	_, key := checkpointKey(t)
	old := openDB(t, driver, dsn)
	chainRows(t, old, 3)
	old.Close()
	db, raised := keyedDB(t, driver, dsn, key)
	chainRow(t, db, "U1")
	chainRow(t, db, "U2")
	v, err := db.VerifyAuditWith(ctx, VerifyOptions{MAC: NewAuditMAC(key)})
	if err != nil || v.Rows != 5 || v.BareRows != 3 || v.MACRows != 2 || !v.MACChecked || len(raised.all()) != 0 {
		t.Fatalf("verify: %+v, %v; alarms %+v", v, err, raised.all())
	}
	// Another key's MACs are not Airlock's.
	_, other := checkpointKey(t)
	wantBreakWith(t, db, VerifyOptions{MAC: NewAuditMAC(other)}, v.HeadID-1, "unauthenticated")
}

// testAuditMACRowWithoutKeyAfter: once rows carry MACs, a row written by a
// process without the key (a replica without audit.signing_key, an older
// release) is, to Airlock, a row it did not write: the next keyed write
// chains around it with an alarm, and verify names it.
func testAuditMACRowWithoutKeyAfter(t *testing.T, driver, dsn string) {
	ctx := t.Context()
	_, key := checkpointKey(t)
	db, raised := keyedDB(t, driver, dsn, key)
	chainRow(t, db, "U1")
	keyless := openDB(t, driver, dsn)
	chainRow(t, keyless, "U-keyless")
	bare, _, _ := keyless.AuditHead(ctx)
	chainRow(t, db, "U2")
	if got := raised.all(); len(got) != 1 || got[0].Row != bare {
		t.Fatalf("alarms %+v, want one naming row %d", got, bare)
	}
	wantBreakWith(t, db, VerifyOptions{MAC: NewAuditMAC(key)}, bare, "unauthenticated")
}

// testAuditMACReplicas: replicas with the key writing at once keep one
// chain of MACed rows and raise nothing.
func testAuditMACReplicas(t *testing.T, driver, dsn string) {
	_, key := checkpointKey(t)
	var dbs []*DB
	var raised []*alarms
	for range 2 {
		db, a := keyedDB(t, driver, dsn, key)
		dbs, raised = append(dbs, db), append(raised, a)
	}
	raceAll(t, 8, func(w int) error {
		for i := range 20 {
			if err := dbs[w%2].Audit(t.Context(), confirm.AuditEvent{Kind: confirm.AuditDecision, Actor: fmt.Sprintf("U%d-%d", w, i)}); err != nil {
				return err
			}
		}
		return nil
	})
	v, err := dbs[1].VerifyAuditWith(t.Context(), VerifyOptions{MAC: NewAuditMAC(key)})
	if err != nil || v.Rows != 160 || v.MACRows != 160 {
		t.Fatalf("verify: %+v, %v", v, err)
	}
	for i, a := range raised {
		if got := a.all(); len(got) != 0 {
			t.Fatalf("replica %d raised %+v", i, got)
		}
	}
}

// testAuditHeadMACKept: the head's MAC cannot be emptied (which would pass
// any head for one from before the key), nor the head deleted.
func testAuditHeadMACKept(t *testing.T, driver, dsn string) {
	_, key := checkpointKey(t)
	db, _ := keyedDB(t, driver, dsn, key)
	chainRow(t, db, "U1")
	for _, q := range []string{`UPDATE audit_head SET last_mac = ''`, `DELETE FROM audit_head`} {
		if _, err := db.x.ExecContext(t.Context(), q); err == nil {
			t.Errorf("%s went through", q)
		}
	}
	var b *AuditBreak
	if _, err := db.VerifyAuditWith(t.Context(), VerifyOptions{MAC: NewAuditMAC(key)}); errors.As(err, &b) || err != nil {
		t.Fatalf("verify: %v", err)
	}
}

// testAuditHeadMovedBack: the head moved back to an older row of Airlock's
// (its MAC is valid) makes Airlock chain its next row there; the rows cut
// off stay in the table and verify names the break, with the key or not.
func testAuditHeadMovedBack(t *testing.T, driver, dsn string) {
	ctx := t.Context()
	pub, key := checkpointKey(t)
	db, raised := keyedDB(t, driver, dsn, key)
	ids := chainRows(t, db, 5)
	var rows []AuditRecord
	if err := db.AuditRecords(ctx, 0, AuditRecordFilter{}, func(r AuditRecord) error { rows = append(rows, r); return nil }); err != nil {
		t.Fatal(err)
	}
	if _, err := db.x.ExecContext(ctx, db.q(`UPDATE audit_head SET last_id = ?, last_hash = ?, last_mac = ? WHERE one = 1`), rows[1].ID, rows[1].Hash, rows[1].MAC); err != nil {
		t.Fatal(err)
	}
	chainRow(t, db, "U-next")
	if got := raised.all(); len(got) != 0 {
		t.Fatalf("alarms %+v", got)
	}
	wantBreakWith(t, db, VerifyOptions{MAC: NewAuditMAC(key), PublicKey: pub}, ids[2], "inserted")
	wantBreak(t, db, ids[2], "inserted")
}

func init() { dsnTests = append(dsnTests, macTests...) }
