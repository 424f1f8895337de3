package storage

import (
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/airlockhq/airlock/confirm"
)

// setLocalClock replaces the local clock of db (time.Now), as a replica
// whose clock is off would have it. For tests only.
func (db *DB) setLocalClock(now func() time.Time) { db.clock.local.Store(&now) }

// testClockReplicas opens two handles on one database whose local clocks
// are an hour fast and an hour slow. After SyncClock they agree on
// PostgreSQL (both read the server's clock); on SQLite, where the database
// shares the machine's clock, Clock is each handle's local clock.
func testClockReplicas(t *testing.T, driver, dsn string) {
	ctx := t.Context()
	var dbs [2]*DB
	skews := [2]time.Duration{time.Hour, -time.Hour}
	for i := range dbs {
		db, err := Open(ctx, driver, dsn)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		db.setLocalClock(func() time.Time { return time.Now().Add(skews[i]) })
		if err := db.SyncClock(ctx); err != nil {
			t.Fatal(err)
		}
		dbs[i] = db
	}
	a, b := dbs[0].Clock()(), dbs[1].Clock()()
	if driver == DriverSQLite {
		for i, got := range []time.Time{a, b} {
			if d := got.Sub(time.Now().Add(skews[i])); d < -time.Second || d > time.Second {
				t.Errorf("handle %d: Clock is off its local clock by %v", i, d)
			}
		}
		return
	}
	if d := a.Sub(b); d < -2*time.Second || d > 2*time.Second {
		t.Fatalf("handles skewed +1h and -1h disagree after SyncClock: %v vs %v (%v)", a, b, d)
	}
	if d := time.Until(a); d < -2*time.Second || d > 2*time.Second {
		t.Fatalf("Clock = %v, %v off the server's (real) clock", a, d)
	}
	// A lease taken on one replica's clock holds on the other's.
	if ok, err := dbs[0].AcquireLease(ctx, "k", "r0", time.Minute); err != nil || !ok {
		t.Fatalf("AcquireLease r0 = %v, %v", ok, err)
	}
	if ok, err := dbs[1].AcquireLease(ctx, "k", "r1", time.Minute); err != nil || ok {
		t.Fatalf("AcquireLease r1 while r0 holds a live lease = %v, %v; want false", ok, err)
	}
}

// testClockSync: with the local clock an hour fast, Clock gives the
// database's time after SyncClock (on PostgreSQL the server's clock, which
// here is the real one; on SQLite the local clock itself).
func testClockSync(t *testing.T, db *DB) {
	ctx := t.Context()
	if d := time.Until(db.Clock()()); d < -time.Second || d > time.Second {
		t.Fatalf("Clock before any sync or skew is off the local clock by %v", d)
	}
	const skew = time.Hour
	db.setLocalClock(func() time.Time { return time.Now().Add(skew) })
	if err := db.SyncClock(ctx); err != nil {
		t.Fatal(err)
	}
	got := db.Clock()()
	want := time.Now() // the server's clock: the real one
	if db.Driver() == DriverSQLite {
		want = want.Add(skew) // the database is on this machine: its clock is the local one
	}
	if d := got.Sub(want); d < -2*time.Second || d > 2*time.Second {
		t.Fatalf("Clock after SyncClock = %v, want %v (±2s; off by %v)", got, want, d)
	}
	// The database's clock is what storage stamps rows with.
	conv := newConversation(t, db)
	if d := conv.CreatedAt.Sub(want); d < -2*time.Second || d > 2*time.Second {
		t.Errorf("conversation CreatedAt = %v, want about %v", conv.CreatedAt, want)
	}
}

