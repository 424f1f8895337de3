package storage

import (
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/airlockhq/airlock/confirm"
	"github.com/airlockhq/airlock/events/webhook"
)

// checkpointTests are the stored checkpoints' contract, run by
// runConformance on both databases.
var checkpointTests = []conformanceTest{
	{"CheckpointPolicy", testCheckpointPolicy},
	{"CheckpointOncePerHead", testCheckpointOncePerHead},
	{"CheckpointEvent", testCheckpointEvent},
	{"CheckpointsVerify", testCheckpointsVerify},
	{"CheckpointsRewrittenChain", testCheckpointsRewrittenChain},
	{"CheckpointsTruncatedTail", testCheckpointsTruncatedTail},
	{"CheckpointForged", testCheckpointForged},
	{"CheckpointPastAForgedOne", testCheckpointPastAForgedOne},
}

func checkpointKey(t *testing.T) (ed25519.PublicKey, ed25519.PrivateKey) {
	t.Helper()
	pub, key, err := ed25519.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	return pub, key
}

var everyThree = CheckpointPolicy{Rows: 3, Interval: time.Hour}

func checkpoint(t *testing.T, db *DB, key ed25519.PrivateKey, p CheckpointPolicy) *AuditCheckpoint {
	t.Helper()
	c, err := db.CheckpointAudit(t.Context(), key, p)
	if err != nil {
		t.Fatalf("CheckpointAudit: %v", err)
	}
	return c
}

func chainRow(t *testing.T, db *DB, actor string) {
	t.Helper()
	if err := db.Audit(t.Context(), confirm.AuditEvent{Kind: confirm.AuditDecision, Actor: actor, Tool: "deploy"}); err != nil {
		t.Fatal(err)
	}
}

