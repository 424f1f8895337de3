package storage

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/airlockhq/airlock/confirm"
)

// dbtx is what statements run through: a write transaction (*txn), a
// read transaction (readTx) or a pool.
type dbtx interface {
	sqlx.QueryerContext
	sqlx.ExecerContext
}

// txn is a write transaction, as db.tx hands it to its function: the
// database/sql transaction and the one reading of the store's clock that
// every time the transaction writes is stamped from (taken as it began),
// so that a transaction's rows agree on "now".
type txn struct {
	*sqlx.Tx
	// now is the store's clock when the transaction began, as stored
	// (utc).
	now time.Time
	// deferAudits: the audit events the transaction writes are held in
	// audits until just before its commit (PostgreSQL; see flushAudits).
	deferAudits bool
	audits      []confirm.AuditEvent
}

var _ dbtx = (*txn)(nil)

// tx runs fn in a write transaction, committing when it returns nil and
// rolling back otherwise (a panic included). Waiting for a connection
// ends with ctx. On SQLite a transaction once begun runs to its end
// whatever ctx does (see stmtCtx), so a caller who leaves does not cut it
// off half way; its writes wait for each other in database/sql's pool of
// one connection (see DB).
func (db *DB) tx(ctx context.Context, fn func(tx *txn) error) (err error) {
	defer func() { err = classify(err) }()
	if db.readOnly {
		return ErrReadOnly
	}
	var tx *sqlx.Tx
	if db.driver == DriverSQLite {
		done, err := db.writerTurn(ctx, db.x)
		if err != nil {
			return fmt.Errorf("begin: %w", err)
		}
		defer done()
		c, err := db.x.Connx(ctx)
		if err != nil {
			return fmt.Errorf("begin: %w", err)
		}
		defer c.Close()
		if tx, err = c.BeginTxx(context.WithoutCancel(ctx), nil); err != nil {
			return fmt.Errorf("begin: %w", err)
		}
	} else if tx, err = db.x.BeginTxx(ctx, nil); err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	t := &txn{Tx: tx, now: db.stamp(), deferAudits: db.driver == DriverPostgres}
	defer func() {
		if p := recover(); p != nil {
			tx.Rollback()
			panic(p)
		}
		if err != nil {
			tx.Rollback()
		}
	}()
	if err = fn(t); err != nil {
		return err
	}
	if err = db.flushAudits(ctx, t); err != nil {
		return err
	}
	if err = tx.Commit(); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}

// nowOr is t normalised as stored, or the transaction's clock reading
// when t is zero.
func (tx *txn) nowOr(t time.Time) time.Time {
	if t.IsZero() {
		return tx.now
	}
	return utc(t)
}

// writerTurn waits, first come first served, for SQLite's one write
// connection when ex is its pool (a transaction has it already), or for
// ctx to end; done gives the turn to the next waiter. database/sql hands
// a freed connection to a random waiter, so with the clicks' inbox
// records and the decisions' writes all waiting for the one writer, a
// record could wait behind every one of them (BENCHMARKS.md, issue 35).
func (db *DB) writerTurn(ctx context.Context, ex any) (done func(), err error) {
	if x, ok := ex.(*sqlx.DB); !ok || x != db.x || db.turn == nil {
		return func() {}, nil
	}
	select {
	case db.turn <- struct{}{}:
		return func() { <-db.turn }, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// stmtCtx is the context a statement through ex runs with: inside a
// SQLite write transaction one that cannot end (see tx).
func (db *DB) stmtCtx(ctx context.Context, ex any) context.Context {
	if _, ok := ex.(*txn); ok && db.driver == DriverSQLite {
		return context.WithoutCancel(ctx)
	}
	return ctx
}

// exec runs a statement through ex (a transaction or a pool).
func (db *DB) exec(ctx context.Context, ex sqlx.ExecerContext, query string, args ...any) (sql.Result, error) {
	done, err := db.writerTurn(ctx, ex)
	if err != nil {
		return nil, classify(err)
	}
	defer done()
	res, err := ex.ExecContext(db.stmtCtx(ctx, ex), db.stable(query), args...)
	return res, classify(err)
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
	done, err := db.writerTurn(ctx, q)
	if err != nil {
		return classify(err)
	}
	defer done()
	return classify(sqlx.GetContext(db.stmtCtx(ctx, q), q, dest, db.stable(query), args...))
}

// sel scans the rows of a query through q into dest.
func (db *DB) sel(ctx context.Context, q sqlx.QueryerContext, dest any, query string, args ...any) error {
	done, err := db.writerTurn(ctx, q)
	if err != nil {
		return classify(err)
	}
	defer done()
	return classify(sqlx.SelectContext(db.stmtCtx(ctx, q), q, dest, db.stable(query), args...))
}

// query runs a query through q and returns its rows.
func (db *DB) query(ctx context.Context, q sqlx.QueryerContext, query string, args ...any) (*sqlx.Rows, error) {
	rows, err := q.QueryxContext(db.stmtCtx(ctx, q), db.stable(query), args...)
	return rows, classify(err)
}

// stable writes each parameter ? of a SQLite query as +? (outside string
// literals): the same value, affinity and plan, but SQLite does not mark
// the statement "prepare again when this parameter is bound", which it
// does for a parameter its planner compared (a partial index's condition,
// ORDER BY and more). go-sqlite3 clears a cached statement's bindings
// after each run, and clearing them expires a statement so marked: it
// was compiled again at every run.
func (db *DB) stable(query string) string {
	if db.driver != DriverSQLite || !strings.Contains(query, "?") {
		return query
	}
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
