// Package storage owns Airlock's durable state in SQLite or PostgreSQL:
// conversations and their messages, paused batches with their calls,
// decisions, runs, edits and card messages, grants, leases and reminders,
// escalations, the platform event ids already seen and the inbox of
// deliveries, answers to be posted, runbook runs and their steps, the
// card messages' sync state, the append-only, hash-chained audit log
// with its checkpoints, and the webhook outbox written in the audit
// row's transaction. It
// implements confirm.Store; every transition is one conditional UPDATE
// whose affected-row count decides who won.
package storage

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"path"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // registers "pgx"
	"github.com/jmoiron/sqlx"
	"github.com/mattn/go-sqlite3" // registers "sqlite3"

	"github.com/airlockhq/airlock/confirm"
)

// Driver names accepted by Open.
const (
	DriverSQLite   = "sqlite"
	DriverPostgres = "postgres"
)

// ErrNotRunning is returned by FinishRun when the call's run is not running.
var ErrNotRunning = errors.New("call is not running")

//go:embed migrations/sqlite/*.sql migrations/postgres/*.sql
var migrationFS embed.FS

// migrationLockKey is the pg_advisory_xact_lock key serialising migrations
// of processes starting at once.
const migrationLockKey int64 = 0x6169726c6f636b // "airlock"

// DB is the SQL store. It is safe for concurrent use.
//
// On SQLite, writes and transactions go through x, a database/sql pool of
// exactly one connection: SQLite takes one writer at a time, and writers
// wait for it in Go, first come first served (writerTurn), woken when it
// is free, rather than in SQLite's busy handler, which sleeps. Reads
// outside transactions go through r, read-only connections that WAL lets
// read while the writer writes. An in-memory database has x alone. On
// PostgreSQL, r is x.
type DB struct {
	x      *sqlx.DB      // writes and transactions (SQLite: see above)
	r      *sqlx.DB      // reads outside transactions
	ck     *sqlx.DB      // SQLite file: the WAL checkpoints' connection (walcheckpoint.go)
	turn   chan struct{} // SQLite: the writer's turn (writerTurn)
	driver string        // DriverSQLite or DriverPostgres
	clock  clock         // the database's clock, as measured by SyncClock
	// batchQueries holds loadBatch's statements by condition.
	batchQueries sync.Map
	// webhooks are the targets every audit row is queued for (SetWebhooks).
	webhooks atomic.Pointer[[]WebhookTarget]
	// scrub removes secrets from the tool_call audit detail and webhook
	// bodies (WithScrub); the identity by default.
	scrub func(string) string
	// readOnly: opened with OpenReadOnly; every write transaction is
	// refused (ErrReadOnly).
	readOnly bool
	// recording gathers the inbox's records waiting for SQLite's writer
	// (see RecordInbox).
	recording recording
	// mac MACs the audit rows this store writes (WithAuditKey); nil: none.
	mac *AuditMAC
	// onAlarm is told of a chain head Airlock did not write (OnAuditAlarm).
	onAlarm atomic.Pointer[func(AuditAlarm)]
}

// Option is an option of Open.
type Option func(*DB)

// WithScrub makes storage remove secrets with scrub (e.g. the redactor of
// the config's ${ENV} values) from what it writes for people and other
// systems: the tool_call audit event's arguments and read-back, and every
// webhook body. The calls' arguments are stored exactly as they run.
func WithScrub(scrub func(string) string) Option {
	return func(db *DB) {
		if scrub != nil {
			db.scrub = scrub
		}
	}
}

var _ confirm.Store = (*DB)(nil)