// testOneClock: a batch's creation and a decision on it are stamped from
// the store's clock alone: a caller's CreatedAt is not used, and the
// decision, its audit event and the batch's CreatedAt all read the one
// clock WithClock set, not the local one; SyncClock leaves it alone.
func testOneClock(t *testing.T, db *DB) {
	ctx := t.Context()
	t0 := time.Date(2031, 3, 4, 5, 6, 7, 0, time.UTC)
	clockAt(db, t0)
	if err := db.SyncClock(ctx); err != nil {
		t.Fatal(err)
	}
	if got := db.Clock()(); !got.Equal(t0) {
		t.Fatalf("Clock after SyncClock with WithClock = %v, want %v", got, t0)
	}
	conv := newConversation(t, db)
	b := &confirm.Batch{ConversationID: conv.ID, RequestedBy: "U", CreatedAt: t0.Add(-24 * time.Hour), ExpiresAt: t0.Add(time.Hour),
		Calls: []confirm.Call{{Key: "k0", Tool: "deploy", Args: json.RawMessage(`{}`), Flagged: true}}}
	if err := db.CreateBatch(ctx, b, confirm.Message{Role: "assistant", Body: json.RawMessage(`{}`)}); err != nil {
		t.Fatal(err)
	}
	if got := loadBatch(t, db, b.ID); !got.CreatedAt.Equal(t0) || !b.CreatedAt.Equal(t0) {
		t.Fatalf("CreatedAt = %v (stored %v), want the store's clock %v, not the caller's", b.CreatedAt, got.CreatedAt, t0)
	}
	t1 := t0.Add(time.Minute)
	decide(t, clockAt(db, t1), confirm.Decide{BatchID: b.ID, Key: "k0", Status: confirm.DecisionAllowed, By: "U-alice"})
	c := callByKey(t, loadBatch(t, db, b.ID), "k0")
	if c.DecidedAt == nil || !c.DecidedAt.Equal(t1) {
		t.Fatalf("DecidedAt = %v, want %v", c.DecidedAt, t1)
	}
	events, err := db.AuditEvents(ctx, confirm.AuditFilter{ConversationID: conv.ID})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range events {
		if e.Kind == confirm.AuditDecision && !e.At.Equal(t1) {
			t.Errorf("decision audited at %v, want %v", e.At, t1)
		}
		if e.Kind == confirm.AuditToolCall && !e.At.Equal(t0) {
			t.Errorf("tool_call audited at %v, want %v", e.At, t0)
		}
	}
	// Past the expiry on the store's clock, a decision is refused.
	b2 := batchIn(t, db, conv.ID, t1.Add(time.Hour), confirm.DecisionPending)
	if res := decide(t, clockAt(db, t1.Add(2*time.Hour)), confirm.Decide{BatchID: b2.ID, Key: "k0", Status: confirm.DecisionAllowed, By: "U"}); res.Won {
		t.Fatalf("decision past the expiry on the store's clock won: %+v", res)
	}
}

// testOneReadingPerTransaction: a transaction reads the store's clock
// once, as it begins, and stamps everything it writes from that reading:
// with a clock that moves on at every reading, the messages one append
// stores carry one time, and so do a completion's batch and results
// message.
func testOneReadingPerTransaction(t *testing.T, db *DB) {
	ctx := t.Context()
	b := newBatch(t, db, later(), confirm.DecisionPending)
	decide(t, db, confirm.Decide{BatchID: b.ID, Key: "k0", Status: confirm.DecisionAllowed, By: "U"})
	if ok, err := db.ClaimBatch(ctx, b.ID, "w1"); err != nil || !ok {
		t.Fatalf("ClaimBatch = %v, %v", ok, err)
	}
	if ok, err := db.StartRun(ctx, b.ID, "k0"); err != nil || !ok {
		t.Fatalf("StartRun = %v, %v", ok, err)
	}
	var (
		mu   sync.Mutex
		tick = time.Date(2031, 3, 4, 5, 6, 7, 0, time.UTC)
	)
	db.setClock(func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		tick = tick.Add(time.Second)
		return tick
	})
	if err := db.AppendMessages(ctx, b.ConversationID,
		confirm.Message{Role: "user", Body: json.RawMessage(`{"n":1}`)},
		confirm.Message{Role: "user", Body: json.RawMessage(`{"n":2}`)}); err != nil {
		t.Fatal(err)
	}
	msgs, err := db.Messages(ctx, b.ConversationID)
	if err != nil || len(msgs) < 3 {
		t.Fatalf("messages %+v, %v", msgs, err)
	}
	if a, c := msgs[len(msgs)-2].CreatedAt, msgs[len(msgs)-1].CreatedAt; !a.Equal(c) {
		t.Errorf("two messages of one append stored at %v and %v", a, c)
	}
	if err := db.FinishRun(ctx, b.ID, "k0", confirm.RunSucceeded, "done"); err != nil {
		t.Fatal(err)
	}
	results := confirm.Message{Role: "tool", Body: json.RawMessage(`[{"id":"call_0","out":"done"}]`)}
	if ok, err := db.CompleteBatch(ctx, b.ID, results); err != nil || !ok {
		t.Fatalf("CompleteBatch = %v, %v", ok, err)
	}
	if msgs, err = db.Messages(ctx, b.ConversationID); err != nil {
		t.Fatal(err)
	}
	var updated dbTime
	if err := db.get(ctx, db.reader(), &updated, db.q(`SELECT updated_at FROM batches WHERE id = ?`), b.ID); err != nil {
		t.Fatal(err)
	}
	if last := msgs[len(msgs)-1]; !last.CreatedAt.Equal(updated.t) {
		t.Errorf("the completion stored its results message at %v and the batch's update at %v", last.CreatedAt, updated.t)
	}
}
