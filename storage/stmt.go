package storage

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"sync"

	"github.com/jmoiron/sqlx"
)

// Prepared statements (SQLite). go-sqlite3 compiles every statement it is
// handed anew; exec, get and sel run a statement prepared once per
// connection instead (through sqlx), reused inside transactions
// (Tx.StmtxContext). PostgreSQL goes through unchanged: pgx caches its
// prepared statements itself. Why: BENCHMARKS.md, first round.

// stableParams writes each parameter ? of a query as +? (outside string
// literals). The unary plus changes no value, affinity or query plan, but
// it keeps SQLite's planner from marking the statement "re-prepare when
// this parameter is bound" (sqlite3VdbeReprepareOnBind, which it does for
// a parameter compared with = in a query with ORDER BY, a join, MAX and
// more). go-sqlite3 clears a statement's bindings before every run
// (sqlite3_clear_bindings), and clearing the bindings of a statement so
// marked expires it: without this, those statements, Batch's among them,
// were compiled again at every run, prepared or not.
func stableParams(query string) string {
	var b strings.Builder
	b.Grow(len(query) + 16)
	quoted := false
	for i := 0; i < len(query); i++ {
		c := query[i]
		switch {
		case c == '\'':
			quoted = !quoted
		case c == '?' && !quoted:
			b.WriteByte('+')
		}
		b.WriteByte(c)
	}
	return b.String()
}

// maxCachedStmts bounds the statements kept per pool; queries past it
// (none today: the queries are fixed strings, a few with optional
// filters) run unprepared.
const maxCachedStmts = 256

// stmtCache holds the statements prepared on one pool, by query text.
type stmtCache struct {
	mu        sync.Mutex
	stmts     map[string]*sqlx.Stmt
	preparing map[string]bool
}

func (c *stmtCache) get(query string) *sqlx.Stmt {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.stmts[query]
}

// prepare prepares query on pool and keeps it; nil when it cannot (the
// cache is full, the text holds several statements, of which a prepared
// one would run only the first, or preparing failed: running it unprepared
// reports why).
func (c *stmtCache) prepare(ctx context.Context, pool *sqlx.DB, query string) *sqlx.Stmt {
	c.mu.Lock()
	if st := c.stmts[query]; st != nil || len(c.stmts) >= maxCachedStmts || strings.Contains(query, ";") {
		c.mu.Unlock()
		return st
	}
	c.mu.Unlock()
	st, err := pool.PreparexContext(ctx, stableParams(query))
	if err != nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if old := c.stmts[query]; old != nil {
		st.Close()
		return old
	}
	if c.stmts == nil {
		c.stmts = map[string]*sqlx.Stmt{}
	}
	c.stmts[query] = st
	return st
}

// prepareLater prepares query on pool in the background, once: inside a
// transaction the writer pool's one connection is taken, so preparing
// there and then would wait for itself.
func (c *stmtCache) prepareLater(pool *sqlx.DB, query string) {
	c.mu.Lock()
	if c.stmts[query] != nil || c.preparing[query] || len(c.stmts) >= maxCachedStmts {
		c.mu.Unlock()
		return
	}
	if c.preparing == nil {
		c.preparing = map[string]bool{}
	}
	c.preparing[query] = true
	c.mu.Unlock()
	go func() {
		c.prepare(context.Background(), pool, query)
		c.mu.Lock()
		delete(c.preparing, query)
		c.mu.Unlock()
	}()
}

// stmt returns query prepared for ex (a transaction or a pool), or nil to
// run it unprepared. rows says the statement is run for its rows: one run
// as an exec is not prepared, since go-sqlite3 leaves a prepared
// statement that stepped to a row active until its next run, and an
// active statement on the writer holds back the commit of what is
// written after it.
func (db *DB) stmt(ctx context.Context, ex any, query string, rows bool) *sqlx.Stmt {
	if db.driver != DriverSQLite || (!rows && mayReturnRows(query)) {
		return nil
	}
	switch e := ex.(type) {
	case *sqlx.Tx:
		st := db.stmts[0].get(query)
		if st == nil {
			db.stmts[0].prepareLater(db.x, query)
			return nil
		}
		return e.StmtxContext(ctx, st)
	case *sqlx.DB:
		switch e {
		case db.x: // outside a transaction: this goroutine holds no connection
			return db.stmts[0].prepare(ctx, e, query)
		case db.r:
			return db.stmts[1].prepare(ctx, e, query)
		}
	}
	return nil
}

// stmtCtx is the context a statement through ex runs with: inside a
// SQLite transaction one that cannot end, so that the transaction is not
// cut off half way by a caller who left (its statements are short).
func (db *DB) stmtCtx(ctx context.Context, ex any) context.Context {
	if _, ok := ex.(*sqlx.Tx); ok && db.driver == DriverSQLite {
		return context.WithoutCancel(ctx)
	}
	return ctx
}

// exec runs a statement through ex (a transaction or a pool).
func (db *DB) exec(ctx context.Context, ex sqlx.ExecerContext, query string, args ...any) (sql.Result, error) {
	ctx = db.stmtCtx(ctx, ex)
	if st := db.stmt(ctx, ex, query, false); st != nil {
		return st.ExecContext(ctx, args...)
	}
	return ex.ExecContext(ctx, query, args...)
}

// execCount runs a statement through ex and returns how many rows it
// changed.
func (db *DB) execCount(ctx context.Context, ex sqlx.ExecerContext, query string, args ...any) (int64, error) {
	res, err := db.exec(ctx, ex, query, args...)
	if err != nil {
		return 0, err
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, fmt.Errorf("rows affected: %w", err)
	}
	return n, nil
}

// get scans the one row of a query through q into dest.
func (db *DB) get(ctx context.Context, q sqlx.QueryerContext, dest any, query string, args ...any) error {
	ctx = db.stmtCtx(ctx, q)
	if st := db.stmt(ctx, q, query, true); st != nil {
		return st.GetContext(ctx, dest, args...)
	}
	return sqlx.GetContext(ctx, q, dest, query, args...)
}

// sel scans the rows of a query through q into dest.
func (db *DB) sel(ctx context.Context, q sqlx.QueryerContext, dest any, query string, args ...any) error {
	ctx = db.stmtCtx(ctx, q)
	if st := db.stmt(ctx, q, query, true); st != nil {
		return st.SelectContext(ctx, dest, args...)
	}
	return sqlx.SelectContext(ctx, q, dest, query, args...)
}

// query runs a query through q and returns its rows.
func (db *DB) query(ctx context.Context, q sqlx.QueryerContext, query string, args ...any) (*sqlx.Rows, error) {
	ctx = db.stmtCtx(ctx, q)
	if st := db.stmt(ctx, q, query, true); st != nil {
		return st.QueryxContext(ctx, args...)
	}
	return q.QueryxContext(ctx, query, args...)
}

// mayReturnRows reports whether a statement might return rows.
func mayReturnRows(query string) bool {
	q := strings.ToUpper(strings.TrimSpace(query))
	return strings.HasPrefix(q, "SELECT") || strings.HasPrefix(q, "PRAGMA") || strings.HasPrefix(q, "WITH") ||
		strings.HasPrefix(q, "VALUES") || strings.Contains(q, "RETURNING")
}