// Open connects to the database and applies pending migrations. driver is
// "sqlite" (the default when empty; dsn is a file path or a "file:" URI) or
// "postgres" (dsn is a libpq URL or key=value string, opened with pgx).
func Open(ctx context.Context, driver, dsn string, opts ...Option) (*DB, error) {
	var (
		name string
		err  error
	)
	switch strings.ToLower(strings.TrimSpace(driver)) {
	case "", "sqlite", "sqlite3":
		driver, name = DriverSQLite, "sqlite3"
		dsn, err = sqliteDSN(dsn)
		if err != nil {
			return nil, err
		}
	case "postgres", "postgresql", "pgx":
		driver, name = DriverPostgres, "pgx"
		if dsn == "" {
			return nil, errors.New("open postgres: empty dsn")
		}
	default:
		return nil, fmt.Errorf("open: unknown storage driver %q (want %q or %q)", driver, DriverSQLite, DriverPostgres)
	}
	xdsn := dsn
	if driver == DriverSQLite && !sqliteInMemory(dsn) {
		xdsn = sqliteWriterDSN(dsn)
	}
	x, err := sqlx.Open(name, xdsn)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", driver, err)
	}
	if driver == DriverSQLite {
		// The one writer (see DB).
		x.SetMaxOpenConns(1)
		x.SetMaxIdleConns(1)
	} else {
		// Keep connections for bursts of clicks instead of dialling anew
		// (database/sql keeps only 2 idle by default).
		x.SetMaxOpenConns(32)
		x.SetMaxIdleConns(32)
		x.SetConnMaxIdleTime(5 * time.Minute)
	}
	db := &DB{x: x, r: x, driver: driver, scrub: func(s string) string { return s }}
	if driver == DriverSQLite {
		db.turn = make(chan struct{}, 1)
	}
	for _, opt := range opts {
		opt(db)
	}
	if err := db.connect(ctx); err != nil {
		x.Close()
		return nil, fmt.Errorf("open %s: %w", driver, err)
	}
	if err := db.Migrate(ctx); err != nil {
		x.Close()
		return nil, err
	}
	if driver == DriverSQLite {
		if err := db.probeWrite(ctx); err != nil {
			x.Close()
			return nil, fmt.Errorf("open %s: %s can't be written: %w", driver, sqlitePath(dsn), err)
		}
	}
	if driver == DriverSQLite && !sqliteInMemory(dsn) {
		// Opened after the migrations made the file and put it in WAL mode.
		r, err := sqlx.Open(name, sqliteReaderDSN(dsn))
		if err != nil {
			x.Close()
			return nil, fmt.Errorf("open %s readers: %w", driver, err)
		}
		r.SetMaxOpenConns(sqliteReaders)
		r.SetMaxIdleConns(sqliteReaders)
		db.r = r
		if !db.readOnly {
			if err := db.openCheckpointer(ctx, name, dsn); err != nil {
				db.Close()
				return nil, fmt.Errorf("open %s checkpoints: %w", driver, err)
			}
		}
	}
	return db, nil
}

// probeWrite takes SQLite's write lock and writes nothing: a file that
// can't be written (read-only, on a read-only mount, opened mode=ro) fails
// here, at start, rather than at the first click.
func (db *DB) probeWrite(ctx context.Context) error {
	return db.tx(ctx, func(tx *txn) error {
		_, err := db.exec(ctx, tx, `UPDATE schema_migrations SET version = version WHERE version < 0`)
		return err
	})
}

// sqlitePath is the file a SQLite DSN names, for messages.
func sqlitePath(dsn string) string {
	path, _, _ := strings.Cut(strings.TrimPrefix(dsn, "file:"), "?")
	return path
}

// sqliteReaders is the size of the SQLite read pool: enough to keep the
// cores busy; each connection has its own page cache.
const sqliteReaders = 4

// sqliteReaderDSN is the writer's DSN for a read-only connection: its
// transactions are deferred (they take no write lock), query_only makes a
// write through it an error rather than a second writer, and its page
// cache is 512 KiB unless the DSN says: a reader's cache is emptied
// whenever another connection has written since its last read, which
// under load is before nearly every read, so a larger one only holds
// memory.
func sqliteReaderDSN(dsn string) string {
	return sqlitePoolDSN(dsn, "-512", map[string]string{"_txlock": "deferred", "_query_only": "1"})
}

// sqliteWriterDSN is the DSN of the writer connection: its page cache is
// 1 MiB unless the DSN says (SQLite's default is 2,000 KiB): the writer's
// cache is the only one that survives commits, and what it keeps hot is
// small (the interior pages of the indexes and the newest leaves).
func sqliteWriterDSN(dsn string) string { return sqlitePoolDSN(dsn, "-1024", nil) }

// sqlitePoolDSN is dsn (as sqliteDSN made it) for one pool: its page
// cache is cache (_cache_size) unless dsn sets one, and the parameters
// in set replace dsn's.
func sqlitePoolDSN(dsn, cache string, set map[string]string) string {
	base, rawQuery, _ := strings.Cut(dsn, "?")
	q, _ := url.ParseQuery(rawQuery) // made by sqliteDSN
	for k, v := range set {
		q.Set(k, v)
	}
	if !q.Has("_cache_size") {
		q.Set("_cache_size", cache)
	}
	return base + "?" + q.Encode()
}

