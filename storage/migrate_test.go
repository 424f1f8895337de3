package storage

import (
	"fmt"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/airlockhq/airlock/confirm"
)

// openAtMigration opens dsn as a release that knew migrations up to last
// left it: migrated that far, without the read pool or anything Open adds.
// It is closed when the test ends.
func openAtMigration(t *testing.T, driver, dsn string, last int) *DB {
	t.Helper()
	name, raw := "pgx", dsn
	if driver == DriverSQLite {
		var err error
		if raw, err = sqliteDSN(dsn); err != nil {
			t.Fatal(err)
		}
		name = "sqlite3"
	}
	x, err := sqlx.Open(name, raw)
	if err != nil {
		t.Fatal(err)
	}
	old := &DB{x: x, driver: driver}
	t.Cleanup(func() { old.Close() })
	if err := old.migrateTo(t.Context(), last); err != nil {
		t.Fatal(err)
	}
	return old
}

// seedSQL is one statement run straight on a database at an old migration.
type seedSQL struct {
	sql  string
	args []any
}

// execSeed runs qs on old in order; the first failure fails the test.
func execSeed(t *testing.T, old *DB, qs []seedSQL) {
	t.Helper()
	for _, q := range qs {
		if _, err := old.x.ExecContext(t.Context(), old.q(q.sql), q.args...); err != nil {
			t.Fatalf("%s: %v", q.sql, err)
		}
	}
}

