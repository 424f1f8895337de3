package storage

import (
	"context"
	"errors"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jmoiron/sqlx"

	"github.com/airlockhq/airlock/internal/ids"
)

const postgresDSNEnv = "AIRLOCK_TEST_POSTGRES_DSN"

func openSQLite(t *testing.T) *DB {
	t.Helper()
	return openDB(t, DriverSQLite, filepath.Join(t.TempDir(), "airlock.db"))
}

func TestSQLite(t *testing.T) {
	runConformance(t, openSQLite)
}

// TestPostgres runs the suite against a real server; each test gets its own
// schema, dropped afterwards.
func TestPostgres(t *testing.T) {
	admin, dsn := postgresAdmin(t)
	// freshSchema returns the DSN of a new empty schema, dropped afterwards.
	freshSchema := func(t *testing.T) string { return postgresSchema(t, admin, dsn) }
	runConformance(t, func(t *testing.T) *DB {
		t.Helper()
		return openDB(t, DriverPostgres, freshSchema(t))
	})
	for _, tc := range dsnTests {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, DriverPostgres, freshSchema(t)) })
	}
}

// dsnTests each open their own database(s) (replicas, an old release's)
// on a DSN they are given: a new file on SQLite (TestSQLiteFile), a new
// schema on PostgreSQL (TestPostgres).
var dsnTests = []struct {
	name string
	fn   func(t *testing.T, driver, dsn string)
}{
	{"ConcurrentOpen", testConcurrentOpen},
	{"MigrateUpgrade", testMigrateUpgrade},
	{"ClockReplicas", testClockReplicas},
	{"OutboxReplicas", testOutboxReplicas},
	{"MigrateCards", testMigrateCards},
	{"EscalateReplicas", testEscalateReplicas},
	{"MigrateOpenBatches", testMigrateOpenBatches},
	{"MigrateIntegrity", testMigrateIntegrity},
	{"AuditChainMigrated", testAuditChainMigrated},
	{"AuditUnchainedStaysNamed", testAuditUnchainedStaysNamed},
	{"RejectedClickReplicas", testRejectedClickReplicas},
	{"CardSyncReplicas", testCardSyncReplicas},
	{"MigrateMessageSync", testMigrateMessageSync},
	{"InboxReplicas", testInboxReplicas},
	{"AnswersReplicas", testAnswersReplicas},
}

func TestSQLiteFile(t *testing.T) {
	for _, tc := range dsnTests {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, DriverSQLite, filepath.Join(t.TempDir(), "airlock.db")) })
	}
}

// testConcurrentOpen opens one fresh database from several "processes" at
// once: every Open succeeds and the migrations are applied once.
func testConcurrentOpen(t *testing.T, driver, dsn string) {
	const n = 6
	dbs, errs := race(n, func(int) (*DB, error) { return Open(t.Context(), driver, dsn) })
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("concurrent Open %d: %v", i, errs[i])
		}
		defer dbs[i].Close()
	}
	ms, err := dbs[0].migrations()
	if err != nil {
		t.Fatal(err)
	}
	var applied int
	if err := dbs[0].x.GetContext(t.Context(), &applied, `SELECT COUNT(*) FROM schema_migrations`); err != nil {
		t.Fatal(err)
	}
	if applied != len(ms) {
		t.Fatalf("schema_migrations has %d rows, want %d", applied, len(ms))
	}
	if _, err := dbs[n-1].Conversation(t.Context(), "p", "c", "t", false); err != nil {
		t.Fatal(err)
	}
}

// postgresAdmin connects to the server at AIRLOCK_TEST_POSTGRES_DSN and
// returns the connection and the DSN, for postgresSchema; the test is
// skipped when the variable is not set.
func postgresAdmin(tb testing.TB) (*sqlx.DB, string) {
	tb.Helper()
	dsn := os.Getenv(postgresDSNEnv)
	if dsn == "" {
		tb.Skipf("%s not set; skipping the PostgreSQL tests (start a server with .ci/postgres.sh)", postgresDSNEnv)
	}
	admin, err := sqlx.Open("pgx", dsn)
	if err != nil {
		tb.Fatalf("open admin connection: %v", err)
	}
	tb.Cleanup(func() { admin.Close() })
	if err := admin.PingContext(tb.Context()); err != nil {
		tb.Fatalf("ping postgres: %v", err)
	}
	return admin, dsn
}

