package storage

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/mattn/go-sqlite3"

	"github.com/airlockhq/airlock/confirm"
)

// recorder is go-sqlite3's driver with the queries its connections run
// recorded.
type recorder struct {
	dsn     string
	mu      sync.Mutex
	queries map[string]bool
}

func (r *recorder) Open(dsn string) (driver.Conn, error) {
	c, err := (&sqlite3.SQLiteDriver{}).Open(dsn)
	if err != nil {
		return nil, err
	}
	return &recordingConn{SQLiteConn: c.(*sqlite3.SQLiteConn), r: r}, nil
}

func (r *recorder) Connect(context.Context) (driver.Conn, error) { return r.Open(r.dsn) }
func (r *recorder) Driver() driver.Driver                        { return r }

func (r *recorder) record(query string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.queries[query] = true
}

type recordingConn struct {
	*sqlite3.SQLiteConn
	r *recorder
}

func (c *recordingConn) QueryContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	c.r.record(query)
	return c.SQLiteConn.QueryContext(ctx, query, args)
}

func (c *recordingConn) PrepareContext(ctx context.Context, query string) (driver.Stmt, error) {
	c.r.record(query)
	return c.SQLiteConn.PrepareContext(ctx, query)
}

// Every query over batches that the sweepers, turns and clicks run
// finds its rows through an index, never by reading every batch: most
// batches are done, and the status indexes hold open batches only (so a
// query must name their condition, status <> 'done', for SQLite to use
// them). The statements checked are the ones the read pool ran while the
// functions below ran, each with SQLite's EXPLAIN QUERY PLAN.
func TestSQLiteBatchQueriesUseIndexes(t *testing.T) {
	path := filepath.Join(t.TempDir(), "airlock.db")
	db := openDB(t, DriverSQLite, path)
	ctx := t.Context()
	dsn, err := sqliteDSN(path)
	if err != nil {
		t.Fatal(err)
	}
	rec := &recorder{dsn: sqliteReaderDSN(dsn), queries: map[string]bool{}}
	db.r.Close()
	db.r = sqlx.NewDb(sql.OpenDB(rec), "sqlite3")
	now := time.Now()
	b := newBatch(t, db, later(), confirm.DecisionPending)
	calls := []func() error{
		func() error { _, err := db.PendingBatch(ctx, b.ConversationID); return err },
		func() error { _, err := db.PendingInChannel(ctx, "slack", "C"); return err },
		func() error { _, err := db.BatchesIn(ctx, confirm.BatchPending); return err },
		func() error { _, err := db.BatchesIn(ctx, confirm.BatchRunning); return err },
		func() error { _, err := db.OpenBatches(ctx, b.ConversationID); return err },
		func() error { _, err := db.PendingBatches(ctx, b.ConversationID); return err },
		func() error { _, err := db.PendingApprovals(ctx); return err },
		func() error { _, err := clockAt(db, now).ExpiredBatches(ctx); return err },
		func() error { _, err := db.DueEscalations(ctx, 0, now); return err },
		func() error { _, err := clockAt(db, now).DueReminders(ctx, now.Add(time.Hour)); return err },
		func() error { _, err := db.UnknownCalls(ctx, b.ConversationID); return err },
		func() error { _, err := db.Batch(ctx, b.ID); return err },
		func() error { _, err := db.BindableBatch(ctx, b.ConversationID, "deploy", []byte(`{}`)); return err },
		func() error { _, err := db.AskedBatch(ctx, b.ConversationID, "deploy", []byte(`{}`)); return err },
	}
	for i, call := range calls {
		if err := call(); err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
	}
	rec.mu.Lock()
	var queries []string
	for q := range rec.queries {
		if strings.Contains(q, "batches") {
			queries = append(queries, q)
		}
	}
	rec.mu.Unlock()
	if len(queries) < len(calls) {
		t.Fatalf("%d statements over batches run on the read pool, want at least %d", len(queries), len(calls))
	}
	for _, q := range queries {
		args := make([]any, strings.Count(q, "?")) // unbound: NULL (no query here has a ? in a literal)
		rows, err := db.r.QueryxContext(ctx, "EXPLAIN QUERY PLAN "+q, args...)
		if err != nil {
			t.Fatalf("explain %s: %v", q, err)
		}
		var plan []string
		for rows.Next() {
			var id, parent, unused int
			var detail string
			if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
				t.Fatal(err)
			}
			plan = append(plan, detail)
		}
		rows.Close()
		if strings.Contains(q, "c.flagged AND b.conversation_id") && !strings.Contains(strings.Join(plan, ";"), "calls_asked") {
			t.Errorf("an MCP retry's lookup does not read the asked calls' index:\n%s\nplan: %s", q, strings.Join(plan, "; "))
		}
		if strings.Contains(q, "c.run_status = 'not_started'") && !strings.Contains(strings.Join(plan, ";"), "calls_bindable") {
			t.Errorf("binding does not read the live calls' index:\n%s\nplan: %s", q, strings.Join(plan, "; "))
		}
		for _, step := range plan {
			// "SCAN b" or "SCAN batches": every batch read.
			if f := strings.Fields(step); len(f) == 2 && f[0] == "SCAN" && (f[1] == "b" || f[1] == "batches") {
				t.Errorf("reads every batch:\n%s\nplan: %s", q, strings.Join(plan, "; "))
			}
		}
	}
}
