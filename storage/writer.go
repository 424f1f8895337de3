package storage

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jmoiron/sqlx"
)

// dbtx is what a write transaction offers the statements run in it: a
// *sqlx.Tx on PostgreSQL, the held writer connection on SQLite.
type dbtx interface {
	sqlx.QueryerContext
	sqlx.ExecerContext
}

// Kept (issue 24): with an ordinary database/sql write connection instead,
// `airlock bench` fell below 1,000 decisions/s (BENCHMARKS.md "Tenth round").
//
// writer is SQLite's one write connection. Airlock holds it itself rather
// than going through a database/sql transaction: such a transaction starts
// a goroutine to watch its context, so does every query in it, and
// go-sqlite3 runs each statement given a context that can end in a
// goroutine of its own. Each of those wakes a thread; together they were
// about a fifth of BenchmarkDecisionPath's time. On the held connection
// every statement runs with a context that cannot end (a statement is short; a
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
//
// Checkpoints (copying the WAL's pages into the database file, with an
// fsync) run beside the writer, not in it: SQLite runs one in the
// committing connection once the WAL passes 1000 pages, which under load
// was every few dozen decisions, each stopping every writer for the
// copy and the fsync. The writer connection's own threshold is raised to
// writerCheckpointPages, a backstop; a checkpointer goroutine runs a
// PASSIVE checkpoint (it waits for no reader or writer) on its own
// connection every checkpointEvery holds and every checkpointInterval.
// At the timed one, or once the WAL holds restartFrames pages, it then
// copies the few pages written meanwhile holding the writer, so that the
// WAL starts over (see checkpoints): that step, with its fsync, held the
// writer about 1.4 ms, and taking it at every nudge stopped the writer
// for about a fifteenth of the time under load.
type writer struct {
	pool    *sqlx.DB            // a pool of one connection, held from first use
	slot    chan struct{}       // full while the connection is held
	waiting atomic.Int32        // callers waiting for the slot
	conn    *sqlx.Conn          // nil before first use and after it broke
	stmts   map[string]prepared // by query (under the slot)
	holds   int                 // holds since the last nudge (under the slot)
	written atomic.Bool         // held since the checkpointer last was

	ckpt      *sqlx.DB      // the checkpointer's connection
	nudge     chan struct{} // asks for a checkpoint now
	stop      chan struct{}
	stopOnce  sync.Once
	ckptDone  chan struct{}
	ckptCount atomic.Int64 // checkpoints run (tests)

	open   *group       // the transaction open on conn, if any (under the slot)
	groups atomic.Int64 // groups ended (tests)

	// urgent counts the callers waiting for the writer ahead of the
	// others (withUrgent: an acknowledgement waits on them); a holder
	// letting go while one waits hands the held slot over on handoff.
	urgent  atomic.Int32
	handoff chan struct{}
}

const (
	// writerCheckpointPages is the writer connection's own
	// wal_autocheckpoint: reached only when the checkpointer falls behind.
	writerCheckpointPages = 10000
	// checkpointEvery is how many writer holds (transactions or single
	// statements) pass between nudges to the checkpointer.
	checkpointEvery = 128
	// checkpointInterval is how often the checkpointer runs regardless.
	checkpointInterval = time.Second
	// restartFrames is how long the WAL may grow (frames, of a page
	// each) before a nudged checkpoint holds the writer to start it over.
	restartFrames = 1024
)

// newWriter makes the writer on pool (one connection) with a
// checkpointer on ckpt (one connection, otherwise idle).
func newWriter(pool, ckpt *sqlx.DB) *writer {
	w := &writer{pool: pool, slot: make(chan struct{}, 1), ckpt: ckpt,
		nudge: make(chan struct{}, 1), stop: make(chan struct{}), ckptDone: make(chan struct{}), handoff: make(chan struct{})}
	go w.checkpoints()
	return w
}

