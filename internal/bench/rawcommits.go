package bench

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/airlockhq/airlock/storage"
)

// sqliteRawDSN opens a scratch SQLite file as Airlock's storage does: WAL,
// synchronous=NORMAL, a busy timeout, foreign keys and immediate
// transactions.
func sqliteRawDSN(path string) string {
	return "file:" + path + "?_journal_mode=WAL&_synchronous=NORMAL&_busy_timeout=10000&_foreign_keys=on&_txlock=immediate"
}

// rawCommits measures the database's bare write rate, the baseline the
// bench sets Airlock's decision rate against: n transactions of one small
// INSERT each, one after another on one connection. It returns commits
// per second. On SQLite path names a scratch file (the table
// airlock_raw_commits is created in it); on PostgreSQL dsn is the server
// and a temporary table is used, so nothing is left behind.
func rawCommits(ctx context.Context, driver, dsn string, n int) (float64, error) {
	if n <= 0 {
		return 0, errors.New("raw commits: n must be positive")
	}
	var name, create string
	switch driver {
	case storage.DriverSQLite:
		name, dsn = "sqlite3", sqliteRawDSN(dsn)
		create = `CREATE TABLE IF NOT EXISTS airlock_raw_commits (id INTEGER PRIMARY KEY, v TEXT NOT NULL, at TEXT NOT NULL)`
	case storage.DriverPostgres:
		name = "pgx"
		create = `CREATE TEMP TABLE airlock_raw_commits (id BIGSERIAL PRIMARY KEY, v TEXT NOT NULL, at TEXT NOT NULL)`
	default:
		return 0, fmt.Errorf("raw commits: unknown storage driver %q", driver)
	}
	x, err := sqlx.Open(name, dsn)
	if err != nil {
		return 0, fmt.Errorf("raw commits: %w", err)
	}
	defer x.Close()
	x.SetMaxOpenConns(1) // one connection: a temporary table lives in it
	if _, err := x.ExecContext(ctx, create); err != nil {
		return 0, fmt.Errorf("raw commits: create table: %w", err)
	}
	insert := x.Rebind(`INSERT INTO airlock_raw_commits (v, at) VALUES (?, ?)`)
	start := time.Now()
	for range n {
		tx, err := x.BeginTxx(ctx, nil)
		if err != nil {
			return 0, fmt.Errorf("raw commits: begin: %w", err)
		}
		if _, err := tx.ExecContext(ctx, insert, "decided", time.Now().UTC().Format(time.RFC3339Nano)); err != nil {
			tx.Rollback()
			return 0, fmt.Errorf("raw commits: insert: %w", err)
		}
		if err := tx.Commit(); err != nil {
			return 0, fmt.Errorf("raw commits: commit: %w", err)
		}
	}
	return float64(n) / time.Since(start).Seconds(), nil
}
