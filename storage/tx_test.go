package storage

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// countLeases counts the leases table's rows through a reader.
func countLeases(t *testing.T, db *DB) int {
	t.Helper()
	var n int
	if err := db.get(t.Context(), db.reader(), &n, `SELECT COUNT(*) FROM leases`); err != nil {
		t.Fatal(err)
	}
	return n
}

// blockWriter starts a transaction writing key that holds the writer until
// release is closed, and returns its result channel once it holds it.
func blockWriter(t *testing.T, db *DB, key string) (release chan struct{}, result chan error) {
	t.Helper()
	holding, release, result := make(chan struct{}), make(chan struct{}), make(chan error, 1)
	go func() {
		result <- db.tx(context.Background(), func(tx *txn) error {
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

// waitWaiting gives n callers started meanwhile time to queue for the
// writer (a channel's waiters cannot be counted); the assertions after it
// hold whether or not they all did.
func waitWaiting(t *testing.T, n int) {
	t.Helper()
	time.Sleep(time.Duration(n) * 20 * time.Millisecond)
}

// insertLease writes a lease row named key in tx.
func insertLease(ctx context.Context, db *DB, tx *txn, key string) error {
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

// A write waiting for the writer gives up when its context ends, having
// written nothing; once the holder lets go, writes go through.
func TestWriterWaitEndsWithContext(t *testing.T) {
	db := openSQLite(t)
	release, done := blockWriter(t, db, "held")
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := db.AcquireLease(ctx, "k", "me", time.Minute)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a write waiting for a held writer returned %v, want the context's deadline", err)
	}
	if waited := time.Since(start); waited > 5*time.Second {
		t.Fatalf("the write gave up after %v", waited)
	}
	err = db.tx(ctx, func(tx *txn) error { t.Error("a transaction ran after its context ended"); return nil })
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a transaction waiting for a held writer returned %v", err)
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if n := countLeases(t, db); n != 1 {
		t.Fatalf("%d leases, want only the holder's: writes that gave up wrote", n)
	}
	if ok, err := db.AcquireLease(t.Context(), "k", "me", time.Minute); err != nil || !ok {
		t.Fatalf("write after the holder let go: %v %v", ok, err)
	}
}

// Transactions that wait for the writer each return only once their rows
// are committed: a reader sees them at once.
func TestWaitingTransactionsReturnCommitted(t *testing.T) {
	db := openSQLite(t)
	release, first := blockWriter(t, db, "first")
	const n = 6
	errs := make(chan error, n)
	for i := range n {
		go func() {
			key := fmt.Sprintf("k%d", i)
			err := db.tx(context.Background(), func(tx *txn) error { return insertLease(context.Background(), db, tx, key) })
			if err == nil && !leaseExists(t, db, key) {
				err = fmt.Errorf("%s: the transaction returned before a reader could see its row", key)
			}
			errs <- err
		}()
	}
	waitWaiting(t, n)
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
}

// Among transactions waiting for the writer, one that fails, fails on a
// statement or panics leaves nothing of its own, and the others' rows are
// committed.
func TestWaitingTransactionFailsAlone(t *testing.T) {
	db := openSQLite(t)
	boom := errors.New("boom")
	release, first := blockWriter(t, db, "first")
	type outcome struct {
		key string
		err error
	}
	members := map[string]func(tx *txn) error{
		"ok1":   func(tx *txn) error { return insertLease(context.Background(), db, tx, "ok1") },
		"fails": func(tx *txn) error { insertLease(context.Background(), db, tx, "fails"); return boom },
		"dup": func(tx *txn) error {
			if err := insertLease(context.Background(), db, tx, "dup"); err != nil {
				return err
			}
			return insertLease(context.Background(), db, tx, "first") // a duplicate key
		},
		"panics": func(tx *txn) error { insertLease(context.Background(), db, tx, "panics"); panic("in a transaction") },
		"ok2":    func(tx *txn) error { return insertLease(context.Background(), db, tx, "ok2") },
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
	waitWaiting(t, len(members))
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

// A caller whose context has ended writes nothing, even with the writer
// free.
func TestWriterRefusesAnEndedContext(t *testing.T) {
	db := openSQLite(t)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := db.AcquireLease(ctx, "k", "me", time.Minute); !errors.Is(err, context.Canceled) {
		t.Fatalf("a write with an ended context returned %v", err)
	}
	if err := db.tx(ctx, func(*txn) error { t.Error("a transaction ran after its context ended"); return nil }); !errors.Is(err, context.Canceled) {
		t.Fatalf("a transaction with an ended context returned %v", err)
	}
	if n := countLeases(t, db); n != 0 {
		t.Fatalf("%d leases written", n)
	}
}

// A transaction whose function fails or panics is rolled back, and the
// writer serves the next one.
func TestWriterRollsBackOnErrorAndPanic(t *testing.T) {
	db := openSQLite(t)
	insert := db.q(`INSERT INTO leases (key, holder, expires_at) VALUES (?, 'h', '2030-01-01')`)
	boom := errors.New("boom")
	err := db.tx(t.Context(), func(tx *txn) error {
		if _, err := db.exec(t.Context(), tx, insert, "a"); err != nil {
			return err
		}
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("tx returned %v, want its function's error", err)
	}
	func() {
		defer func() {
			if recover() == nil {
				t.Fatal("the panic was swallowed")
			}
		}()
		db.tx(t.Context(), func(tx *txn) error {
			if _, err := db.exec(t.Context(), tx, insert, "b"); err != nil {
				return err
			}
			panic("in a transaction")
		})
	}()
	if n := countLeases(t, db); n != 0 {
		t.Fatalf("%d rows of rolled-back transactions are there", n)
	}
	// A failing statement (a duplicate key) rolls back the rows before it.
	if _, err := db.exec(t.Context(), db.x, insert, "c"); err != nil {
		t.Fatal(err)
	}
	err = db.tx(t.Context(), func(tx *txn) error {
		if _, err := db.exec(t.Context(), tx, insert, "d"); err != nil {
			return err
		}
		_, err := db.exec(t.Context(), tx, insert, "c")
		return err
	})
	if err == nil {
		t.Fatal("a duplicate key was accepted")
	}
	if n := countLeases(t, db); n != 1 {
		t.Fatalf("%d leases, want the one written outside the failed transaction", n)
	}
}

// Once a transaction runs, its caller leaving (its context ending) does
// not cut it off half way: it commits whole.
func TestWriterTransactionOutlivesItsCaller(t *testing.T) {
	db := openSQLite(t)
	ctx, cancel := context.WithCancel(t.Context())
	err := db.tx(ctx, func(tx *txn) error {
		for _, k := range []string{"a", "b"} {
			if _, err := db.exec(ctx, tx, db.q(`INSERT INTO leases (key, holder, expires_at) VALUES (?, 'h', '2030-01-01')`), k); err != nil {
				return err
			}
			cancel()
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n := countLeases(t, db); n != 2 {
		t.Fatalf("%d of the transaction's 2 rows were written", n)
	}
}

// Under a stream of writes the WAL is checkpointed (SQLite's own
// checkpoints, in the writing connection) and started over: it stays far
// below what the writes added up to.
func TestWALStaysSmall(t *testing.T) {
	path := filepath.Join(t.TempDir(), "airlock.db")
	db, err := Open(t.Context(), "sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	const n = 3000
	for i := range n {
		if _, err := db.AcquireLease(t.Context(), fmt.Sprintf("k%d", i), strings.Repeat("h", 2000), time.Minute); err != nil {
			t.Fatal(err)
		}
		if i%100 == 0 && !leaseExists(t, db, fmt.Sprintf("k%d", i)) { // readers as well
			t.Fatalf("k%d not read back", i)
		}
	}
	st, err := os.Stat(path + "-wal")
	if err != nil {
		t.Fatal(err)
	}
	// The writes added over 40 MB of pages to the WAL: a WAL that is
	// never started over holds them all (43 MB). SQLite checkpoints every
	// 1000 pages (4 MB) and starts over after.
	if st.Size() > 16<<20 {
		t.Fatalf("the WAL grew to %d bytes", st.Size())
	}
}

// A statement that returns rows, run on the writer as an exec (outside a
// transaction), does not
// hold back the writes after it: readers see them at once.
func TestWriterExecOfARowsStatementHoldsNothingBack(t *testing.T) {
	db := openSQLite(t)
	ctx := t.Context()
	for i, q := range []string{
		`PRAGMA wal_checkpoint(PASSIVE)`,
		`SELECT 1`,
		`UPDATE leases SET holder = 'x' WHERE key = 'k0' RETURNING key`,
	} {
		if i == 2 {
			if _, err := db.AcquireLease(ctx, "k0", "me", time.Minute); err != nil {
				t.Fatal(err)
			}
		}
		for range 2 { // the second run would find a cached statement
			if _, err := db.exec(ctx, db.x, q); err != nil {
				t.Fatalf("%s: %v", q, err)
			}
		}
		key := fmt.Sprintf("after%d", i)
		if _, err := db.AcquireLease(ctx, key, "me", time.Minute); err != nil {
			t.Fatal(err)
		}
		var n int
		if err := db.get(ctx, db.reader(), &n, db.q(`SELECT COUNT(*) FROM leases WHERE key = ?`), key); err != nil {
			t.Fatal(err)
		}
		if n != 1 {
			t.Fatalf("after %q a reader does not see the next write", q)
		}
	}
}

// Closing twice is harmless, and a write after Close fails cleanly.
func TestCloseTwice(t *testing.T) {
	db, err := Open(t.Context(), "sqlite", filepath.Join(t.TempDir(), "airlock.db"))
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if _, err := db.AcquireLease(t.Context(), "k", "me", time.Minute); err == nil {
		t.Fatal("a write after Close succeeded")
	}
}
