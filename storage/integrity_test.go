package storage

import (
	"encoding/json"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/airlockhq/airlock/confirm"
)

// integrityTests are the revision and grant contracts of approval
// integrity, run by runConformance against each database.
var integrityTests = []conformanceTest{
	{"StaleRevisionDecide", testStaleRevisionDecide},
	{"StaleRevisionEdit", testStaleRevisionEdit},
	{"GrantRequesterRoles", testGrantRequesterRoles},
	{"RevokedGrantNotStored", testRevokedGrantNotStored},
}

// testStaleRevisionDecide: an edit makes revision 1; a vote, an allow or
// a deny made at revision 0 (a card its giver still had open) changes
// nothing and is not audited; the same decision at revision 1 counts.
func testStaleRevisionDecide(t *testing.T, db *DB) {
	ctx := t.Context()
	b := newBatch(t, db, later(), confirm.DecisionPending)
	now := time.Now()
	res, err := clockAt(db, now).EditCall(ctx, confirm.EditCall{BatchID: b.ID, Key: "k0", Args: json.RawMessage(`{"env":"production"}`),
		Summary: "deploy production", By: "U-bob", Approvals: 2})
	if err != nil || !res.Won || res.Votes != 1 {
		t.Fatalf("EditCall = %+v, %v", res, err)
	}
	if c := callByKey(t, loadBatch(t, db, b.ID), "k0"); c.Revision != 1 {
		t.Fatalf("revision after one edit = %d, want 1", c.Revision)
	}
	before := len(auditKinds(t, db, b.ConversationID))
	for _, status := range []confirm.DecisionStatus{confirm.DecisionAllowed, confirm.DecisionDenied} {
		res = decide(t, clockAt(db, now.Add(time.Second)), confirm.Decide{BatchID: b.ID, Key: "k0", Status: status, By: "U-alice", Revision: 0})
		if !res.Stale || res.Won || res.Decided {
			t.Fatalf("%s at revision 0 = %+v; want stale, nothing won", status, res)
		}
	}
	c := callByKey(t, loadBatch(t, db, b.ID), "k0")
	if c.Decision != confirm.DecisionPending || len(c.Votes) != 1 || c.Votes[0].By != "U-bob" {
		t.Fatalf("call after stale decisions = %+v; want pending with Bob's vote only", c)
	}
	if after := len(auditKinds(t, db, b.ConversationID)); after != before {
		t.Fatalf("stale decisions wrote %d audit rows", after-before)
	}
	res = decide(t, clockAt(db, now.Add(2*time.Second)), confirm.Decide{BatchID: b.ID, Key: "k0", Status: confirm.DecisionAllowed, By: "U-alice", Revision: 1})
	if res.Stale || !res.Won || !res.Decided || res.Votes != 2 {
		t.Fatalf("allow at revision 1 = %+v; want the call allowed", res)
	}
}

// testStaleRevisionEdit: two editors with the same form open: the first
// edit makes revision 1, the second (made at revision 0) changes nothing.
func testStaleRevisionEdit(t *testing.T, db *DB) {
	ctx := t.Context()
	b := newBatch(t, db, later(), confirm.DecisionPending)
	first := confirm.EditCall{BatchID: b.ID, Key: "k0", Args: json.RawMessage(`{"n":1}`), By: "U-a", Approvals: 2}
	if res, err := db.EditCall(ctx, first); err != nil || !res.Won {
		t.Fatalf("first edit = %+v, %v", res, err)
	}
	second := confirm.EditCall{BatchID: b.ID, Key: "k0", Args: json.RawMessage(`{"n":2}`), By: "U-b", Approvals: 2}
	res, err := db.EditCall(ctx, second)
	if err != nil || !res.Stale || res.Won {
		t.Fatalf("edit at revision 0 after another = %+v, %v; want stale", res, err)
	}
	c := callByKey(t, loadBatch(t, db, b.ID), "k0")
	if string(c.EditedArgs) != `{"n":1}` || c.EditedBy != "U-a" || c.Revision != 1 || len(c.Votes) != 1 {
		t.Fatalf("call = %+v; want the first edit only", c)
	}
	second.Revision = 1
	if res, err := db.EditCall(ctx, second); err != nil || !res.Won {
		t.Fatalf("edit at revision 1 = %+v, %v", res, err)
	}
	if c := callByKey(t, loadBatch(t, db, b.ID), "k0"); c.Revision != 2 || string(c.EditedArgs) != `{"n":2}` {
		t.Fatalf("call after the second edit = %+v", c)
	}
}

