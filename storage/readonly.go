package storage

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/jmoiron/sqlx"
)

// AuditSchemaVersion is the first migration whose audit a read-only
// verifier reads (the prune guard of migration 021).
const AuditSchemaVersion = 21

// ErrReadOnly is what a write through a database opened with
// OpenReadOnly fails with, where Airlock can tell before the database does.
var ErrReadOnly = errors.New("the database was opened read-only")

// OpenReadOnly opens the database only to read it (airlock audit verify):
// no migration, no write of any kind. SQLite opens the file read-only
// (mode=ro, query_only; a missing file is an error, never created);
// PostgreSQL's sessions are read-only (default_transaction_read_only). The
// schema must be at AuditSchemaVersion or later: an older one is refused
// with how to migrate it.
func OpenReadOnly(ctx context.Context, driver, dsn string) (*DB, error) {
	var x *sqlx.DB
	switch strings.ToLower(strings.TrimSpace(driver)) {
	case "", "sqlite", "sqlite3":
		driver = DriverSQLite
		ro, path, err := sqliteReadOnlyDSN(dsn)
		if err != nil {
			return nil, err
		}
		if _, err := os.Stat(path); err != nil {
			return nil, fmt.Errorf("open sqlite read-only: %w", err)
		}
		if x, err = sqlx.Open("sqlite3", ro); err != nil {
			return nil, fmt.Errorf("open sqlite read-only: %w", err)
		}
		x.SetMaxOpenConns(2)
	case "postgres", "postgresql", "pgx":
		driver = DriverPostgres
		cfg, err := pgx.ParseConfig(dsn)
		if err != nil {
			return nil, fmt.Errorf("open postgres read-only: %w", err)
		}
		cfg.RuntimeParams["default_transaction_read_only"] = "on"
		x = sqlx.NewDb(stdlib.OpenDB(*cfg), "pgx")
		x.SetMaxOpenConns(2)
	default:
		return nil, fmt.Errorf("open: unknown storage driver %q (want %q or %q)", driver, DriverSQLite, DriverPostgres)
	}
	db := &DB{x: x, r: x, driver: driver, readOnly: true, scrub: func(s string) string { return s }}
	var version int
	if err := x.GetContext(ctx, &version, `SELECT COALESCE(MAX(version), 0) FROM schema_migrations`); err != nil {
		x.Close()
		return nil, fmt.Errorf("open %s read-only: no Airlock database there (%w)", driver, classify(err))
	}
	if version < AuditSchemaVersion {
		x.Close()
		return nil, fmt.Errorf("open %s read-only: the database is at migration %d, older than this release's audit (%d): run `airlock migrate` with this release first", driver, version, AuditSchemaVersion)
	}
	return db, nil
}

// sqliteReadOnlyDSN is dsn (a path or a "file:" URI) as a read-only URI,
// and the file's path.
func sqliteReadOnlyDSN(dsn string) (string, string, error) {
	if strings.TrimSpace(dsn) == "" {
		return "", "", errors.New("open sqlite: empty dsn (want a file path)")
	}
	if sqliteInMemory(dsn) {
		return "", "", errors.New("open sqlite read-only: an in-memory database is only its own process's")
	}
	base, rawQuery, _ := strings.Cut(dsn, "?")
	q, err := url.ParseQuery(rawQuery)
	if err != nil {
		return "", "", fmt.Errorf("open sqlite: parse dsn parameters: %w", err)
	}
	path := strings.TrimPrefix(base, "file:")
	if !strings.HasPrefix(base, "file:") {
		path = base
		base = "file:" + (&url.URL{Path: base}).EscapedPath()
	} else if p, err := url.PathUnescape(path); err == nil {
		path = p
	}
	for k := range q {
		if strings.HasPrefix(k, "_journal") || k == "_txlock" || k == "mode" {
			q.Del(k)
		}
	}
	q.Set("mode", "ro")
	q.Set("_query_only", "1")
	q.Set("_txlock", "deferred")
	if !q.Has("_busy_timeout") && !q.Has("_timeout") {
		q.Set("_busy_timeout", "10000")
	}
	return base + "?" + q.Encode(), path, nil
}

// readTx runs fn in one read-only transaction on the read pool: a
// snapshot (REPEATABLE READ on PostgreSQL; SQLite's read transaction), so
// what fn reads in several statements is one state of the database. It
// never commits.
func (db *DB) readTx(ctx context.Context, fn func(tx dbtx) error) (err error) {
	defer func() { err = classify(err) }()
	opts := &sql.TxOptions{ReadOnly: true}
	if db.driver == DriverPostgres {
		opts.Isolation = sql.LevelRepeatableRead
	}
	tx, err := db.reader().BeginTxx(ctx, opts)
	if err != nil {
		return fmt.Errorf("begin read: %w", err)
	}
	defer tx.Rollback()
	return fn(tx)
}