// checkpoints runs PASSIVE checkpoints when nudged, and every
// checkpointInterval when the writer was held since the last one (an idle
// process checkpoints nothing), until stop; the timed ones, and nudged
// ones that find restartFrames pages or more in the WAL, start the WAL
// over (see writer). A checkpoint that fails (the database is busy
// checkpointing already) is left to the next one.
func (w *writer) checkpoints() {
	defer close(w.ckptDone)
	t := time.NewTicker(checkpointInterval)
	defer t.Stop()
	for {
		timed := false
		select {
		case <-w.stop:
			return
		case <-w.nudge:
		case <-t.C:
			if !w.written.Load() {
				continue
			}
			timed = true
		}
		var busy, frames, copied int
		if err := w.ckpt.QueryRow(`PRAGMA wal_checkpoint(PASSIVE)`).Scan(&busy, &frames, &copied); err != nil {
			continue
		}
		if !timed && frames < restartFrames {
			w.ckptCount.Add(1)
			continue // the WAL is started over later, when longer or idle
		}
		// The pages written meanwhile, holding the writer: with them
		// copied too and no writer appending, the next write starts the
		// WAL over instead of growing it.
		err := w.do(context.Background(), func(h *held) error {
			_, err := h.ExecContext(context.Background(), `PRAGMA wal_checkpoint(PASSIVE)`)
			if err == nil {
				w.written.Store(false) // everything held before is copied
			}
			return err
		})
		if err == nil {
			w.ckptCount.Add(1)
		}
	}
}

// held is the writer connection while one caller holds it. Its methods
// run statements prepared on the connection, with the caller's context
// stripped of its end.
type held struct {
	w      *writer
	broken bool // a statement reported the connection bad
}

var _ dbtx = (*held)(nil)

// urgentKey marks, in a context, a caller served by the writer ahead of
// the others (withUrgent).
type urgentKey struct{}

// withUrgent is ctx for a write that an acknowledgement waits on (the
// inbox's records): the writer serves it as soon as its holder lets go,
// ahead of the callers already waiting (see release), and its
// transaction, a member of the open group, commits the group at once.
func withUrgent(ctx context.Context) context.Context {
	return context.WithValue(ctx, urgentKey{}, true)
}

// hold waits for the connection, or for ctx to end; a caller whose ctx
// has ended writes nothing.
func (w *writer) hold(ctx context.Context) (*held, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	urgent, _ := ctx.Value(urgentKey{}).(bool)
	select {
	case w.slot <- struct{}{}:
	default:
		w.waiting.Add(1)
		var handoff chan struct{} // nil: never
		if urgent {
			w.urgent.Add(1)
			handoff = w.handoff
		}
		select {
		case w.slot <- struct{}{}:
		case <-handoff: // the holder handed the slot over, still held
		case <-ctx.Done():
			w.waiting.Add(-1)
			if urgent {
				w.urgent.Add(-1)
			}
			return nil, ctx.Err()
		}
		w.waiting.Add(-1)
		if urgent {
			w.urgent.Add(-1)
		}
	}
	if w.conn == nil {
		c, err := w.pool.Connx(ctx)
		if err != nil {
			<-w.slot
			return nil, fmt.Errorf("writer connection: %w", err)
		}
		if _, err := c.ExecContext(context.WithoutCancel(ctx), fmt.Sprintf(`PRAGMA wal_autocheckpoint = %d`, writerCheckpointPages)); err != nil {
			c.Close()
			<-w.slot
			return nil, fmt.Errorf("writer connection: %w", err)
		}
		w.conn, w.stmts = c, map[string]prepared{}
	}
	w.written.Store(true)
	return &held{w: w}, nil
}

// release gives the connection back; a broken one is closed and made
// anew by the next holder.
func (w *writer) release(h *held) {
	if h.broken {
		w.drop()
	}
	if w.holds++; w.holds >= checkpointEvery {
		w.holds = 0
		select {
		case w.nudge <- struct{}{}:
		default: // one is asked for already
		}
	}
	if w.urgent.Load() > 0 {
		select {
		case w.handoff <- struct{}{}:
			return // an urgent caller holds it now
		default: // it is not in its wait yet: it takes its turn
		}
	}
	<-w.slot
	if w.waiting.Load() > 0 {
		runtime.Gosched() // see writer
	}
}

// do runs fn holding the connection, outside any transaction: each
// statement commits on its own. An open group is committed first, so that
// nothing do writes waits on, or depends on, another caller's outcome.
func (w *writer) do(ctx context.Context, fn func(h *held) error) error {
	h, err := w.hold(ctx)
	if err != nil {
		return err
	}
	defer w.release(h)
	if g := w.open; g != nil {
		w.end(h, g) // its error is its members'
	}
	return fn(h)
}