// testGrantRequesterRoles: a grant keeps whose requests it covers and its
// creator's roles; ActiveGrants lists every active grant, newest first.
func testGrantRequesterRoles(t *testing.T, db *DB) {
	ctx := t.Context()
	conv := newConversation(t, db)
	now := time.Now()
	var ids []string
	for i, who := range []string{"U-bob", "U-dan"} {
		b := batchIn(t, db, conv.ID, later(), confirm.DecisionPending)
		g := &confirm.Grant{Tool: "deploy", Requester: who, CreatorRoles: []string{"R-ops"}, ExpiresAt: later()}
		decide(t, clockAt(db, now.Add(time.Duration(i)*time.Second)), confirm.Decide{BatchID: b.ID, Key: "k0", Status: confirm.DecisionAllowed, By: "U-alice", Grant: g})
		ids = append(ids, g.ID)
	}
	gs, err := clockAt(db, now.Add(time.Minute)).ActiveGrants(ctx, conv.ID, "deploy")
	if err != nil || len(gs) != 2 {
		t.Fatalf("ActiveGrants = %+v, %v; want two", gs, err)
	}
	if gs[0].ID != ids[1] || gs[1].ID != ids[0] || gs[0].Requester != "U-dan" || gs[1].Requester != "U-bob" ||
		!slices.Equal(gs[0].CreatorRoles, []string{"R-ops"}) {
		t.Fatalf("ActiveGrants = %+v; want Dan's then Bob's, with the creator's roles", gs)
	}
	if _, err := clockAt(db, now.Add(2*time.Second)).RevokeGrant(ctx, ids[1], "U-x"); err != nil {
		t.Fatal(err)
	}
	if gs, _ := clockAt(db, now.Add(time.Minute)).ActiveGrants(ctx, conv.ID, "deploy"); len(gs) != 1 || gs[0].ID != ids[0] {
		t.Fatalf("ActiveGrants after a revocation = %+v", gs)
	}
}

// testRevokedGrantNotStored: a batch planned with a grant that was revoked
// (or lapsed) before it was stored is refused whole with ErrGrantInactive.
func testRevokedGrantNotStored(t *testing.T, db *DB) {
	ctx := t.Context()
	conv := newConversation(t, db)
	seedGrant(t, db, conv.ID, "g-r", "restart")
	if ok, err := db.RevokeGrant(ctx, "g-r", "U-x"); err != nil || !ok {
		t.Fatalf("RevokeGrant = %v, %v", ok, err)
	}
	b := &confirm.Batch{ConversationID: conv.ID, RequestedBy: "U-author", Status: confirm.BatchDecided, ExpiresAt: later(), Calls: []confirm.Call{
		{Key: "g", Tool: "restart", Args: json.RawMessage(`{}`), Flagged: true, Decision: confirm.DecisionAllowedByGrant, DecidedBy: "grant:g-r", GrantID: "g-r"},
	}}
	err := db.CreateBatch(ctx, b, confirm.Message{Role: "assistant", Body: json.RawMessage(`1`)})
	if !errors.Is(err, confirm.ErrGrantInactive) {
		t.Fatalf("CreateBatch with a revoked grant = %v; want ErrGrantInactive", err)
	}
	if msgs, err := db.Messages(ctx, conv.ID); err != nil || len(msgs) != 0 {
		t.Fatalf("messages after the refused batch = %d, %v; want none", len(msgs), err)
	}
	if open, err := db.OpenBatches(ctx, conv.ID); err != nil || len(open) != 0 {
		t.Fatalf("open batches = %v, %v", open, err)
	}
	b.Calls[0].GrantID, b.Calls[0].DecidedBy = "no-such-grant", "grant:no-such-grant"
	if err := db.CreateBatch(ctx, b, confirm.Message{Role: "assistant", Body: json.RawMessage(`1`)}); !errors.Is(err, confirm.ErrGrantInactive) {
		t.Fatalf("CreateBatch with an unknown grant = %v; want ErrGrantInactive", err)
	}
}

