package storage

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"
)

// insertLease writes a lease row named key in tx.
func insertLease(ctx context.Context, db *DB, tx dbtx, key string) error {
	_, err := db.exec(ctx, tx, db.q(`INSERT INTO leases (key, holder, expires_at) VALUES (?, 'h', '2030-01-01')`), key)
	return err
}

// leaseExists reports, through a reader, whether the lease key is stored.
func leaseExists(t *testing.T, db *DB, key string) bool {
	t.Helper()
	var n int
	if err := db.get(context.Background(), db.reader(), &n, db.q(`SELECT COUNT(*) FROM leases WHERE key = ?`), key); err != nil {
		t.Error(err)
	}
	return n == 1
}

// blockWriter starts a transaction writing key that holds the writer until
// release is closed, and returns its result channel once it holds it.
func blockWriter(t *testing.T, db *DB, key string) (release chan struct{}, result chan error) {
	t.Helper()
	holding, release, result := make(chan struct{}), make(chan struct{}), make(chan error, 1)
	go func() {
		result <- db.tx(context.Background(), func(tx dbtx) error {
			if err := insertLease(context.Background(), db, tx, key); err != nil {
				return err
			}
			close(holding)
			<-release
			return nil
		})
	}()
	<-holding
	return release, result
}

// waitWaiting waits until n callers wait for the writer.
func waitWaiting(t *testing.T, db *DB, n int32) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for db.w.waiting.Load() != n {
		if time.Now().After(deadline) {
			t.Fatalf("%d callers wait for the writer, want %d", db.w.waiting.Load(), n)
		}
		time.Sleep(time.Millisecond)
	}
}

// Transactions that wait for the writer commit together, and each caller
// returns only once its rows are committed: a reader sees them.
func TestWriterGroupsWaitingTransactions(t *testing.T) {
	db := openSQLite(t)
	before := db.w.groups.Load()
	release, first := blockWriter(t, db, "first")
	const n = 6
	errs := make(chan error, n)
	for i := range n {
		go func() {
			key := fmt.Sprintf("k%d", i)
			err := db.tx(context.Background(), func(tx dbtx) error { return insertLease(context.Background(), db, tx, key) })
			if err == nil && !leaseExists(t, db, key) {
				err = fmt.Errorf("%s: the transaction returned before a reader could see its row", key)
			}
			errs <- err
		}()
	}
	waitWaiting(t, db, n)
	close(release)
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	if !leaseExists(t, db, "first") {
		t.Fatal("the first transaction returned before a reader could see its row")
	}
	for range n {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if got := countLeases(t, db); got != n+1 {
		t.Fatalf("%d rows, want %d", got, n+1)
	}
	if groups := db.w.groups.Load() - before; groups >= n+1 {
		t.Fatalf("%d commits for %d transactions that waited for each other", groups, n+1)
	}
}

// In a group, a transaction that fails, fails on a statement or panics
// leaves nothing of its own, and the others' rows are committed.
func TestWriterGroupMemberFailsAlone(t *testing.T) {
	db := openSQLite(t)
	boom := errors.New("boom")
	release, first := blockWriter(t, db, "first")
	type outcome struct {
		key string
		err error
	}
	members := map[string]func(tx dbtx) error{
		"ok1":   func(tx dbtx) error { return insertLease(context.Background(), db, tx, "ok1") },
		"fails": func(tx dbtx) error { insertLease(context.Background(), db, tx, "fails"); return boom },
		"dup": func(tx dbtx) error {
			if err := insertLease(context.Background(), db, tx, "dup"); err != nil {
				return err
			}
			return insertLease(context.Background(), db, tx, "first") // a duplicate key
		},
		"panics": func(tx dbtx) error { insertLease(context.Background(), db, tx, "panics"); panic("in a group") },
		"ok2":    func(tx dbtx) error { return insertLease(context.Background(), db, tx, "ok2") },
	}
	out := make(chan outcome, len(members))
	for key, fn := range members {
		go func() {
			defer func() {
				if p := recover(); p != nil {
					out <- outcome{key, fmt.Errorf("panic: %v", p)}
				}
			}()
			out <- outcome{key, db.tx(context.Background(), fn)}
		}()
	}
	waitWaiting(t, db, int32(len(members)))
	close(release)
	if err := <-first; err != nil {
		t.Fatalf("the first transaction: %v", err)
	}
	for range members {
		o := <-out
		wantErr := o.key == "fails" || o.key == "dup" || o.key == "panics"
		if (o.err != nil) != wantErr {
			t.Errorf("%s returned %v", o.key, o.err)
		}
		if o.key == "fails" && !errors.Is(o.err, boom) {
			t.Errorf("fails returned %v, want its own error", o.err)
		}
	}
	for _, key := range []string{"first", "ok1", "ok2"} {
		if !leaseExists(t, db, key) {
			t.Errorf("%s was not committed", key)
		}
	}
	for _, key := range []string{"fails", "dup", "panics"} {
		if leaseExists(t, db, key) {
			t.Errorf("%s, of a failed transaction, was committed", key)
		}
	}
}

// A member that cannot be rolled back to its savepoint (the transaction
// is gone, as after SQLite rolled it back itself) fails the group: every
// member's caller gets an error and none of their rows is stored. The
// writer then works as before.
func TestWriterGroupFailsWhole(t *testing.T) {
	db := openSQLite(t)
	release, first := blockWriter(t, db, "first")
	wrecked := make(chan error, 1)
	go func() {
		wrecked <- db.tx(context.Background(), func(tx dbtx) error {
			insertLease(context.Background(), db, tx, "wreck")
			if _, err := db.exec(context.Background(), tx, `ROLLBACK`); err != nil {
				return err
			}
			return errors.New("rolled back")
		})
	}()
	waitWaiting(t, db, 1)
	close(release)
	if err := <-first; err == nil {
		t.Fatal("the first transaction reported success, its group having been rolled back")
	}
	if err := <-wrecked; err == nil {
		t.Fatal("the failed transaction reported success")
	}
	if n := countLeases(t, db); n != 0 {
		t.Fatalf("%d rows of a failed group were stored", n)
	}
	if ok, err := db.AcquireLease(t.Context(), "after", "me", time.Minute); err != nil || !ok {
		t.Fatalf("a write after the failed group: %v %v", ok, err)
	}
	if err := db.tx(t.Context(), func(tx dbtx) error { return insertLease(t.Context(), db, tx, "tx after") }); err != nil {
		t.Fatalf("a transaction after the failed group: %v", err)
	}
}

// A transaction left open for a waiter that then gave up is committed by
// its own caller, soon.
func TestWriterGroupLeftOpenIsCommitted(t *testing.T) {
	db := openSQLite(t)
	db.w.waiting.Add(1) // a waiter that gives up without taking the writer
	start := time.Now()
	err := db.tx(t.Context(), func(tx dbtx) error { return insertLease(t.Context(), db, tx, "alone") })
	db.w.waiting.Add(-1)
	if err != nil {
		t.Fatal(err)
	}
	if waited := time.Since(start); waited > 5*time.Second {
		t.Fatalf("the transaction waited %v for a commit", waited)
	}
	if !leaseExists(t, db, "alone") {
		t.Fatal("the transaction returned uncommitted")
	}
	db.w.slot <- struct{}{}
	open := db.w.open != nil
	<-db.w.slot
	if open {
		t.Fatal("a group is still open")
	}
}
