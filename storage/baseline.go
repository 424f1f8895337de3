package storage

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jmoiron/sqlx"
)

// RawCommits measures the database's bare write rate, the baseline
// `airlock bench` sets Airlock's decision rate against: n transactions of
// one small INSERT each, one after another on one connection, opened with
// the same settings Open uses (on SQLite the same pragmas: WAL,
// synchronous=NORMAL, busy timeout, immediate transactions). It returns
// commits per second. On SQLite dsn should name a scratch file (the table
// airlock_raw_commits is created in it); on PostgreSQL a temporary table
// is used, so nothing is left behind.
func RawCommits(ctx context.Context, driver, dsn string, n int) (float64, error) {
	if n <= 0 {
		return 0, errors.New("raw commits: n must be positive")
	}
	var (
		name, create string
		err          error
	)
	switch strings.ToLower(strings.TrimSpace(driver)) {
	case "", "sqlite", "sqlite3":
		name = "sqlite3"
		if dsn, err = sqliteDSN(dsn); err != nil {
			return 0, err
		}
		create = `CREATE TABLE IF NOT EXISTS airlock_raw_commits (id INTEGER PRIMARY KEY, v TEXT NOT NULL, at TEXT NOT NULL)`
	case "postgres", "postgresql", "pgx":
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
	for i := 0; i < n; i++ {
		tx, err := x.BeginTxx(ctx, nil)
		if err != nil {
			return 0, fmt.Errorf("raw commits: begin: %w", err)
		}
		if _, err := tx.ExecContext(ctx, insert, "decided", time.Now().UTC().Format(sqliteTimeLayout)); err != nil {
			tx.Rollback()
			return 0, fmt.Errorf("raw commits: insert: %w", err)
		}
		if err := tx.Commit(); err != nil {
			return 0, fmt.Errorf("raw commits: commit: %w", err)
		}
	}
	return float64(n) / time.Since(start).Seconds(), nil
}
