package storage

import (
	"path/filepath"
	"testing"
	"time"
)

// setLocalClock replaces the local clock of db (time.Now), as a replica
// whose clock is off would have it. For tests only.
func (db *DB) setLocalClock(now func() time.Time) { db.clock.local.Store(&now) }

func TestSQLiteClockReplicas(t *testing.T) {
	testClockReplicas(t, "sqlite", filepath.Join(t.TempDir(), "clock.db"))
}

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
	if d := a.Sub(time.Now()); d < -2*time.Second || d > 2*time.Second {
		t.Fatalf("Clock = %v, %v off the server's (real) clock", a, d)
	}
	// A lease taken on one replica's clock holds on the other's.
	if ok, err := dbs[0].AcquireLease(ctx, "k", "r0", time.Minute, dbs[0].Clock()()); err != nil || !ok {
		t.Fatalf("AcquireLease r0 = %v, %v", ok, err)
	}
	if ok, err := dbs[1].AcquireLease(ctx, "k", "r1", time.Minute, dbs[1].Clock()()); err != nil || ok {
		t.Fatalf("AcquireLease r1 while r0 holds a live lease = %v, %v; want false", ok, err)
	}
}

// testClockSync: with the local clock an hour fast, Clock gives the
// database's time after SyncClock (on PostgreSQL the server's clock, which
// here is the real one; on SQLite the local clock itself).
func testClockSync(t *testing.T, db *DB) {
	ctx := t.Context()
	if d := db.Clock()().Sub(time.Now()); d < -time.Second || d > time.Second {
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