// Group commit. A transaction that ends while other callers wait for the
// writer does not commit: it leaves its transaction open for them and
// waits. The next holder runs its transaction inside the open one, in a
// savepoint, and so on up to maxGroup transactions; the last (or the
// first to find nobody waiting) commits them all at once and every one
// of their callers returns only then. A commit writes each page changed
// once, however many transactions changed it, so under load the pages
// successive transactions share (a table's last page, an index's busy
// ones) and the commit's own work are paid once per group: in `airlock
// bench` the writer's time in COMMIT and BEGIN fell by about two fifths
// and decisions per second rose by about 5%.
//
// A transaction whose function fails rolls back to its savepoint,
// leaving the others' writes; one that cannot (SQLite rolled the whole
// transaction back itself, on a full disk or an I/O error) fails the
// group, and every member's caller gets the error. A member's caller
// returns only once its group is settled, whatever its own outcome: what
// it read may have been another member's write. With nobody waiting a
// transaction commits at once, as without grouping. Nothing a member
// wrote is visible to readers before the group commits; its caller has
// not returned by then.
type group struct {
	done    chan struct{} // closed when the group committed or failed
	err     error         // why it failed; set before done is closed
	members int           // transactions in it that succeeded (under the slot)
}

const (
	// maxGroup bounds the transactions committed together, and so how
	// long the first of them waits for the commit.
	maxGroup = 8
	// groupWait is how long a member waits for a later holder to commit
	// its group before it takes the writer and commits it itself (the
	// waiter it left the group open for gave up).
	groupWait = 2 * time.Millisecond
)

// begin starts a transaction for the holder: a savepoint in the open
// group, or an immediate transaction as a new group when none is open or
// the open one is full (it is committed first).
func (w *writer) begin(ctx context.Context, h *held) (*group, error) {
	if g := w.open; g != nil && g.members < maxGroup {
		if _, err := h.ExecContext(ctx, `SAVEPOINT member`); err == nil {
			return g, nil
		}
		// The open transaction is not usable: end it and begin anew.
	}
	if g := w.open; g != nil {
		w.end(h, g)
	}
	if _, err := h.ExecContext(ctx, `BEGIN IMMEDIATE`); err != nil {
		return nil, err
	}
	g := &group{done: make(chan struct{})}
	w.open = g
	return g, nil
}

// undo rolls back the holder's transaction in g after its function
// failed (cause): to its savepoint when others' writes are in g, the
// whole transaction otherwise. A group that cannot be rolled back to the
// savepoint fails whole.
func (w *writer) undo(h *held, g *group, cause error) {
	ctx := context.Background()
	if g.members > 0 {
		_, err := h.ExecContext(ctx, `ROLLBACK TO member; RELEASE member`)
		if err == nil {
			return
		}
		cause = fmt.Errorf("a transaction grouped with this one failed (%v) and could not be undone alone, so the group was rolled back: %w", cause, err)
	} else {
		cause = nil // nobody else's: nothing of it to report
	}
	if _, err := h.ExecContext(ctx, `ROLLBACK`); err != nil {
		h.broken = true // whatever state it is in, start anew
	}
	w.finish(g, cause)
}

// end commits g (under the slot), rolling it back when the commit fails,
// and lets its members' callers return.
func (w *writer) end(h *held, g *group) {
	_, err := h.ExecContext(context.Background(), `COMMIT`)
	if err != nil {
		// A failed COMMIT (SQLITE_BUSY) leaves the transaction open: it
		// is rolled back too.
		if _, rerr := h.ExecContext(context.Background(), `ROLLBACK`); rerr != nil {
			h.broken = true
		}
		err = fmt.Errorf("commit: %w", err)
	}
	w.finish(g, err)
}

// finish closes the open group g with err (under the slot).
func (w *writer) finish(g *group, err error) {
	g.err = err
	w.open = nil
	w.groups.Add(1)
	close(g.done)
}

// await waits until g committed or failed and returns its error. When
// no later holder ends it within groupWait, the caller takes the writer
// and commits g itself.
func (w *writer) await(g *group) error {
	select {
	case <-g.done:
		return g.err
	default:
	}
	t := time.NewTimer(groupWait)
	defer t.Stop()
	select {
	case <-g.done:
		return g.err
	case <-t.C:
	}
	select {
	case <-g.done:
	case w.slot <- struct{}{}:
		h := &held{w: w}
		if w.open == g {
			w.end(h, g)
		}
		w.release(h)
	}
	<-g.done
	return g.err
}