// openUpgraded opens (and so migrates) the database at dsn, left at
// migration from by openAtMigration, closing it when the test ends.
func openUpgraded(t *testing.T, driver, dsn string, from int) *DB {
	t.Helper()
	db, err := Open(t.Context(), driver, dsn)
	if err != nil {
		t.Fatalf("Open of a database at migration %d: %v", from, err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// insertOldAudit writes an audit row as a release before the chain
// (migration 14) did.
func insertOldAudit(t *testing.T, old *DB, e confirm.AuditEvent) {
	t.Helper()
	if e.At.IsZero() {
		e.At = time.Now()
	}
	if _, err := old.x.ExecContext(t.Context(), old.q(`INSERT INTO audit (at, kind, conversation_id, batch_id, call_key, tool, actor, detail)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?)`), old.ts(e.At), string(e.Kind), e.ConversationID, e.BatchID, e.CallKey, e.Tool, e.Actor, e.Detail); err != nil {
		t.Fatal(err)
	}
}

// testMigrateUpgrade builds a database as the release before migration 004
// left it, with data, and checks Open upgrades it in place: old rows read
// back with the new columns' defaults.
func testMigrateUpgrade(t *testing.T, driver, dsn string) {
	ctx := t.Context()
	old := openAtMigration(t, driver, dsn, 3)
	now := old.ts(time.Now())
	execSeed(t, old, []seedSQL{
		{`INSERT INTO conversations (id, platform, channel, thread, created_at) VALUES (7, 'slack', 'D1', '', ?)`, []any{now}},
		{`INSERT INTO messages (conversation_id, seq, role, body, created_at) VALUES (7, 1, 'assistant', '{}', ?)`, []any{now}},
		{`INSERT INTO batches (id, conversation_id, message_seq, status, created_at, updated_at) VALUES ('b1', 7, 1, 'pending', ?, ?)`, []any{now, now}},
		{`INSERT INTO calls (batch_id, key, position, tool, args, flagged, decision, run_status, idempotency_key)
			VALUES ('b1', 'k', 0, 'deploy', '{"a": 1}', TRUE, 'pending', 'not_started', 'b1/k')`, nil},
	})

	db := openUpgraded(t, driver, dsn, 3)
	conv, err := db.Conversation(ctx, "slack", "D1", "", true)
	if err != nil || conv.ID != 7 || conv.DM {
		t.Fatalf("old conversation = %+v, %v; want id 7, not dm (kept)", conv, err)
	}
	b, err := db.Batch(ctx, "b1")
	if err != nil {
		t.Fatal(err)
	}
	if c := b.Calls[0]; c.Reasons != nil || c.Restrict != nil || c.Approvals != 1 || c.Grantable || c.DenyReason != "" || c.GrantID != "" ||
		c.Votes != nil || !c.Flagged || string(c.Args) != `{"a": 1}` {
		t.Fatalf("old call = %+v; want the new columns' defaults, approvals 1 for a flagged call", c)
	}
	if n, err := db.PendingInChannel(ctx, "slack", "D1"); err != nil || n != 1 {
		t.Fatalf("PendingInChannel = %d, %v", n, err)
	}
	if n, err := db.CountTurn(ctx, "slack", "U", time.Minute); err != nil || n != 1 {
		t.Fatalf("CountTurn = %d, %v", n, err)
	}
	// The rebuilt calls table takes votes (of a call needing two) and the
	// new decisions.
	if _, err := db.x.ExecContext(ctx, `UPDATE calls SET approvals = 2 WHERE batch_id = 'b1'`); err != nil {
		t.Fatal(err)
	}
	if res, err := db.Decide(ctx, confirm.Decide{BatchID: "b1", Key: "k", Status: confirm.DecisionAllowed, By: "U-b"}); err != nil || !res.Won || res.Decided {
		t.Fatalf("first vote on the old call = %+v, %v", res, err)
	}
	if c := loadBatch(t, db, "b1").Calls[0]; len(c.Votes) != 1 || c.Votes[0].By != "U-b" {
		t.Fatalf("old call after a vote = %+v", c)
	}
	if _, err := db.x.ExecContext(ctx, `UPDATE calls SET approvals = 1 WHERE batch_id = 'b1'`); err != nil {
		t.Fatal(err)
	}
	res, err := db.Decide(ctx, confirm.Decide{BatchID: "b1", Key: "k", Status: confirm.DecisionAllowed, By: "U-a",
		Grant: &confirm.Grant{ExpiresAt: time.Now().Add(time.Hour)}})
	if err != nil || !res.Decided || !res.BatchDecided {
		t.Fatalf("Decide on the old call = %+v, %v", res, err)
	}
	if c := loadBatch(t, db, "b1").Calls[0]; c.Decision != confirm.DecisionAllowed || c.DecidedBy != "U-a" {
		t.Fatalf("old call after Decide = %+v", c)
	}
	if _, err := firstActiveGrant(ctx, db, 7, "deploy", time.Time{}); err != nil {
		t.Fatalf("ActiveGrant after upgrade: %v", err)
	}
}

// Migration 8 (SQLite) rebuilds the audit without AUTOINCREMENT and drops
// calls_running: the rows and their ids are kept, the audit stays
// append-only, and new rows follow the old ids.
func TestSQLiteMigrationEightKeepsTheAudit(t *testing.T) {
	path := filepath.Join(t.TempDir(), "old.db")
	old := openAtMigration(t, DriverSQLite, path, 7)
	ctx := t.Context()
	conv := newConversation(t, old)
	for i, kind := range []confirm.AuditKind{confirm.AuditRejectedClick, confirm.AuditDecision, confirm.AuditToolResult} {
		insertOldAudit(t, old, confirm.AuditEvent{Kind: kind, ConversationID: conv.ID, Actor: "U1", Detail: fmt.Sprintf(`{"n":%d}`, i)})
	}
	before, err := old.AuditEvents(ctx, confirm.AuditFilter{ConversationID: conv.ID})
	if err != nil || len(before) != 3 {
		t.Fatalf("audit before: %v, %v", before, err)
	}
	old.Close()

	db := openUpgraded(t, DriverSQLite, path, 7)
	after, err := db.AuditEvents(ctx, confirm.AuditFilter{ConversationID: conv.ID})
	if err != nil || !reflect.DeepEqual(before, after) {
		t.Fatalf("audit after the upgrade\n%+v, %v\nwant\n%+v", after, err, before)
	}
	for _, q := range []string{`UPDATE audit SET actor = 'X'`, `DELETE FROM audit`} {
		if _, err := db.x.ExecContext(ctx, q); err == nil || !strings.Contains(err.Error(), "append-only") {
			t.Fatalf("%s after the upgrade: %v, want refused (append-only)", q, err)
		}
	}
	if err := db.Audit(ctx, confirm.AuditEvent{Kind: confirm.AuditDecision, ConversationID: conv.ID, Actor: "U2"}); err != nil {
		t.Fatal(err)
	}
	all, err := db.AuditEvents(ctx, confirm.AuditFilter{ConversationID: conv.ID})
	if err != nil || len(all) != 4 || all[3].ID <= before[2].ID {
		t.Fatalf("a new row after the upgrade: %+v, %v", all, err)
	}
	var n int
	if err := db.x.GetContext(ctx, &n, `SELECT COUNT(*) FROM sqlite_master WHERE name = 'calls_running' OR (name = 'audit' AND sql LIKE '%AUTOINCREMENT%')`); err != nil || n != 0 {
		t.Fatalf("%d leftovers (calls_running, audit's AUTOINCREMENT), %v", n, err)
	}
}

// testMigrateOpenBatches upgrades a database at migration 8 with a batch
// whose escalation steps 0 and 2 had fired, one with none and one done:
// after migration 9 (partial status indexes) the first loads its steps,
// the second none, a step firing later is loaded too, and the status
// queries find the open batches and not the done one.
func testMigrateOpenBatches(t *testing.T, driver, dsn string) {
	ctx := t.Context()
	old := openAtMigration(t, driver, dsn, 8)
	ts := old.ts(time.Now())
	exp := old.ts(time.Now().Add(time.Hour))
	conv := newConversation(t, old)
	for i, id := range []string{"esc", "plain", "done"} {
		status := "pending"
		if id == "done" {
			status = "done"
		}
		execSeed(t, old, []seedSQL{
			{`INSERT INTO messages (conversation_id, seq, role, body, created_at) VALUES (?, ?, 'assistant', '{}', ?)`, []any{conv.ID, i + 1, ts}},
			{`INSERT INTO batches (id, conversation_id, message_seq, status, created_at, expires_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?)`,
				[]any{id, conv.ID, i + 1, status, ts, exp, ts}},
			{`INSERT INTO calls (batch_id, key, position, tool, args, flagged, decision, run_status, idempotency_key, expires_at, approvals)
				VALUES (?, 'k', 0, 'deploy', '{}', TRUE, 'pending', 'not_started', ?, ?, 1)`, []any{id, id + "/k", exp}},
		})
	}
	for _, step := range []int{2, 0} {
		if _, err := old.x.ExecContext(ctx, old.q(`INSERT INTO batch_escalations (batch_id, step, fired_at) VALUES ('esc', ?, ?)`), step, ts); err != nil {
			t.Fatal(err)
		}
	}
	old.Close()

	db := openUpgraded(t, driver, dsn, 8)
	if got := loadBatch(t, db, "esc").Escalated; !slices.Equal(got, []int{0, 2}) {
		t.Fatalf("steps of the escalated batch after the upgrade = %v, want [0 2]", got)
	}
	if got := loadBatch(t, db, "plain").Escalated; got != nil {
		t.Fatalf("steps of a batch never escalated = %v", got)
	}
	if ok, err := db.MarkEscalated(ctx, "plain", 1); err != nil || !ok {
		t.Fatalf("MarkEscalated after the upgrade = %v, %v", ok, err)
	}
	if got := loadBatch(t, db, "plain").Escalated; !slices.Equal(got, []int{1}) {
		t.Fatalf("steps after a step fired = %v, want [1]", got)
	}
	ids, err := db.BatchesIn(ctx, confirm.BatchPending)
	if err != nil || !slices.Equal(slices.Sorted(slices.Values(ids)), []string{"esc", "plain"}) {
		t.Fatalf("pending batches = %v, %v", ids, err)
	}
	if ids, err := db.BatchesIn(ctx, confirm.BatchDone); err != nil || !slices.Equal(ids, []string{"done"}) {
		t.Fatalf("done batches = %v, %v", ids, err)
	}
	if b, err := db.PendingBatch(ctx, conv.ID); err != nil || b.ID == "done" {
		t.Fatalf("pending batch = %+v, %v", b, err)
	}
}

func testMigrateIdempotent(t *testing.T, db *DB) {
	ctx := t.Context()
	b := newBatch(t, db, later(), confirm.DecisionPending)
	if err := db.Migrate(ctx); err != nil {
		t.Fatalf("second Migrate: %v", err)
	}
	var wg sync.WaitGroup
	errs := make([]error, 5)
	for i := range errs {
		wg.Go(func() { errs[i] = db.Migrate(ctx) })
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatalf("concurrent Migrate: %v", err)
		}
	}
	ms, err := db.migrations()
	if err != nil {
		t.Fatal(err)
	}
	var n int
	if err := db.x.GetContext(ctx, &n, `SELECT COUNT(*) FROM schema_migrations`); err != nil {
		t.Fatal(err)
	}
	if n != len(ms) || n == 0 {
		t.Fatalf("schema_migrations has %d rows, want %d", n, len(ms))
	}
	if got := loadBatch(t, db, b.ID); len(got.Calls) != 1 {
		t.Fatal("data lost across Migrate")
	}
	if err := db.Ping(ctx); err != nil {
		t.Fatal(err)
	}
}