// A checkpoint is due first at once, then after Rows rows or, with a row
// added, after Interval; never twice for one head.
func testCheckpointPolicy(t *testing.T, db *DB) {
	pub, key := checkpointKey(t)
	now := time.Date(2026, 5, 1, 9, 0, 0, 0, time.UTC)
	db.setClock(func() time.Time { return now })
	if _, err := db.CheckpointAudit(t.Context(), nil, everyThree); !errors.Is(err, ErrNoSigningKey) {
		t.Fatalf("no key: %v", err)
	}
	if c := checkpoint(t, db, key, everyThree); c != nil {
		t.Fatalf("a checkpoint of an empty audit: %+v", c)
	}
	chainRow(t, db, "U1")
	first := checkpoint(t, db, key, everyThree)
	headID, headHash, _ := db.AuditHead(t.Context())
	if first == nil || first.ID != headID || first.Hash != headHash || !first.At.Equal(now) {
		t.Fatalf("first checkpoint: %+v, head %d %s", first, headID, headHash)
	}
	if err := first.VerifySignature(pub); err != nil {
		t.Fatal(err)
	}
	if c := checkpoint(t, db, key, everyThree); c != nil {
		t.Fatalf("a second checkpoint of the same head: %+v", c)
	}
	chainRow(t, db, "U2")
	chainRow(t, db, "U3")
	if c := checkpoint(t, db, key, everyThree); c != nil {
		t.Fatalf("a checkpoint after 2 of 3 rows: %+v", c)
	}
	chainRow(t, db, "U4")
	byRows := checkpoint(t, db, key, everyThree)
	if byRows == nil {
		t.Fatal("no checkpoint after 3 rows")
	}
	now = now.Add(59 * time.Minute)
	chainRow(t, db, "U5")
	if c := checkpoint(t, db, key, everyThree); c != nil {
		t.Fatalf("a checkpoint before the interval: %+v", c)
	}
	now = now.Add(time.Minute)
	byTime := checkpoint(t, db, key, everyThree)
	if byTime == nil {
		t.Fatal("no checkpoint after the interval")
	}
	now = now.Add(5 * time.Hour)
	if c := checkpoint(t, db, key, everyThree); c != nil {
		t.Fatalf("a checkpoint with no row added: %+v", c)
	}
	all, err := db.AuditCheckpoints(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 3 || all[0] != *first || all[1] != *byRows || all[2] != *byTime {
		t.Fatalf("stored: %+v", all)
	}
}

// Writers racing for the same head store one checkpoint and queue one
// event (the conditional insert).
func testCheckpointOncePerHead(t *testing.T, db *DB) {
	_, key := checkpointKey(t)
	setWebhooks(t, db, WebhookTarget{ID: "w1"})
	chainRow(t, db, "U1")
	written := raceWins(t, 8, func(int) (bool, error) {
		c, err := db.CheckpointAudit(t.Context(), key, everyThree)
		return c != nil, err
	})
	if written != 1 {
		t.Fatalf("%d checkpoints written for one head", written)
	}
	ds, err := db.Deliveries(t.Context(), DeliveryFilter{})
	n := 0
	for _, d := range ds {
		if d.Type == webhook.EventAuditCheckpoint {
			n++
		}
	}
	if err != nil || n != 1 {
		t.Fatalf("checkpoint deliveries: %d, %v", n, err)
	}
}

// The audit_checkpoint event carries the checkpoint as verify reads it,
// to the webhooks that take the type.
func testCheckpointEvent(t *testing.T, db *DB) {
	pub, key := checkpointKey(t)
	setWebhooks(t, db, WebhookTarget{ID: "all"}, WebhookTarget{ID: "cp", Events: []webhook.EventType{webhook.EventAuditCheckpoint}},
		WebhookTarget{ID: "decisions", Events: []webhook.EventType{webhook.EventDecision}})
	chainRow(t, db, "U1")
	c := checkpoint(t, db, key, everyThree)
	ds, err := db.Deliveries(t.Context(), DeliveryFilter{})
	if err != nil {
		t.Fatal(err)
	}
	targets := map[string]bool{}
	for _, d := range ds {
		if d.Type != webhook.EventAuditCheckpoint {
			continue
		}
		targets[d.Target] = true
		var ev struct {
			Type       string          `json:"type"`
			Actor      string          `json:"actor"`
			Checkpoint AuditCheckpoint `json:"checkpoint"`
		}
		if err := json.Unmarshal(d.Body, &ev); err != nil {
			t.Fatal(err)
		}
		got := ev.Checkpoint
		if ev.Type != "audit_checkpoint" || ev.Actor != "airlock" || got.ID != c.ID || got.Hash != c.Hash || !got.At.Equal(c.At) || got.PublicKey == "" {
			t.Fatalf("event: %s", d.Body)
		}
		if err := got.VerifySignature(pub); err != nil {
			t.Fatalf("the event's checkpoint does not verify: %v (%s)", err, d.Body)
		}
	}
	if len(targets) != 2 || !targets["all"] || !targets["cp"] {
		t.Fatalf("checkpoint sent to %v, want all and cp", targets)
	}
}

// checkpointsOf writes n rows with a checkpoint after every three.
func checkpointsOf(t *testing.T, db *DB, key ed25519.PrivateKey, n int) []AuditCheckpoint {
	t.Helper()
	for i := range n {
		chainRow(t, db, "U1")
		if (i+1)%3 == 0 {
			checkpoint(t, db, key, everyThree)
		}
	}
	all, err := db.AuditCheckpoints(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return all
}

func wantBreakWith(t *testing.T, db *DB, o VerifyOptions, id int64, what string) {
	t.Helper()
	_, err := db.VerifyAuditWith(t.Context(), o)
	var b *AuditBreak
	if !errors.As(err, &b) || !errors.Is(err, ErrAuditChain) || b.ID != id || b.What != what {
		t.Fatalf("verify = %v, want row %d %s", err, id, what)
	}
}

func testCheckpointsVerify(t *testing.T, db *DB) {
	pub, key := checkpointKey(t)
	cps := checkpointsOf(t, db, key, 10)
	v, err := db.VerifyAuditWith(t.Context(), VerifyOptions{PublicKey: pub})
	if err != nil || v.Rows != 10 || v.Checkpoints != len(cps) || len(cps) != 3 {
		t.Fatalf("verify: %+v, %v (%d stored)", v, err, len(cps))
	}
}

// A person who edits a row and rehashes the rest of the chain and the head
// passes the chain alone; the stored checkpoints name the rewrite.
func testCheckpointsRewrittenChain(t *testing.T, db *DB) {
	pub, key := checkpointKey(t)
	cps := checkpointsOf(t, db, key, 9)
	dropAuditTriggers(t, db)
	var rows []AuditRecord
	if err := db.AuditRecords(t.Context(), 0, AuditRecordFilter{}, func(r AuditRecord) error { rows = append(rows, r); return nil }); err != nil {
		t.Fatal(err)
	}
	rows[1].Actor = "U-mallory"
	for i := 1; i < len(rows); i++ {
		rows[i].PrevHash = rows[i-1].Hash
		rows[i].Hash = AuditHash(rows[i].PrevHash, rows[i])
		if _, err := db.x.ExecContext(t.Context(), db.q(`UPDATE audit SET actor = ?, prev_hash = ?, hash = ? WHERE id = ?`), rows[i].Actor, rows[i].PrevHash, rows[i].Hash, rows[i].ID); err != nil {
			t.Fatal(err)
		}
	}
	last := rows[len(rows)-1]
	headAt(t, db, last)
	wantBreakWith(t, db, VerifyOptions{PublicKey: pub}, cps[0].ID, "edited")
}

// headAt moves the chain's head to r, as someone covering an edit would,
// and checks that the chain alone then verifies.
func headAt(t *testing.T, db *DB, r AuditRecord) {
	t.Helper()
	if _, err := db.x.ExecContext(t.Context(), db.q(`UPDATE audit_head SET last_id = ?, last_hash = ?`), r.ID, r.Hash); err != nil {
		t.Fatal(err)
	}
	if _, err := db.VerifyAudit(t.Context()); err != nil {
		t.Fatalf("the chain alone should verify: %v", err)
	}
}

// A tail deleted past the last stored checkpoint, with the head moved
// back, is named truncated.
func testCheckpointsTruncatedTail(t *testing.T, db *DB) {
	pub, key := checkpointKey(t)
	cps := checkpointsOf(t, db, key, 9)
	dropAuditTriggers(t, db)
	var keep AuditRecord
	if err := db.AuditRecords(t.Context(), 0, AuditRecordFilter{}, func(r AuditRecord) error {
		if r.ID < cps[2].ID {
			keep = r
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := db.x.ExecContext(t.Context(), db.q(`DELETE FROM audit WHERE id > ?`), keep.ID); err != nil {
		t.Fatal(err)
	}
	headAt(t, db, keep)
	wantBreakWith(t, db, VerifyOptions{PublicKey: pub}, cps[2].ID, "truncated")
}

// A stored checkpoint altered, or signed with another key, is named forged.
func testCheckpointForged(t *testing.T, db *DB) {
	pub, key := checkpointKey(t)
	cps := checkpointsOf(t, db, key, 6)
	_, other := checkpointKey(t)
	chainRow(t, db, "U2")
	if checkpoint(t, db, other, CheckpointPolicy{Rows: 1, Interval: time.Hour}) == nil {
		t.Fatal("no checkpoint")
	}
	all, _ := db.AuditCheckpoints(t.Context())
	wantBreakWith(t, db, VerifyOptions{PublicKey: pub}, all[len(all)-1].ID, "forged")

	// The first checkpoint moved to another row in place.
	q := []string{`DROP TRIGGER audit_checkpoints_no_update`}
	if db.driver == DriverPostgres {
		q = []string{`DROP TRIGGER audit_checkpoints_append_only ON audit_checkpoints`}
	}
	for _, s := range q {
		if _, err := db.x.ExecContext(t.Context(), s); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := db.x.ExecContext(t.Context(), db.q(`UPDATE audit_checkpoints SET head_id = head_id - 1 WHERE head_id = ?`), cps[0].ID); err != nil {
		t.Fatal(err)
	}
	wantBreakWith(t, db, VerifyOptions{PublicKey: pub}, cps[0].ID-1, "forged")
}

// With replicas on PostgreSQL, racing for one head still stores one
// checkpoint.
func TestPostgresAuditCheckpointReplicas(t *testing.T) {
	admin, dsn := postgresAdmin(t)
	dbs := openReplicas(t, DriverPostgres, postgresSchema(t, admin, dsn), 4)
	_, key := checkpointKey(t)
	for round := range 5 {
		chainRow(t, dbs[0], "U1")
		n := raceWins(t, len(dbs), func(i int) (bool, error) {
			c, err := dbs[i].CheckpointAudit(t.Context(), key, CheckpointPolicy{Rows: 1, Interval: time.Hour})
			return c != nil, err
		})
		if n != 1 {
			t.Fatalf("round %d: %d checkpoints written", round, n)
		}
	}
	all, err := dbs[1].AuditCheckpoints(t.Context())
	if err != nil || len(all) != 5 {
		t.Fatalf("stored: %d, %v", len(all), err)
	}
}

// A checkpoint someone stored by hand at a row the chain has not reached
// does not stop Airlock's: the job goes on from its own last one.
func testCheckpointPastAForgedOne(t *testing.T, db *DB) {
	_, key := checkpointKey(t)
	_, other := checkpointKey(t)
	chainRow(t, db, "U1")
	if checkpoint(t, db, key, everyThree) == nil {
		t.Fatal("no first checkpoint")
	}
	fake := AuditCheckpoint{ID: 1000, Hash: AuditGenesis, At: time.Now()}
	fake.Sign(other)
	if err := db.tx(t.Context(), func(tx *txn) error { _, err := db.storeCheckpoint(t.Context(), tx, fake); return err }); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		chainRow(t, db, "U2")
	}
	if c := checkpoint(t, db, key, everyThree); c == nil {
		t.Fatal("a stored checkpoint of another key at row 1000 stopped the checkpoints")
	}
}