// tx runs fn in a transaction on the held connection (see group),
// committing when it returns nil and rolling back otherwise (a panic
// included). It returns once the transaction is committed; an error when
// fn failed, or when the commit of its group did.
func (w *writer) tx(ctx context.Context, fn func(tx dbtx) error) (err error) {
	h, err := w.hold(ctx)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	g, err := w.begin(ctx, h)
	if err != nil {
		w.release(h)
		return fmt.Errorf("begin: %w", err)
	}
	returned := false
	defer func() {
		if !returned { // fn panicked
			w.undo(h, g, errors.New("panic"))
			if w.open == g {
				w.end(h, g)
			}
			w.release(h)
		}
	}()
	ferr := fn(h)
	if ferr == nil && g.members > 0 {
		if _, err := h.ExecContext(ctx, `RELEASE member`); err != nil {
			ferr = fmt.Errorf("release savepoint: %w", err)
		}
	}
	returned = true
	if ferr != nil {
		w.undo(h, g, ferr)
	} else {
		g.members++
	}
	if urgent, _ := ctx.Value(urgentKey{}).(bool); w.open == g && (urgent || w.waiting.Load() == 0 || g.members >= maxGroup) {
		w.end(h, g) // an urgent caller's group commits now: an ack waits on it
	}
	w.release(h)
	if err := w.await(g); err != nil {
		return err
	}
	return ferr
}

// prepared is a statement prepared on the writer connection. rows says
// it may return rows: go-sqlite3 leaves a prepared statement that stepped
// to a row active until its next run, and an active statement on the
// writer holds back the commit of everything written after it, so such
// a statement is never run prepared as an exec.
type prepared struct {
	st   *sqlx.Stmt // nil: run the query unprepared
	rows bool
}

// stmt returns query prepared on the connection, preparing it the first
// time. Its st is nil to run it unprepared: the cache is full, the text
// holds several statements (a migration's: prepared, only the first
// would run), or preparing failed (running it reports why).
func (h *held) stmt(ctx context.Context, query string) prepared {
	w := h.w
	if p, ok := w.stmts[query]; ok {
		return p
	}
	p := prepared{rows: mayReturnRows(query)}
	if len(w.stmts) >= maxCachedStmts {
		return p
	}
	if !strings.Contains(query, ";") {
		st, err := w.conn.PreparexContext(ctx, stableParams(query))
		if err != nil {
			h.check(err)
			return p
		}
		p.st = st
	}
	w.stmts[query] = p
	return p
}

// check notes an error that says the connection is unusable.
func (h *held) check(err error) error {
	if errors.Is(err, driver.ErrBadConn) || errors.Is(err, sql.ErrConnDone) {
		h.broken = true
	}
	return err
}

// ExecContext runs a statement; one that may return rows runs
// unprepared (see prepared).
func (h *held) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	ctx = context.WithoutCancel(ctx)
	if p := h.stmt(ctx, query); p.st != nil && !p.rows {
		res, err := p.st.ExecContext(ctx, args...)
		return res, h.check(err)
	}
	res, err := h.w.conn.ExecContext(ctx, query, args...)
	return res, h.check(err)
}

func (h *held) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	rows, err := h.QueryxContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	return rows.Rows, nil
}

func (h *held) QueryxContext(ctx context.Context, query string, args ...any) (*sqlx.Rows, error) {
	ctx = context.WithoutCancel(ctx)
	if p := h.stmt(ctx, query); p.st != nil {
		rows, err := p.st.QueryxContext(ctx, args...)
		return rows, h.check(err)
	}
	rows, err := h.w.conn.QueryxContext(ctx, query, args...)
	return rows, h.check(err)
}

func (h *held) QueryRowxContext(ctx context.Context, query string, args ...any) *sqlx.Row {
	ctx = context.WithoutCancel(ctx)
	if p := h.stmt(ctx, query); p.st != nil {
		return p.st.QueryRowxContext(ctx, args...)
	}
	return h.w.conn.QueryRowxContext(ctx, query, args...)
}

// mayReturnRows reports whether a statement might return rows.
func mayReturnRows(query string) bool {
	q := strings.ToUpper(strings.TrimSpace(query))
	return strings.HasPrefix(q, "SELECT") || strings.HasPrefix(q, "PRAGMA") || strings.HasPrefix(q, "WITH") ||
		strings.HasPrefix(q, "VALUES") || strings.Contains(q, "RETURNING")
}

// close stops the checkpointer and closes the held connection's
// statements and the connection. The checkpointer's connection is the
// caller's to close.
func (w *writer) close() error {
	w.stopOnce.Do(func() { close(w.stop) })
	<-w.ckptDone
	w.slot <- struct{}{}
	defer func() { <-w.slot }()
	if g := w.open; g != nil {
		w.end(&held{w: w}, g)
	}
	w.drop()
	return w.pool.Close()
}

// drop closes the connection and its statements (under the slot).
func (w *writer) drop() {
	if g := w.open; g != nil {
		w.finish(g, errors.New("the writer connection broke: the transaction was rolled back"))
	}
	if w.conn == nil {
		return
	}
	for _, p := range w.stmts {
		if p.st != nil {
			p.st.Close()
		}
	}
	w.conn.Close()
	w.conn, w.stmts = nil, nil
}