// sqliteInMemory reports whether the DSN names an in-memory database,
// which each connection would see as its own: then there is no read pool.
func sqliteInMemory(dsn string) bool {
	return strings.Contains(dsn, ":memory:") || strings.Contains(dsn, "mode=memory")
}

// sqliteDSN turns a plain path (or a DSN that already has "file:" or
// parameters) into a go-sqlite3 DSN with WAL, a busy timeout, foreign keys,
// immediate write transactions, synchronous=NORMAL and go-sqlite3's cache
// of up to 256 compiled statements a connection (SQLite compiling every
// statement at every run was the most of a decision's time in storage:
// BENCHMARKS.md, issue 35), keeping parameters already given.
func sqliteDSN(dsn string) (string, error) {
	if strings.TrimSpace(dsn) == "" {
		return "", errors.New("open sqlite: empty dsn (want a file path)")
	}
	base, rawQuery, _ := strings.Cut(dsn, "?")
	q, err := url.ParseQuery(rawQuery)
	if err != nil {
		return "", fmt.Errorf("open sqlite: parse dsn parameters: %w", err)
	}
	set := func(value string, keys ...string) {
		for _, k := range keys {
			if q.Has(k) {
				return
			}
		}
		q.Set(keys[0], value)
	}
	set("WAL", "_journal_mode", "_journal")
	set("10000", "_busy_timeout", "_timeout")
	set("on", "_foreign_keys", "_fk")
	set("immediate", "_txlock")
	set("NORMAL", "_synchronous", "_sync")
	set("256", "_stmt_cache_size")
	return base + "?" + q.Encode(), nil
}

// connect makes the first connection. Several processes creating one new
// SQLite file at once can find it locked while one of them switches it to
// WAL, which SQLite reports at once rather than through the busy timeout;
// that is retried for a while.
func (db *DB) connect(ctx context.Context) error {
	deadline := time.Now().Add(10 * time.Second)
	for wait := 5 * time.Millisecond; ; wait = min(2*wait, 200*time.Millisecond) {
		err := db.x.PingContext(ctx)
		if err == nil || db.driver != DriverSQLite || !sqliteBusy(err) || time.Now().After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(wait):
		}
	}
}

func sqliteBusy(err error) bool {
	var se sqlite3.Error
	return errors.As(err, &se) && (se.Code == sqlite3.ErrBusy || se.Code == sqlite3.ErrLocked)
}

// Driver returns "sqlite" or "postgres".
func (db *DB) Driver() string { return db.driver }

// Ping checks the database answers.
func (db *DB) Ping(ctx context.Context) error {
	if err := db.x.PingContext(ctx); err != nil {
		return fmt.Errorf("ping: %w", classify(err))
	}
	return nil
}

// reader is the pool for reads outside transactions.
func (db *DB) reader() *sqlx.DB {
	if db.r != nil {
		return db.r
	}
	return db.x
}

// Close closes the connection pools.
func (db *DB) Close() error {
	if db.r != nil && db.r != db.x {
		db.r.Close()
	}
	if db.ck != nil {
		db.ck.Close()
	}
	return db.x.Close()
}

type migration struct {
	version int
	name    string
	sql     string
}

func (db *DB) migrations() ([]migration, error) {
	dir := "migrations/" + db.driver
	entries, err := fs.ReadDir(migrationFS, dir)
	if err != nil {
		return nil, err
	}
	var ms []migration
	seen := map[int]string{}
	for _, e := range entries {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".sql") {
			continue
		}
		digits, _, _ := strings.Cut(e.Name(), "_")
		v, err := strconv.Atoi(digits)
		if err != nil || v <= 0 {
			return nil, fmt.Errorf("migration %s: name must start with a positive number and '_'", e.Name())
		}
		if other, dup := seen[v]; dup {
			return nil, fmt.Errorf("migrations %s and %s share version %d", other, e.Name(), v)
		}
		seen[v] = e.Name()
		b, err := migrationFS.ReadFile(path.Join(dir, e.Name()))
		if err != nil {
			return nil, err
		}
		ms = append(ms, migration{version: v, name: e.Name(), sql: string(b)})
	}
	sort.Slice(ms, func(i, j int) bool { return ms[i].version < ms[j].version })
	return ms, nil
}

