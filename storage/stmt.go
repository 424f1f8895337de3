package storage

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/jmoiron/sqlx"
)

// Prepared statements (SQLite). go-sqlite3 compiles every statement it is
// handed anew (sqlite3_prepare_v2), which was about a seventh of the CPU
// of a click's work; exec, get and sel run a statement prepared once per
// connection instead: the writer keeps its own (writer.go); for the read
// pool database/sql keeps a statement prepared on each connection it was
// used on, so with a few readers each query is compiled a handful of
// times in all. PostgreSQL goes through unchanged: pgx caches its
// prepared statements itself.

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
	mu    sync.Mutex
	stmts map[string]*sqlx.Stmt
}

// prepare prepares query on pool and keeps it; nil when it cannot.
func (c *stmtCache) prepare(ctx context.Context, pool *sqlx.DB, query string) *sqlx.Stmt {
	c.mu.Lock()
	if st := c.stmts[query]; st != nil || len(c.stmts) >= maxCachedStmts {
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

// stmt returns query prepared on the pool ex, or nil to run it as it is:
// the held writer prepares its own, and on SQLite only an in-memory
// database's transactions are database/sql's (theirs run unprepared).
func (db *DB) stmt(ctx context.Context, ex any, query string) *sqlx.Stmt {
	if db.driver != DriverSQLite {
		return nil
	}
	switch ex {
	case db.r:
		return db.stmts[1].prepare(ctx, db.r, query)
	case db.x: // an in-memory database's one connection, outside a transaction
		return db.stmts[0].prepare(ctx, db.x, query)
	}
	return nil
}

// exec runs a statement through ex (a transaction or a pool).
func (db *DB) exec(ctx context.Context, ex sqlx.ExecerContext, query string, args ...any) (res sql.Result, err error) {
	defer func() { err = classify(err) }()
	if db.onWriter(ex) {
		err = db.w.do(ctx, func(h *held) error { res, err = h.ExecContext(ctx, query, args...); return err })
		return res, err
	}
	ctx = db.readCtx(ctx, ex)
	if st := db.stmt(ctx, ex, query); st != nil {
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
	return db.scan(ctx, scanOne, q, dest, query, args...)
}

// sel scans the rows of a query through q into dest.
func (db *DB) sel(ctx context.Context, q sqlx.QueryerContext, dest any, query string, args ...any) error {
	return db.scan(ctx, scanAll, q, dest, query, args...)
}

// scanner is one of sqlx's ways to scan a query into dest (the one row or
// all rows), through a queryer or a prepared statement.
type scanner struct {
	queryer func(ctx context.Context, q sqlx.QueryerContext, dest any, query string, args ...any) error
	stmt    func(st *sqlx.Stmt, ctx context.Context, dest any, args ...any) error
}

var (
	scanOne = scanner{sqlx.GetContext, (*sqlx.Stmt).GetContext}
	scanAll = scanner{sqlx.SelectContext, (*sqlx.Stmt).SelectContext}
)

// scan runs a query through q and scans it into dest with s: on the held
// SQLite writer for the writer pool, else through the query's prepared
// statement when there is one.
func (db *DB) scan(ctx context.Context, s scanner, q sqlx.QueryerContext, dest any, query string, args ...any) (err error) {
	defer func() { err = classify(err) }()
	if db.onWriter(q) {
		return db.w.do(ctx, func(h *held) error { return s.queryer(ctx, h, dest, query, args...) })
	}
	ctx = db.readCtx(ctx, q)
	if st := db.stmt(ctx, q, query); st != nil {
		return s.stmt(st, ctx, dest, args...)
	}
	return s.queryer(ctx, q, dest, query, args...)
}

// query runs a query through q and returns its rows.
func (db *DB) query(ctx context.Context, q sqlx.QueryerContext, query string, args ...any) (rows *sqlx.Rows, err error) {
	defer func() { err = classify(err) }()
	if db.onWriter(q) {
		// The rows would outlive the hold.
		return nil, errors.New("storage: rows read from the writer outside a transaction")
	}
	ctx = db.readCtx(ctx, q)
	if st := db.stmt(ctx, q, query); st != nil {
		return st.QueryxContext(ctx, args...)
	}
	return q.QueryxContext(ctx, query, args...)
}

// onWriter reports whether a statement given the writer pool (outside a
// transaction) runs on the held SQLite writer connection instead.
func (db *DB) onWriter(ex any) bool {
	x, ok := ex.(*sqlx.DB)
	return ok && x == db.x && db.w != nil
}

// readCtx is ctx stripped of its end for a statement on the SQLite read
// pool: database/sql watches a query's context with a goroutine, and
// go-sqlite3 a statement's (see writer); a read is short. Waiting for a
// reader connection is bounded by the pool's size rather than by ctx.
func (db *DB) readCtx(ctx context.Context, ex any) context.Context {
	if x, ok := ex.(*sqlx.DB); ok && x == db.r && x != db.x && db.driver == DriverSQLite {
		return context.WithoutCancel(ctx)
	}
	return ctx
}