// postgresSchema creates a new empty schema through admin and returns its
// DSN (dsn with that search_path); the schema is dropped when the test ends.
func postgresSchema(tb testing.TB, admin *sqlx.DB, dsn string) string {
	tb.Helper()
	schema := "airlock_test_" + ids.New()[:12]
	if _, err := admin.ExecContext(tb.Context(), `CREATE SCHEMA `+schema); err != nil {
		tb.Fatalf("create schema: %v", err)
	}
	tb.Cleanup(func() {
		if _, err := admin.ExecContext(context.Background(), `DROP SCHEMA `+schema+` CASCADE`); err != nil {
			tb.Errorf("drop schema %s: %v", schema, err)
		}
	})
	return withSearchPath(tb, dsn, schema)
}

// withSearchPath adds a search_path runtime parameter to a URL or
// key=value DSN.
func withSearchPath(tb testing.TB, dsn, schema string) string {
	tb.Helper()
	if !strings.Contains(dsn, "://") {
		return dsn + " search_path=" + schema
	}
	u, err := url.Parse(dsn)
	if err != nil {
		tb.Fatalf("parse %s: %v", postgresDSNEnv, err)
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String()
}

func TestOpenUnknownDriver(t *testing.T) {
	_, err := Open(t.Context(), "mysql", "whatever")
	if err == nil || !strings.Contains(err.Error(), `"mysql"`) {
		t.Fatalf("Open(mysql) error = %v, want one naming the driver", err)
	}
}

func TestOpenDefaultDriverIsSQLite(t *testing.T) {
	db, err := Open(t.Context(), "", filepath.Join(t.TempDir(), "default.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if db.Driver() != DriverSQLite {
		t.Fatalf("Driver() = %q, want %q", db.Driver(), DriverSQLite)
	}
	var mode string
	if err := db.x.GetContext(t.Context(), &mode, `PRAGMA journal_mode`); err != nil {
		t.Fatal(err)
	}
	if mode != "wal" {
		t.Errorf("journal_mode = %q, want wal", mode)
	}
	var fk int
	if err := db.x.GetContext(t.Context(), &fk, `PRAGMA foreign_keys`); err != nil {
		t.Fatal(err)
	}
	if fk != 1 {
		t.Errorf("foreign_keys = %d, want 1", fk)
	}
}

func TestOpenSQLiteFileURI(t *testing.T) {
	p := filepath.Join(t.TempDir(), "uri.db")
	db, err := Open(t.Context(), "sqlite", "file:"+p+"?_busy_timeout=2000")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var timeout int
	if err := db.x.GetContext(t.Context(), &timeout, `PRAGMA busy_timeout`); err != nil {
		t.Fatal(err)
	}
	if timeout != 2000 {
		t.Errorf("busy_timeout = %d, want the given 2000", timeout)
	}
	if _, err := os.Stat(p); err != nil {
		t.Errorf("database file not created at %s: %v", p, err)
	}
}

func TestSQLiteDSN(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []string
		not  []string
	}{
		{in: "/data/airlock.db", want: []string{"/data/airlock.db?", "_journal_mode=WAL", "_busy_timeout=10000", "_foreign_keys=on", "_txlock=immediate"}},
		{in: "file:/data/a.db?_timeout=5", want: []string{"file:/data/a.db?", "_timeout=5", "_txlock=immediate"}, not: []string{"_busy_timeout"}},
		{in: "a.db?_txlock=exclusive&mode=rwc", want: []string{"_txlock=exclusive", "mode=rwc", "_foreign_keys=on"}, not: []string{"immediate"}},
	} {
		got, err := sqliteDSN(tc.in)
		if err != nil {
			t.Errorf("sqliteDSN(%q): %v", tc.in, err)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(got, w) {
				t.Errorf("sqliteDSN(%q) = %q, want it to contain %q", tc.in, got, w)
			}
		}
		for _, n := range tc.not {
			if strings.Contains(got, n) {
				t.Errorf("sqliteDSN(%q) = %q, want no %q", tc.in, got, n)
			}
		}
	}
	if _, err := sqliteDSN(""); err == nil {
		t.Error("sqliteDSN(\"\") = nil error, want one")
	}
}

func TestOpenBadPostgresFails(t *testing.T) {
	_, err := Open(t.Context(), "postgres", "postgres://nobody@127.0.0.1:1/none?sslmode=disable&connect_timeout=2")
	if err == nil {
		t.Fatal("Open on a closed port succeeded")
	}
	if errors.Is(err, context.Canceled) {
		t.Fatalf("unexpected cancel: %v", err)
	}
}
