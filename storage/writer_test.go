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

	"github.com/jmoiron/sqlx"
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

// A write waiting for the held writer gives up when its context ends,
// having written nothing; once the holder lets go, writes go through.
func TestWriterWaitEndsWithContext(t *testing.T) {
	db := openSQLite(t)
	holding, release := make(chan struct{}), make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- db.w.do(context.Background(), func(*held) error {
			close(holding)
			<-release
			return nil
		})
	}()
	<-holding
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
	err = db.tx(ctx, func(tx dbtx) error { t.Error("a transaction ran after its context ended"); return nil })
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a transaction waiting for a held writer returned %v", err)
	}
	if n := db.w.waiting.Load(); n != 0 {
		t.Fatalf("%d callers counted as waiting after both gave up", n)
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if n := countLeases(t, db); n != 0 {
		t.Fatalf("%d leases written by writes that gave up", n)
	}
	if ok, err := db.AcquireLease(t.Context(), "k", "me", time.Minute); err != nil || !ok {
		t.Fatalf("write after the holder let go: %v %v", ok, err)
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
	if err := db.tx(ctx, func(dbtx) error { t.Error("a transaction ran after its context ended"); return nil }); !errors.Is(err, context.Canceled) {
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
	err := db.tx(t.Context(), func(tx dbtx) error {
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
		db.tx(t.Context(), func(tx dbtx) error {
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
	err = db.tx(t.Context(), func(tx dbtx) error {
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
	err := db.tx(ctx, func(tx dbtx) error {
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

// A writer connection that went bad is replaced: the statement that found
// it bad fails, the next write succeeds.
func TestWriterReplacesABrokenConnection(t *testing.T) {
	db := openSQLite(t)
	if _, err := db.AcquireLease(t.Context(), "a", "me", time.Minute); err != nil {
		t.Fatal(err)
	}
	err := db.w.do(t.Context(), func(h *held) error {
		h.w.conn.Close() // as if the driver had lost it
		_, err := h.ExecContext(t.Context(), `DELETE FROM leases`)
		return err
	})
	if err == nil {
		t.Fatal("a statement on a closed connection succeeded")
	}
	if ok, err := db.AcquireLease(t.Context(), "b", "me", time.Minute); err != nil || !ok {
		t.Fatalf("write after the connection broke: %v %v", ok, err)
	}
	if n := countLeases(t, db); n != 2 {
		t.Fatalf("%d leases, want 2", n)
	}
}

// Under a stream of writes the checkpointer, not the writer, copies the
// WAL into the database: the writer's own threshold is the backstop,
// checkpoints run beside it, and the WAL file stays far below what the
// writes added up to.
func TestCheckpointsRunBesideTheWriter(t *testing.T) {
	path := filepath.Join(t.TempDir(), "airlock.db")
	db, err := Open(t.Context(), "sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var own int
	if err := db.w.do(t.Context(), func(h *held) error {
		return sqlx.GetContext(t.Context(), h, &own, `PRAGMA wal_autocheckpoint`)
	}); err != nil {
		t.Fatal(err)
	}
	if own != writerCheckpointPages {
		t.Fatalf("the writer checkpoints itself every %d pages, want %d", own, writerCheckpointPages)
	}
	const n = 3000
	for i := range n {
		if _, err := db.AcquireLease(t.Context(), fmt.Sprintf("k%d", i), strings.Repeat("h", 2000), time.Minute); err != nil {
			t.Fatal(err)
		}
	}
	// How many checkpoints ran depends on the machine's load (they run
	// beside the writer); at least one must have, and the WAL's size
	// below is what a user notices.
	if got := db.w.ckptCount.Load(); got == 0 {
		t.Fatalf("no checkpoint ran beside %d writes", n)
	}
	st, err := os.Stat(path + "-wal")
	if err != nil {
		t.Fatal(err)
	}
	// The writes added over 40 MB of pages to the WAL: a WAL that is
	// never started over (checkpoints that never catch up) holds them all
	// (43 MB). Started over, it stayed at 5–12 MB here; the margin is for
	// a checkpointer slowed by a busy machine.
	if st.Size() > 28<<20 {
		t.Fatalf("the WAL grew to %d bytes", st.Size())
	}
}

// An idle writer is not checkpointed every second; once written to, it
// is within about a second.
func TestCheckpointsSkipAnIdleWriter(t *testing.T) {
	db := openSQLite(t)
	time.Sleep(checkpointInterval + checkpointInterval/4)
	if n := db.w.ckptCount.Load(); n != 0 {
		t.Fatalf("%d checkpoints of a writer nobody used", n)
	}
	if _, err := db.AcquireLease(t.Context(), "k", "me", time.Minute); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(3 * checkpointInterval)
	for db.w.ckptCount.Load() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("no checkpoint after a write")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A statement that returns rows, run on the writer as an exec, does not
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

// A write an acknowledgement waits on (withUrgent) is served as soon as
// the writer's holder lets go, ahead of the writes that waited longer,
// and its transaction commits at once.
func TestWriterServesUrgentFirst(t *testing.T) {
	db := openSQLite(t)
	holding, release := make(chan struct{}), make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- db.w.do(context.Background(), func(*held) error {
			close(holding)
			<-release
			return nil
		})
	}()
	<-holding
	order := make(chan string, 4)
	for i := range 3 {
		go func() {
			_ = db.tx(context.Background(), func(dbtx) error { order <- fmt.Sprintf("waited %d", i); return nil })
		}()
		for db.w.waiting.Load() != int32(i+1) {
			time.Sleep(time.Millisecond)
		}
	}
	urgent := make(chan error, 1)
	go func() {
		urgent <- db.tx(withUrgent(context.Background()), func(dbtx) error { order <- "urgent"; return nil })
	}()
	for db.w.urgent.Load() != 1 {
		time.Sleep(time.Millisecond)
	}
	time.Sleep(50 * time.Millisecond) // let it block in its wait
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if first := <-order; first != "urgent" {
		t.Fatalf("after the holder let go, %q ran first; want the urgent write", first)
	}
	if err := <-urgent; err != nil {
		t.Fatal(err)
	}
	for range 3 {
		<-order
	}
	if n := db.w.urgent.Load(); n != 0 {
		t.Fatalf("%d urgent callers counted after all were served", n)
	}
}