// testMigrateIntegrity upgrades a database at migration 9 holding a
// pending call an approver had edited and a grant: after migration 10 the
// edited call is at revision 1 (buttons posted before, at revision 0, are
// stale), an unedited one at 0, and the grant covers its batch's
// requester.
func testMigrateIntegrity(t *testing.T, driver, dsn string) {
	ctx := t.Context()
	old := openAtMigration(t, driver, dsn, 9)
	ts := old.ts(time.Now())
	exp := old.ts(time.Now().Add(time.Hour))
	conv := newConversation(t, old)
	execSeed(t, old, []seedSQL{
		{`INSERT INTO messages (conversation_id, seq, role, body, created_at) VALUES (?, 1, 'assistant', '{}', ?)`, []any{conv.ID, ts}},
		{`INSERT INTO batches (id, conversation_id, message_seq, requested_by, status, created_at, expires_at, updated_at) VALUES ('b1', ?, 1, 'U-bob', 'pending', ?, ?, ?)`,
			[]any{conv.ID, ts, exp, ts}},
		{`INSERT INTO calls (batch_id, key, position, tool, args, flagged, decision, run_status, idempotency_key, expires_at, approvals, edited_args, edited_by, edited_at)
			VALUES ('b1', 'e', 0, 'deploy', '{}', TRUE, 'pending', 'not_started', 'b1/e', ?, 1, '{"env":"prod"}', 'U-ed', ?)`, []any{exp, ts}},
		{`INSERT INTO calls (batch_id, key, position, tool, args, flagged, decision, run_status, idempotency_key, expires_at, approvals)
			VALUES ('b1', 'p', 1, 'deploy', '{}', TRUE, 'pending', 'not_started', 'b1/p', ?, 1)`, []any{exp}},
		{`INSERT INTO grants (id, conversation_id, tool, created_by, created_at, expires_at, batch_id, call_key) VALUES ('g1', ?, 'deploy', 'U-alice', ?, ?, 'b1', 'p')`,
			[]any{conv.ID, ts, exp}},
	})
	old.Close()

	db := openUpgraded(t, driver, dsn, 9)
	b := loadBatch(t, db, "b1")
	if e, p := callByKey(t, b, "e"), callByKey(t, b, "p"); e.Revision != 1 || p.Revision != 0 {
		t.Fatalf("revisions after the upgrade: edited %d, unedited %d; want 1 and 0", e.Revision, p.Revision)
	}
	if res := decide(t, db, confirm.Decide{BatchID: "b1", Key: "e", Status: confirm.DecisionAllowed, By: "U-alice"}); !res.Stale {
		t.Fatalf("allow of the edited call from a button posted before = %+v; want stale", res)
	}
	g, err := db.Grant(ctx, "g1")
	if err != nil || g.Requester != "U-bob" || g.CreatorRoles != nil {
		t.Fatalf("old grant = %+v, %v; want requester U-bob from its batch", g, err)
	}
}

// An edit's call_edited audit detail holds no secret (WithScrub): the
// model's arguments, an earlier edit's and the new ones; the call keeps
// the edited arguments exact, for the run.
func TestSQLiteEditAuditScrubbed(t *testing.T) {
	const secret = "s3cr3t-t0ken-value"
	scrub := func(s string) string { return strings.ReplaceAll(s, secret, "[redacted]") }
	db := openDB(t, DriverSQLite, filepath.Join(t.TempDir(), "a.db"), WithScrub(scrub))
	b := newBatch(t, db, later(), confirm.DecisionPending)
	edited := `{"token":"` + secret + `"}`
	for rev, args := range []string{`{"n":1,"t":"` + secret + `"}`, edited} {
		if res, err := db.EditCall(t.Context(), confirm.EditCall{BatchID: b.ID, Key: "k0", Args: json.RawMessage(args),
			Summary: "use " + secret, By: "U-ed", Approvals: 2, Revision: rev}); err != nil || !res.Won {
			t.Fatalf("EditCall = %+v, %v", res, err)
		}
	}
	evs, err := db.AuditEvents(t.Context(), confirm.AuditFilter{ConversationID: b.ConversationID})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range evs {
		if e.Kind != confirm.AuditEdited {
			continue
		}
		n++
		if strings.Contains(e.Detail, secret) || !json.Valid([]byte(e.Detail)) || !strings.Contains(e.Detail, "[redacted]") {
			t.Errorf("call_edited detail %s: want valid JSON without the secret", e.Detail)
		}
	}
	if n != 2 {
		t.Fatalf("%d call_edited events, want 2", n)
	}
	if c := callByKey(t, loadBatch(t, db, b.ID), "k0"); string(c.EditedArgs) != edited {
		t.Fatalf("edited arguments %s, want them exact", c.EditedArgs)
	}
}
