package storage

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync/atomic"

	"github.com/jmoiron/sqlx"
)

// dbtx is what a write transaction offers the statements run in it: a
// *sqlx.Tx on PostgreSQL, the held writer connection on SQLite.
type dbtx interface {
	sqlx.QueryerContext
	sqlx.ExecerContext
}

// writer is SQLite's one write connection. Airlock holds it itself rather
// than going through a database/sql transaction: such a transaction starts
// a goroutine to watch its context, so does every query in it, and
// go-sqlite3 runs each statement given a context that can end in a
// goroutine of its own. Each of those wakes a thread; together they were
// about a fifth of BenchmarkDecisionPath's time. On the held connection every
// statement runs with a context that cannot end (a statement is short; a
// transaction's commit must not be cut off half way by a caller who
// left), so none of that happens; waiting for the connection still ends
// with the caller's context. Statements are prepared once on it.
//
// Holding is a slot of one: the holder runs its statements (a
// transaction's, or a single one) and gives the slot back. Nothing else
// uses the connection; a writer in a transaction must not ask for the
// writer again (it would wait for itself).
//
// A holder that lets go while others wait yields its processor: the
// waiter the release woke is queued to run next on this processor, but
// only after the releaser's own work (a card's HTTP request, JSON), so
// with every core busy the connection sat idle for that long between
// holders. Yielding lets the next holder start at once: about a sixth
// more decisions per second in `airlock bench`.
type writer struct {
	pool    *sqlx.DB      // a pool of one connection, held from first use
	slot    chan struct{} // full while the connection is held
	waiting atomic.Int32  // callers waiting for the slot
	conn    *sqlx.Conn    // nil before first use and after it broke
	stmts   map[string]*sqlx.Stmt
}

func newWriter(pool *sqlx.DB) *writer {
	return &writer{pool: pool, slot: make(chan struct{}, 1)}
}

// held is the writer connection while one caller holds it. Its methods
// run statements prepared on the connection, with the caller's context
// stripped of its end.
type held struct {
	w      *writer
	broken bool // a statement reported the connection bad
}

var _ dbtx = (*held)(nil)

// hold waits for the connection, or for ctx to end.
func (w *writer) hold(ctx context.Context) (*held, error) {
	select {
	case w.slot <- struct{}{}:
	default:
		w.waiting.Add(1)
		select {
		case w.slot <- struct{}{}:
			w.waiting.Add(-1)
		case <-ctx.Done():
			w.waiting.Add(-1)
			return nil, ctx.Err()
		}
	}
	if w.conn == nil {
		c, err := w.pool.Connx(ctx)
		if err != nil {
			<-w.slot
			return nil, fmt.Errorf("writer connection: %w", err)
		}
		w.conn, w.stmts = c, map[string]*sqlx.Stmt{}
	}
	return &held{w: w}, nil
}

// release gives the connection back; a broken one is closed and made
// anew by the next holder.
func (w *writer) release(h *held) {
	if h.broken && w.conn != nil {
		for _, st := range w.stmts {
			st.Close()
		}
		w.conn.Close()
		w.conn, w.stmts = nil, nil
	}
	<-w.slot
	if w.waiting.Load() > 0 {
		runtime.Gosched() // see writer
	}
}

// do runs fn holding the connection (no transaction: each statement
// commits on its own).
func (w *writer) do(ctx context.Context, fn func(h *held) error) error {
	h, err := w.hold(ctx)
	if err != nil {
		return err
	}
	defer w.release(h)
	return fn(h)
}

// tx runs fn in an immediate transaction on the held connection,
// committing when it returns nil and rolling back otherwise (a panic
// included).
func (w *writer) tx(ctx context.Context, fn func(tx dbtx) error) (err error) {
	h, err := w.hold(ctx)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	defer w.release(h)
	if _, err := h.ExecContext(ctx, `BEGIN IMMEDIATE`); err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	committed := false
	defer func() {
		if !committed {
			// A failed COMMIT (SQLITE_BUSY) leaves the transaction
			// open: it is rolled back too.
			if _, rerr := h.ExecContext(ctx, `ROLLBACK`); rerr != nil {
				h.broken = true // whatever state it is in, start anew
			}
		}
	}()
	if err = fn(h); err != nil {
		return err
	}
	if _, err = h.ExecContext(ctx, `COMMIT`); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	committed = true
	return nil
}

// stmt returns query prepared on the connection, or nil to run it
// unprepared (the cache is full, or preparing failed: running it reports
// why).
func (h *held) stmt(ctx context.Context, query string) *sqlx.Stmt {
	w := h.w
	if st := w.stmts[query]; st != nil {
		return st
	}
	if len(w.stmts) >= maxCachedStmts || strings.Contains(query, ";") {
		// A statement prepared from several (a migration's) would run
		// only the first.
		return nil
	}
	st, err := w.conn.PreparexContext(ctx, stableParams(query))
	if err != nil {
		h.check(err)
		return nil
	}
	w.stmts[query] = st
	return st
}

// check notes an error that says the connection is unusable.
func (h *held) check(err error) error {
	if errors.Is(err, driver.ErrBadConn) || errors.Is(err, sql.ErrConnDone) {
		h.broken = true
	}
	return err
}

func (h *held) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	ctx = context.WithoutCancel(ctx)
	if st := h.stmt(ctx, query); st != nil {
		res, err := st.ExecContext(ctx, args...)
		return res, h.check(err)
	}
	res, err := h.w.conn.ExecContext(ctx, query, args...)
	return res, h.check(err)
}

func (h *held) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	ctx = context.WithoutCancel(ctx)
	if st := h.stmt(ctx, query); st != nil {
		rows, err := st.QueryContext(ctx, args...)
		return rows, h.check(err)
	}
	rows, err := h.w.conn.QueryContext(ctx, query, args...)
	return rows, h.check(err)
}

func (h *held) QueryxContext(ctx context.Context, query string, args ...any) (*sqlx.Rows, error) {
	ctx = context.WithoutCancel(ctx)
	if st := h.stmt(ctx, query); st != nil {
		rows, err := st.QueryxContext(ctx, args...)
		return rows, h.check(err)
	}
	rows, err := h.w.conn.QueryxContext(ctx, query, args...)
	return rows, h.check(err)
}

func (h *held) QueryRowxContext(ctx context.Context, query string, args ...any) *sqlx.Row {
	ctx = context.WithoutCancel(ctx)
	if st := h.stmt(ctx, query); st != nil {
		return st.QueryRowxContext(ctx, args...)
	}
	return h.w.conn.QueryRowxContext(ctx, query, args...)
}

// close closes the held connection's statements and the connection.
func (w *writer) close() error {
	w.slot <- struct{}{}
	defer func() { <-w.slot }()
	if w.conn != nil {
		for _, st := range w.stmts {
			st.Close()
		}
		w.conn.Close()
		w.conn, w.stmts = nil, nil
	}
	return w.pool.Close()
}