// Migrate applies the embedded migrations not yet recorded in
// schema_migrations, in order, in one transaction. It is idempotent, and on
// PostgreSQL it holds an advisory lock so concurrent starters don't race.
func (db *DB) Migrate(ctx context.Context) error { return db.migrateTo(ctx, 0) }

// migrateTo is Migrate applying only versions up to last (all when 0);
// tests use it to build a database as an older release left it.
func (db *DB) migrateTo(ctx context.Context, last int) error {
	ms, err := db.migrations()
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	err = db.tx(ctx, func(tx *txn) error {
		if db.driver == DriverPostgres {
			if _, err := tx.ExecContext(ctx, `SELECT pg_advisory_xact_lock($1)`, migrationLockKey); err != nil {
				return fmt.Errorf("lock: %w", err)
			}
		}
		if _, err := tx.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
			version    INTEGER PRIMARY KEY,
			name       TEXT NOT NULL,
			applied_at TEXT NOT NULL
		)`); err != nil {
			return fmt.Errorf("create schema_migrations: %w", err)
		}
		var applied []int
		if err := sqlx.SelectContext(ctx, tx, &applied, `SELECT version FROM schema_migrations`); err != nil {
			return fmt.Errorf("read schema_migrations: %w", err)
		}
		done := map[int]bool{}
		for _, v := range applied {
			done[v] = true
		}
		for _, m := range ms {
			if done[m.version] || (last > 0 && m.version > last) {
				continue
			}
			if _, err := tx.ExecContext(ctx, m.sql); err != nil {
				return fmt.Errorf("apply %s: %w", m.name, err)
			}
			if m.version == auditChainMigration {
				// The rows written before the chain are chained here, in
				// the migration's transaction, and never later
				// (docs/audit.md): a row that turns up without hashes afterwards
				// was written outside Airlock and stays unchained.
				if err := db.chainPreChain(ctx, tx); err != nil {
					return fmt.Errorf("apply %s: %w", m.name, err)
				}
			}
			if _, err := tx.ExecContext(ctx, db.q(`INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)`),
				m.version, m.name, time.Now().UTC().Format(time.RFC3339Nano)); err != nil {
				return fmt.Errorf("record %s: %w", m.name, err)
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("migrate %s: %w", db.driver, err)
	}
	return nil
}

// q rewrites ? placeholders for the driver.
func (db *DB) q(query string) string { return db.x.Rebind(query) }

// sqliteTimeLayout is fixed width in UTC so text comparison is time order.
const sqliteTimeLayout = "2006-01-02T15:04:05.000000000Z07:00"

// timePrecision is what both dialects keep of a time (PostgreSQL's
// timestamptz resolution), so a time reads back the same from either.
const timePrecision = time.Microsecond

// utc normalises a time as stored: UTC, truncated to timePrecision.
func utc(t time.Time) time.Time { return t.UTC().Truncate(timePrecision) }

// ts converts a time for binding: fixed-width UTC text on SQLite, UTC
// time.Time on PostgreSQL.
func (db *DB) ts(t time.Time) any {
	t = utc(t)
	if db.driver == DriverSQLite {
		return t.Format(sqliteTimeLayout)
	}
	return t
}

// nts is ts with the zero time stored as NULL.
func (db *DB) nts(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return db.ts(t)
}

// dbTime scans a stored time from either dialect; NULL scans as zero.
type dbTime struct{ t time.Time }

func (d *dbTime) Scan(v any) error {
	switch x := v.(type) {
	case nil:
		d.t = time.Time{}
	case time.Time:
		d.t = x.UTC()
	case string:
		return d.parse(x)
	case []byte:
		return d.parse(string(x))
	default:
		return fmt.Errorf("scan time: unsupported type %T", v)
	}
	return nil
}

func (d *dbTime) parse(s string) error {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return fmt.Errorf("scan time: %w", err)
	}
	d.t = t.UTC()
	return nil
}

// ptr returns nil for the zero time.
func (d dbTime) ptr() *time.Time {
	if d.t.IsZero() {
		return nil
	}
	t := d.t
	return &t
}

// notFound maps sql.ErrNoRows to confirm.ErrNotFound.
func notFound(err error) error {
	if errors.Is(err, sql.ErrNoRows) {
		return confirm.ErrNotFound
	}
	return err
}
