package storage

import (
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// SQLite has one writer connection and a separate pool of read-only
// connections: a write through a reader is refused, not a second writer.
func TestSQLiteOneWriterReadOnlyReaders(t *testing.T) {
	db := openSQLite(t)
	if n := db.x.Stats().MaxOpenConnections; n != 1 {
		t.Fatalf("writer pool has %d connections, want 1", n)
	}
	if db.r == nil || db.r == db.x {
		t.Fatal("no separate read pool")
	}
	if n := db.r.Stats().MaxOpenConnections; n != sqliteReaders {
		t.Fatalf("read pool has %d connections, want %d", n, sqliteReaders)
	}
	if _, err := db.r.ExecContext(t.Context(), `DELETE FROM leases`); err == nil {
		t.Fatal("a write through the read pool succeeded")
	}
	// Reads after a write see it at once.
	conv, err := db.Conversation(t.Context(), "slack", "C1", "1.2", false)
	if err != nil {
		t.Fatal(err)
	}
	got, err := db.ConversationByID(t.Context(), conv.ID)
	if err != nil || got.Channel != "C1" {
		t.Fatalf("read after write: %+v, %v", got, err)
	}
}

func TestSQLiteReaderDSN(t *testing.T) {
	w, err := sqliteDSN("/data/a.db?mode=rwc")
	if err != nil {
		t.Fatal(err)
	}
	r := sqliteReaderDSN(w)
	for _, want := range []string{"/data/a.db?", "_txlock=deferred", "_query_only=1", "_cache_size=-512", "mode=rwc", "_journal_mode=WAL", "_busy_timeout=10000"} {
		if !strings.Contains(r, want) {
			t.Errorf("reader DSN %q lacks %q", r, want)
		}
	}
	if strings.Contains(r, "immediate") {
		t.Errorf("reader DSN %q takes immediate (write) transactions", r)
	}
	r = sqliteReaderDSN(w + "&_cache_size=-4000")
	if !strings.Contains(r, "_cache_size=-4000") {
		t.Errorf("reader DSN %q dropped the DSN's cache size", r)
	}
}

// The writer's page cache is 1 MiB unless the DSN says, and the
// connection really has it.
func TestSQLiteWriterCache(t *testing.T) {
	w, err := sqliteDSN("/data/a.db?mode=rwc")
	if err != nil {
		t.Fatal(err)
	}
	if got := sqliteWriterDSN(w); !strings.Contains(got, "_cache_size=-1024") || !strings.Contains(got, "_txlock=immediate") {
		t.Errorf("writer DSN %q", got)
	}
	if got := sqliteWriterDSN(w + "&_cache_size=-4000"); !strings.Contains(got, "_cache_size=-4000") || strings.Contains(got, "-1024") {
		t.Errorf("writer DSN %q does not keep the DSN's cache size", got)
	}
	db := openSQLite(t)
	var size int
	if err := db.get(t.Context(), db.x, &size, `PRAGMA cache_size`); err != nil {
		t.Fatal(err)
	}
	if size != -1024 {
		t.Fatalf("the writer's cache_size is %d, want -1024", size)
	}
}

// An in-memory database is one connection's: it has no read pool, and
// what is written is read back.
func TestSQLiteInMemory(t *testing.T) {
	db, err := Open(t.Context(), "sqlite", "file:airlock?mode=memory")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if db.reader() != db.x {
		t.Fatal("an in-memory database got a read pool")
	}
	conv, err := db.Conversation(t.Context(), "slack", "C1", "1.2", false)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.ConversationByID(t.Context(), conv.ID); err != nil {
		t.Fatal(err)
	}
}

// Many goroutines writing and reading at once through one writer
// connection neither deadlock nor fail.
func TestSQLiteConcurrentWritersOneConnection(t *testing.T) {
	db := openDB(t, DriverSQLite, filepath.Join(t.TempDir(), "c.db"))
	raceAll(t, 16, func(g int) error {
		for i := range 20 {
			conv, err := db.Conversation(t.Context(), "slack", "C", time.Now().Format(time.RFC3339Nano)+string(rune('a'+g))+string(rune('a'+i)), false)
			if err != nil {
				return err
			}
			if _, err := db.AcquireLease(t.Context(), "k", "h", time.Second); err != nil {
				return err
			}
			if _, err := db.Messages(t.Context(), conv.ID); err != nil {
				return err
			}
		}
		return nil
	})
}

// On SQLite a parameter is written +? (see stable), never inside a string
// literal; PostgreSQL's queries are left as they are.
func TestStableParams(t *testing.T) {
	db := &DB{driver: DriverSQLite}
	for in, want := range map[string]string{
		`SELECT a FROM t WHERE b = ? AND c IN (?, ?)`: `SELECT a FROM t WHERE b = +? AND c IN (+?, +?)`,
		`SELECT '?', x FROM t WHERE y = ? LIMIT ?`:    `SELECT '?', x FROM t WHERE y = +? LIMIT +?`,
		`SELECT 'it''s ?' WHERE z = ?`:                `SELECT 'it''s ?' WHERE z = +?`,
		`SELECT 1`:                                    `SELECT 1`,
	} {
		if got := db.stable(in); got != want {
			t.Errorf("stable(%q) = %q, want %q", in, got, want)
		}
	}
	pg := &DB{driver: DriverPostgres}
	if got := pg.stable(`SELECT $1`); got != `SELECT $1` {
		t.Errorf("PostgreSQL query changed: %q", got)
	}
}
