package storage

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/airlockhq/airlock/confirm"
)

// messageSyncTests are the contract of card sync beyond a batch's card
// (a run's message, a grant's notice) and of a card's pending copies,
// run by runConformance against each database.
var messageSyncTests = []conformanceTest{
	{"CardCopiesPending", testCardCopiesPending},
	{"RunMessageSync", testRunMessageSync},
	{"GrantNoticeSync", testGrantNoticeSync},
	{"MessageSubjectsApart", testMessageSubjectsApart},
}

// A card recorded with copies to come stays listed for recovery until
// its copies are posted; a card recorded without stays unlisted.
func testCardCopiesPending(t *testing.T, db *DB) {
	ctx := t.Context()
	listed := func(id string) bool {
		t.Helper()
		ids, err := db.UncardedBatches(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return slices.Contains(ids, id)
	}
	b := newBatch(t, db, later(), confirm.DecisionPending)
	if err := db.SetCardRefWithCopies(ctx, b.ID, "C1/1.1"); err != nil {
		t.Fatal(err)
	}
	if got := loadBatch(t, db, b.ID); got.CardRef != "C1/1.1" || !got.CopiesPending {
		t.Fatalf("after SetCardRefWithCopies: ref %q, copies pending %v", got.CardRef, got.CopiesPending)
	}
	if !listed(b.ID) {
		t.Fatal("a card whose copies are pending is not listed for recovery")
	}
	if err := db.CopiesPosted(ctx, b.ID); err != nil {
		t.Fatal(err)
	}
	if got := loadBatch(t, db, b.ID); got.CardRef != "C1/1.1" || got.CopiesPending {
		t.Fatalf("after CopiesPosted: ref %q, copies pending %v", got.CardRef, got.CopiesPending)
	}
	if listed(b.ID) {
		t.Fatal("a card with its copies posted is listed for recovery")
	}
	plain := newBatch(t, db, later(), confirm.DecisionPending)
	if err := db.SetCardRef(ctx, plain.ID, "C1/1.2"); err != nil {
		t.Fatal(err)
	}
	if got := loadBatch(t, db, plain.ID); got.CopiesPending || listed(plain.ID) {
		t.Fatal("a card recorded without copies has copies pending")
	}
	// A batch decided before its copies were posted stays listed (a copy
	// posted but not recorded is adopted, so that it shows the decision)
	// until its copies are done; one decided with its copies done is not.
	decided := newBatch(t, db, later(), confirm.DecisionPending)
	if err := db.SetCardRefWithCopies(ctx, decided.ID, "C1/1.3"); err != nil {
		t.Fatal(err)
	}
	decide(t, db, confirm.Decide{BatchID: decided.ID, Key: "k0", Status: confirm.DecisionDenied, By: "U"})
	if !listed(decided.ID) {
		t.Fatal("a batch decided while its copies were pending is not listed for recovery")
	}
	if err := db.CopiesPosted(ctx, decided.ID); err != nil {
		t.Fatal(err)
	}
	if listed(decided.ID) || listed(b.ID) {
		t.Fatal("a decided batch with its copies done is listed for recovery")
	}
	uncarded := newBatch(t, db, later(), confirm.DecisionPending)
	decide(t, db, confirm.Decide{BatchID: uncarded.ID, Key: "k0", Status: confirm.DecisionDenied, By: "U"})
	if listed(uncarded.ID) {
		t.Fatal("a decided batch without a card is listed for recovery")
	}
	for _, err := range []error{db.SetCardRefWithCopies(ctx, "missing", "x"), db.CopiesPosted(ctx, "missing")} {
		if !errors.Is(err, confirm.ErrNotFound) {
			t.Fatalf("a missing batch: %v, want ErrNotFound", err)
		}
	}
}

func addMessage(t *testing.T, db *DB, m confirm.CardMessage) int64 {
	t.Helper()
	if m.Platform == "" {
		m.Platform = "slack"
	}
	if err := db.AddCardMessage(t.Context(), m); err != nil {
		t.Fatalf("AddCardMessage(%+v): %v", m, err)
	}
	var id int64
	if err := db.get(t.Context(), db.x, &id, db.q(`SELECT id FROM cards WHERE batch_id = ? AND run_id = ? AND grant_id = ? AND ref = ?`),
		m.BatchID, m.RunID, m.GrantID, m.Ref); err != nil {
		t.Fatal(err)
	}
	return id
}

// subjectSync checks the card-sync contract for a subject whose message
// is recorded as m: versions, a change's claim, a message recorded after
// a change made while it was posted, and an unknown subject.
func subjectSync(t *testing.T, db *DB, s confirm.Subject, m confirm.CardMessage) {
	ctx := t.Context()
	m.Platform = "slack"
	claim := confirm.CardClaim{Holder: "r1", TTL: time.Minute, Limit: 8}
	version := func() int64 {
		t.Helper()
		v, err := db.SubjectVersion(ctx, s)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	if claimed, listed, err := db.ChangeAndClaim(ctx, s, claim); err != nil || listed || len(claimed) != 0 || version() != 1 {
		t.Fatalf("no message yet: %v, listed %v, %v; version %d, want 1", claimed, listed, err, version())
	}
	// Posted at version 1, a change landing before it was recorded.
	m.Version = 1
	if _, _, err := db.ChangeAndClaim(ctx, s, claim); err != nil || version() != 2 {
		t.Fatalf("change: %v, version %d", err, version())
	}
	id := addMessage(t, db, m)
	if got := behind(t, db); !slices.Contains(got, id) {
		t.Fatalf("a %s message posted before the latest change is not behind: %v", m.Kind, got)
	}
	c, ok, err := db.ClaimCard(ctx, id, "r2", time.Minute)
	if err != nil || !ok || c.Version != 2 || c.Message.Kind != m.Kind || c.Message.Subject() != s || c.Message.Ref != m.Ref {
		t.Fatalf("ClaimCard = %+v, %v, %v", c, ok, err)
	}
	if ok, err := db.CardRendered(ctx, id, "r2", 2); err != nil || !ok {
		t.Fatalf("CardRendered = %v, %v", ok, err)
	}
	claimed, listed, err := db.ChangeAndClaim(ctx, s, claim)
	if err != nil || !listed || len(claimed) != 1 || claimed[0].ID != id || claimed[0].Version != 3 || claimed[0].Message.Subject() != s {
		t.Fatalf("ChangeAndClaim = %+v, listed %v, %v; want the %s message at version 3", claimed, listed, err, m.Kind)
	}
	if ok, err := db.CardRendered(ctx, id, "r1", 3); err != nil || !ok {
		t.Fatalf("CardRendered = %v, %v", ok, err)
	}
	if got := behind(t, db); slices.Contains(got, id) {
		t.Fatalf("behind after the render: %v", got)
	}
	// Recorded again: a no-op; the same ref as another kind: refused.
	if err := db.AddCardMessage(ctx, m); err != nil {
		t.Fatalf("recording the message again: %v", err)
	}
	other := m
	other.Channel = "C-elsewhere"
	if err := db.AddCardMessage(ctx, other); err == nil {
		t.Fatal("the same reference recorded in another channel")
	}
	unknown := confirm.Subject{Kind: s.Kind, ID: "missing"}
	if claimed, listed, err := db.ChangeAndClaim(ctx, unknown, claim); err != nil || listed || len(claimed) != 0 {
		t.Fatalf("an unknown %s: %v, %v, %v", s.Kind, claimed, listed, err)
	}
	if v, err := db.SubjectVersion(ctx, unknown); err != nil || v != 0 {
		t.Fatalf("SubjectVersion of an unknown %s = %d, %v", s.Kind, v, err)
	}
	m.Ref, m.RunID, m.GrantID = "x/1", "", ""
	if s.Kind == confirm.SubjectRun {
		m.RunID = "missing"
	} else {
		m.GrantID = "missing"
	}
	if err := db.AddCardMessage(ctx, m); !errors.Is(err, confirm.ErrNotFound) {
		t.Fatalf("a message of an unknown %s: %v, want ErrNotFound", s.Kind, err)
	}
}

// A run's message is synced as a card is, by the run's own version.
func testRunMessageSync(t *testing.T, db *DB) {
	r := newRunbookRun(t, db)
	subjectSync(t, db, confirm.Subject{Kind: confirm.SubjectRun, ID: r.ID},
		confirm.CardMessage{RunID: r.ID, Kind: confirm.CardRun, Channel: "C1", Thread: "1.0", Ref: "C1/7.1"})
}

// A grant's notice is synced as a card is, by the grant's own version.
func testGrantNoticeSync(t *testing.T, db *DB) {
	b := newBatch(t, db, later(), confirm.DecisionPending)
	g := &confirm.Grant{ID: fmt.Sprintf("g-%d", threadSeq.Add(1)), Tool: "deploy", ExpiresAt: later()}
	decide(t, db, confirm.Decide{BatchID: b.ID, Key: "k0", Status: confirm.DecisionAllowed, By: "U-bob", Grant: g})
	subjectSync(t, db, confirm.Subject{Kind: confirm.SubjectGrant, ID: g.ID},
		confirm.CardMessage{GrantID: g.ID, Kind: confirm.CardGrant, Channel: "C1", Thread: "1.0", Ref: "C1/7.2"})
}

// Subjects stay apart: a batch's change leaves a run's message in sync,
// a message names exactly its one subject, and two runs may each have a
// message of the same reference (the terminal's refs restart with the
// process).
func testMessageSubjectsApart(t *testing.T, db *DB) {
	ctx := t.Context()
	b := newBatch(t, db, later(), confirm.DecisionPending)
	r1, r2 := newRunbookRun(t, db), newRunbookRun(t, db)
	card := addMessage(t, db, confirm.CardMessage{BatchID: b.ID, Kind: confirm.CardMain, Channel: "C1", Ref: "run-1"})
	run1 := addMessage(t, db, confirm.CardMessage{RunID: r1.ID, Kind: confirm.CardRun, Channel: "C1", Ref: "run-1"})
	run2 := addMessage(t, db, confirm.CardMessage{RunID: r2.ID, Kind: confirm.CardRun, Channel: "C1", Ref: "run-1"})
	if card == run1 || run1 == run2 {
		t.Fatal("messages of different subjects share a row")
	}
	change(t, db, b.ID)
	if got := behind(t, db); !slices.Contains(got, card) || slices.Contains(got, run1) || slices.Contains(got, run2) {
		t.Fatalf("a batch's change: behind = %v, want only its card %d", got, card)
	}
	if _, _, err := db.ChangeAndClaim(ctx, confirm.Subject{Kind: confirm.SubjectRun, ID: r1.ID}, confirm.CardClaim{Holder: "h", TTL: time.Minute}); err != nil {
		t.Fatal(err)
	}
	if got := behind(t, db); slices.Contains(got, run2) {
		t.Fatalf("one run's change put another's message behind: %v", got)
	}
	if msgs, err := db.CardMessages(ctx, b.ID); err != nil || len(msgs) != 1 || msgs[0].Kind != confirm.CardMain {
		t.Fatalf("CardMessages of the batch = %+v, %v: a run's message listed with it", msgs, err)
	}
	for _, bad := range []confirm.CardMessage{
		{RunID: r1.ID, BatchID: b.ID, Kind: confirm.CardRun, Platform: "slack", Channel: "C1", Ref: "x/1"},
		{BatchID: b.ID, RunID: r1.ID, Kind: confirm.CardMain, Platform: "slack", Channel: "C1", Ref: "x/2"},
		{Kind: confirm.CardRun, Platform: "slack", Channel: "C1", Ref: "x/3"},
		{GrantID: "g", Kind: "notice", Platform: "slack", Channel: "C1", Ref: "x/4"},
	} {
		if err := db.AddCardMessage(ctx, bad); err == nil {
			t.Errorf("AddCardMessage(%+v) was accepted", bad)
		}
	}
	if _, _, err := db.ChangeAndClaim(ctx, confirm.Subject{Kind: "thing", ID: "x"}, confirm.CardClaim{Holder: "h", TTL: time.Minute}); err == nil {
		t.Fatal("a change of an unknown kind of subject was accepted")
	}
}

// Migration 24 rebuilds cards (on SQLite) for runs' and grants'
// messages: a card message of an older release keeps its id, its kind
// and place and its sync state (behind, claimed), new ones follow its
// id, and its batch stays without copies pending.
func testMigrateMessageSync(t *testing.T, driver, dsn string) {
	ctx := t.Context()
	old := openAtMigration(t, driver, dsn, 20)
	ts := old.ts(time.Now().Add(-time.Minute))
	exp := old.ts(time.Now().Add(time.Hour))
	execSeed(t, old, []seedSQL{
		{`INSERT INTO conversations (id, platform, channel, thread, created_at) VALUES (7, 'slack', 'C-ops', '1700.000001', ?)`, []any{ts}},
		{`INSERT INTO messages (conversation_id, seq, role, body, created_at) VALUES (7, 1, 'assistant', '{}', ?)`, []any{ts}},
		{`INSERT INTO batches (id, conversation_id, message_seq, status, card_ref, created_at, expires_at, updated_at, card_version)
			VALUES ('b1', 7, 1, 'pending', 'C-ops/1700.000002', ?, ?, ?, 3)`, []any{ts, exp, ts}},
		{`INSERT INTO calls (batch_id, key, position, tool, args, flagged, decision, run_status, idempotency_key, expires_at)
			VALUES ('b1', 'k', 0, 'deploy', '{}', TRUE, 'pending', 'not_started', 'b1/k', ?)`, []any{exp}},
		{`INSERT INTO cards (batch_id, kind, platform, channel, thread, ref, created_at, desired, rendered, changed_at, claimed_by, claimed_until)
			VALUES ('b1', 'main', 'slack', 'C-ops', '1700.000001', 'C-ops/1700.000002', ?, 3, 2, ?, 'r-old', ?)`, []any{ts, ts, ts}},
	})
	var oldID int64
	if err := old.x.GetContext(ctx, &oldID, `SELECT id FROM cards`); err != nil {
		t.Fatal(err)
	}
	db := openUpgraded(t, driver, dsn, 20)
	ms, err := db.CardMessages(ctx, "b1")
	if err != nil || len(ms) != 1 || ms[0].Kind != confirm.CardMain || ms[0].Ref != "C-ops/1700.000002" || ms[0].Thread != "1700.000001" {
		t.Fatalf("the old card message = %+v, %v", ms, err)
	}
	// Behind (3 > 2), its old claim lapsed: listed and claimed as before.
	if got := behind(t, db); !slices.Equal(got, []int64{oldID}) {
		t.Fatalf("behind = %v, want the old message %d", got, oldID)
	}
	if c, ok, err := db.ClaimCard(ctx, oldID, "r1", time.Minute); err != nil || !ok || c.Version != 3 || c.Message.BatchID != "b1" {
		t.Fatalf("ClaimCard of the old message = %+v, %v, %v", c, ok, err)
	}
	v, err := db.CardVersion(ctx, "b1")
	if b := loadBatch(t, db, "b1"); b.CopiesPending || v != 3 || err != nil {
		t.Fatalf("old batch: copies pending %v, card version %d, %v", b.CopiesPending, v, err)
	}
	if id := addMessage(t, db, confirm.CardMessage{BatchID: "b1", Kind: confirm.CardDM, Channel: "D1", Ref: "D1/1"}); id <= oldID {
		t.Fatalf("a new message got id %d, not after the old ones", id)
	}
	if err := db.AddCardMessage(ctx, confirm.CardMessage{BatchID: "b1", Kind: confirm.CardPointer, Platform: "slack", Channel: "C-ops", Ref: "C-ops/1700.000002"}); err == nil {
		t.Fatal("the old card's reference recorded again as a pointer")
	}
}
