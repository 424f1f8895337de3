package storage

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/airlockhq/airlock/confirm"
	"github.com/airlockhq/airlock/events/webhook"
)

var _ confirm.CardStore = (*DB)(nil)

// routeTests are the confirm.CardStore contract, run by runConformance
// against each database.
var routeTests = []conformanceTest{
	{"CardMessages", testCardMessages},
	{"MarkEscalated", testMarkEscalated},
	{"RaceEscalate", testRaceEscalate},
	{"DueEscalations", testDueEscalations},
	{"ExtendBatch", testExtendBatch},
	{"ExtendRefused", testExtendRefused},
	{"EditCallQuorum", testEditCallQuorum},
	{"EditCallHold", testEditCallHold},
	{"EditCallDecides", testEditCallDecides},
	{"EditCallNeverLowers", testEditCallNeverLowers},
	{"EditCallRefused", testEditCallRefused},
	{"RaceEditDecide", testRaceEditDecide},
	{"OutboxRouteEvents", testOutboxRouteEvents},
}

// cardsOf lists a batch's card messages as "kind platform/channel/thread ref".
func cardsOf(t *testing.T, db *DB, batchID string) []string {
	t.Helper()
	ms, err := db.CardMessages(t.Context(), batchID)
	if err != nil {
		t.Fatalf("CardMessages: %v", err)
	}
	var out []string
	for _, m := range ms {
		if m.BatchID != batchID || m.CreatedAt.IsZero() {
			t.Errorf("card message %+v of batch %s", m, batchID)
		}
		out = append(out, fmt.Sprintf("%s %s/%s/%s %s", m.Kind, m.Platform, m.Channel, m.Thread, m.Ref))
	}
	return out
}

func testCardMessages(t *testing.T, db *DB) {
	ctx := t.Context()
	b := newBatch(t, db, later(), confirm.DecisionPending)
	other := newBatch(t, db, later(), confirm.DecisionPending)
	now := time.Now()
	add := func(m confirm.CardMessage) error {
		t.Helper()
		return db.AddCardMessage(ctx, m)
	}
	for i, m := range []confirm.CardMessage{
		{BatchID: b.ID, Kind: confirm.CardMain, Platform: "slack", Channel: "C-approvals", Ref: "C-approvals/1700.000100", CreatedAt: now},
		{BatchID: b.ID, Kind: confirm.CardPointer, Platform: "slack", Channel: "C1", Thread: "T1", Ref: "C1/1700.000200", CreatedAt: now.Add(time.Second)},
		{BatchID: b.ID, Kind: confirm.CardDM, Platform: "slack", Channel: "D-alice", Ref: "D-alice/1700.000300", CreatedAt: now.Add(2 * time.Second)},
		// A DM posted "before" the pointer by the clock still lists after
		// it only when its time says so: order is by time.
		{BatchID: b.ID, Kind: confirm.CardDM, Platform: "slack", Channel: "D-bob", Ref: "D-bob/1700.000400", CreatedAt: now.Add(500 * time.Millisecond)},
	} {
		if err := add(m); err != nil {
			t.Fatalf("AddCardMessage %d: %v", i, err)
		}
	}
	want := []string{
		"main slack/C-approvals/ C-approvals/1700.000100",
		"dm slack/D-bob/ D-bob/1700.000400",
		"pointer slack/C1/T1 C1/1700.000200",
		"dm slack/D-alice/ D-alice/1700.000300",
	}
	if got := cardsOf(t, db, b.ID); !slices.Equal(got, want) {
		t.Fatalf("CardMessages:\n got %q\nwant %q", got, want)
	}
	ms, _ := db.CardMessages(ctx, b.ID)
	if !ms[0].CreatedAt.Equal(utc(now)) {
		t.Errorf("created_at %v, want %v", ms[0].CreatedAt, utc(now))
	}
	if got := cardsOf(t, db, other.ID); len(got) != 0 {
		t.Fatalf("another batch lists %q", got)
	}

	// Recording the same message again (a retried post) changes nothing.
	if err := add(confirm.CardMessage{BatchID: b.ID, Kind: confirm.CardDM, Platform: "slack", Channel: "D-alice", Ref: "D-alice/1700.000300"}); err != nil {
		t.Fatalf("AddCardMessage again: %v", err)
	}
	// The pointer (no buttons) can never be recorded as a clickable card,
	// nor a message be moved to another channel.
	for _, m := range []confirm.CardMessage{
		{BatchID: b.ID, Kind: confirm.CardMain, Platform: "slack", Channel: "C1", Thread: "T1", Ref: "C1/1700.000200"},
		{BatchID: b.ID, Kind: confirm.CardDM, Platform: "slack", Channel: "D-mallory", Ref: "D-alice/1700.000300"},
	} {
		if err := add(m); err == nil || !strings.Contains(err.Error(), "already recorded") {
			t.Errorf("AddCardMessage(%+v) = %v; want already recorded", m, err)
		}
	}
	if got := cardsOf(t, db, b.ID); !slices.Equal(got, want) {
		t.Fatalf("after refused adds:\n got %q\nwant %q", got, want)
	}
	// The same message reference on another batch is that batch's own.
	if err := add(confirm.CardMessage{BatchID: other.ID, Kind: confirm.CardMain, Platform: "slack", Channel: "C1", Ref: "C1/1700.000200"}); err != nil {
		t.Fatal(err)
	}
	if got := cardsOf(t, db, other.ID); len(got) != 1 || got[0] != "main slack/C1/ C1/1700.000200" {
		t.Fatalf("other batch: %q", got)
	}

	for _, bad := range []confirm.CardMessage{
		{BatchID: b.ID, Kind: "button", Platform: "slack", Channel: "C", Ref: "r1"},
		{BatchID: b.ID, Kind: confirm.CardMain, Platform: "slack", Channel: "C", Ref: " "},
		{BatchID: b.ID, Kind: confirm.CardMain, Platform: "", Channel: "C", Ref: "r2"},
		{BatchID: "", Kind: confirm.CardMain, Platform: "slack", Channel: "C", Ref: "r3"},
	} {
		if err := add(bad); err == nil {
			t.Errorf("AddCardMessage(%+v) accepted", bad)
		}
	}
	err := add(confirm.CardMessage{BatchID: "no-such-batch", Kind: confirm.CardMain, Platform: "slack", Channel: "C", Ref: "r"})
	if !errors.Is(err, confirm.ErrNotFound) {
		t.Fatalf("AddCardMessage(missing batch) = %v, want ErrNotFound", err)
	}
	if n := countRows(t, db, "cards"); n != 5 {
		t.Fatalf("%d card rows, want 5", n)
	}
}

// escalationSteps returns the batch's fired steps and its escalated audit
// details.
func escalationSteps(t *testing.T, db *DB, b *confirm.Batch) ([]int, []string) {
	t.Helper()
	var details []string
	for _, e := range auditOf(t, db, b.ConversationID, confirm.AuditEscalated) {
		if e.BatchID != b.ID || e.Actor != "airlock" {
			t.Errorf("escalated event %+v", e)
		}
		details = append(details, e.Detail)
	}
	return loadBatch(t, db, b.ID).Escalated, details
}

func testMarkEscalated(t *testing.T, db *DB) {
	ctx := t.Context()
	now := time.Now()
	b := newBatch(t, db, later(), confirm.DecisionPending, confirm.DecisionPending)
	if steps, _ := escalationSteps(t, db, b); steps != nil {
		t.Fatalf("new batch escalated %v", steps)
	}
	mark := func(id string, step int) bool {
		t.Helper()
		ok, err := clockAt(db, now).MarkEscalated(ctx, id, step)
		if err != nil {
			t.Fatalf("MarkEscalated(%s, %d): %v", id, step, err)
		}
		return ok
	}
	if !mark(b.ID, 1) {
		t.Fatal("first MarkEscalated of step 1 lost")
	}
	if mark(b.ID, 1) {
		t.Fatal("step 1 fired twice")
	}
	if !mark(b.ID, 0) {
		t.Fatal("step 0 after step 1 lost")
	}
	steps, details := escalationSteps(t, db, b)
	if !slices.Equal(steps, []int{0, 1}) || !slices.Equal(details, []string{`{"step":2}`, `{"step":1}`}) {
		t.Fatalf("escalated %v, audit %q", steps, details)
	}
	// Every call still reads back (the steps ride along the batch load).
	if got := loadBatch(t, db, b.ID); len(got.Calls) != 2 || !slices.Equal(got.Escalated, []int{0, 1}) {
		t.Fatalf("batch %+v", got)
	}
	if pb, err := db.PendingBatch(ctx, b.ConversationID); err != nil || !slices.Equal(pb.Escalated, []int{0, 1}) {
		t.Fatalf("PendingBatch = %+v, %v", pb, err)
	}

	// A batch decided (or expired) meanwhile escalates no more.
	decide(t, db, confirm.Decide{BatchID: b.ID, Key: "k0", Status: confirm.DecisionDenied, By: "U-a"})
	decide(t, db, confirm.Decide{BatchID: b.ID, Key: "k1", Status: confirm.DecisionDenied, By: "U-a"})
	if mark(b.ID, 2) {
		t.Fatal("a decided batch escalated")
	}
	if steps, details := escalationSteps(t, db, b); len(steps) != 2 || len(details) != 2 {
		t.Fatalf("after the refused step: %v %q", steps, details)
	}
	if mark("no-such-batch", 0) {
		t.Fatal("a missing batch escalated")
	}
	if _, err := clockAt(db, now).MarkEscalated(ctx, b.ID, -1); err == nil {
		t.Fatal("negative step accepted")
	}
}

// testRaceEscalate: replicas' sweepers racing on one step: exactly one
// wins, one audit row.
func testRaceEscalate(t *testing.T, db *DB) {
	b := newBatch(t, db, later(), confirm.DecisionPending)
	raceEscalate(t, []*DB{db}, b)
}

func raceEscalate(t *testing.T, dbs []*DB, b *confirm.Batch) {
	const n = 12
	wins := raceWins(t, n, func(i int) (bool, error) {
		return dbs[i%len(dbs)].MarkEscalated(t.Context(), b.ID, 0)
	})
	if wins != 1 {
		t.Fatalf("%d of %d racing MarkEscalated won, want 1", wins, n)
	}
	if steps, details := escalationSteps(t, dbs[0], b); !slices.Equal(steps, []int{0}) || len(details) != 1 {
		t.Fatalf("escalated %v, %d audit rows", steps, len(details))
	}
}

// testEscalateReplicas: two replicas (two pools on one database) race on
// each step of several batches: each step fires once.
func testEscalateReplicas(t *testing.T, driver, dsn string) {
	dbs := openReplicas(t, driver, dsn, 2)
	for range 3 {
		raceEscalate(t, dbs, newBatch(t, dbs[0], later(), confirm.DecisionPending))
	}
}

func testDueEscalations(t *testing.T, db *DB) {
	ctx := t.Context()
	t0 := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	mk := func(created time.Time) *confirm.Batch {
		b := &confirm.Batch{ConversationID: newConversation(t, db).ID, CreatedAt: created, ExpiresAt: created.Add(time.Hour),
			Calls: []confirm.Call{{Key: "a", Tool: "t", Args: json.RawMessage(`{}`), Flagged: true}}}
		if err := clockAt(db, b.CreatedAt).CreateBatch(ctx, b, confirm.Message{Role: "assistant", Body: json.RawMessage(`{}`)}); err != nil {
			t.Fatal(err)
		}
		return b
	}
	old, young := mk(t0), mk(t0.Add(5*time.Minute))
	decided := mk(t0)
	decide(t, clockAt(db, t0.Add(time.Minute)), confirm.Decide{BatchID: decided.ID, Key: "a", Status: confirm.DecisionDenied, By: "U"})
	due := func(step int, before time.Time) []string {
		t.Helper()
		ids, err := db.DueEscalations(ctx, step, before)
		if err != nil {
			t.Fatalf("DueEscalations: %v", err)
		}
		// Other tests' batches share the database only in their own
		// conversations; keep this test's.
		return slices.DeleteFunc(ids, func(id string) bool { return id != old.ID && id != young.ID && id != decided.ID })
	}
	if got := due(0, t0.Add(-time.Second)); len(got) != 0 {
		t.Fatalf("due before any pause: %v", got)
	}
	if got := due(0, t0); !slices.Equal(got, []string{old.ID}) {
		t.Fatalf("due at the pause = %v, want the old batch (created at or before)", got)
	}
	if got := due(0, t0.Add(10*time.Minute)); !slices.Equal(got, []string{old.ID, young.ID}) {
		t.Fatalf("due later = %v, want both pending, oldest first", got)
	}
	if ok, err := clockAt(db, t0.Add(10*time.Minute)).MarkEscalated(ctx, old.ID, 0); err != nil || !ok {
		t.Fatal(ok, err)
	}
	if got := due(0, t0.Add(10*time.Minute)); !slices.Equal(got, []string{young.ID}) {
		t.Fatalf("due after step 0 fired on the old batch = %v", got)
	}
	if got := due(1, t0.Add(10*time.Minute)); !slices.Equal(got, []string{old.ID, young.ID}) {
		t.Fatalf("step 1 = %v: another step's firing must not hide it", got)
	}
}

// extendBatch is a batch in a new conversation with a pending call "a"
// needing approvals, created at t0 and expiring at t0+10m, reminded.
func extendBatch(t *testing.T, db *DB, t0 time.Time, approvals int) *confirm.Batch {
	t.Helper()
	b := &confirm.Batch{ConversationID: newConversation(t, db).ID, RequestedBy: "U-author", CreatedAt: t0, ExpiresAt: t0.Add(10 * time.Minute),
		Calls: []confirm.Call{
			{Key: "a", Position: 0, Tool: "deploy", Args: json.RawMessage(`{"env":"prod"}`), Flagged: true, Approvals: approvals},
			{Key: "p", Position: 1, Tool: "read", Args: json.RawMessage(`{}`), Decision: confirm.DecisionAllowedByPolicy, DecidedBy: "policy"},
		}}
	if err := clockAt(db, b.CreatedAt).CreateBatch(t.Context(), b, confirm.Message{Role: "assistant", Body: json.RawMessage(`{}`)}); err != nil {
		t.Fatal(err)
	}
	if ok, err := clockAt(db, t0.Add(8*time.Minute)).MarkReminded(t.Context(), b.ID); err != nil || !ok {
		t.Fatal(ok, err)
	}
	return b
}

func testExtendBatch(t *testing.T, db *DB) {
	ctx := t.Context()
	t0 := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	b := extendBatch(t, db, t0, 1)
	at, until := t0.Add(9*time.Minute), t0.Add(40*time.Minute)
	if ok, err := clockAt(db, at).ExtendBatch(ctx, b.ID, "U-alice", until); err != nil || !ok {
		t.Fatalf("ExtendBatch = %v, %v", ok, err)
	}
	if ok, err := clockAt(db, at.Add(time.Second)).ExtendBatch(ctx, b.ID, "U-bob", until.Add(time.Hour)); err != nil || ok {
		t.Fatalf("second ExtendBatch = %v, %v; want false (once per card)", ok, err)
	}
	got := loadBatch(t, db, b.ID)
	if !got.ExpiresAt.Equal(until) || got.ExtendedBy != "U-alice" || got.ExtendedAt == nil || !got.ExtendedAt.Equal(at) {
		t.Fatalf("batch after extend: expires %v, by %q at %v", got.ExpiresAt, got.ExtendedBy, got.ExtendedAt)
	}
	if c := callByKey(t, got, "a"); !c.ExpiresAt.Equal(until) {
		t.Fatalf("pending call expires %v, want %v", c.ExpiresAt, until)
	}
	// The reminder may fire again before the new deadline, not before.
	if ids, _ := clockAt(db, at).DueReminders(ctx, at.Add(2*time.Minute)); slices.Contains(ids, b.ID) {
		t.Fatal("reminder due long before the new deadline")
	}
	if ids, _ := clockAt(db, until.Add(-3*time.Minute)).DueReminders(ctx, until.Add(2*time.Minute)); !slices.Contains(ids, b.ID) {
		t.Fatalf("reminder not due again before the new deadline: %v", ids)
	}
	// The sweeper leaves it alone past the old deadline, and a click then wins.
	past := t0.Add(20 * time.Minute)
	if ids, _ := clockAt(db, past).ExpiredBatches(ctx); slices.Contains(ids, b.ID) {
		t.Fatal("extended batch expired at its old deadline")
	}
	if res := decide(t, clockAt(db, past), confirm.Decide{BatchID: b.ID, Key: "a", Status: confirm.DecisionAllowed, By: "U-bob"}); !res.Won || !res.BatchDecided {
		t.Fatalf("Decide after the old deadline = %+v; want won", res)
	}
	evs := auditOf(t, db, b.ConversationID, confirm.AuditExtended)
	if len(evs) != 1 || evs[0].Actor != "U-alice" || evs[0].BatchID != b.ID || !evs[0].At.Equal(at) {
		t.Fatalf("extended events %+v", evs)
	}
	var d struct{ Until, Before time.Time }
	if err := json.Unmarshal([]byte(evs[0].Detail), &d); err != nil || !d.Until.Equal(until) || !d.Before.Equal(t0.Add(10*time.Minute)) {
		t.Fatalf("extended detail %s (%v)", evs[0].Detail, err)
	}
	if ok, _ := clockAt(db, past).ExtendBatch(ctx, b.ID, "U-carol", until.Add(time.Hour)); ok {
		t.Fatal("a decided batch was extended")
	}
}

func testExtendRefused(t *testing.T, db *DB) {
	ctx := t.Context()
	t0 := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	b := extendBatch(t, db, t0, 1)
	for _, c := range []struct {
		what       string
		until, now time.Time
	}{
		{"at its deadline", t0.Add(time.Hour), t0.Add(10 * time.Minute)},
		{"after its deadline", t0.Add(time.Hour), t0.Add(11 * time.Minute)},
		{"to an earlier deadline", t0.Add(5 * time.Minute), t0.Add(time.Minute)},
		{"to the same deadline", t0.Add(10 * time.Minute), t0.Add(time.Minute)},
	} {
		if ok, err := clockAt(db, c.now).ExtendBatch(ctx, b.ID, "U-alice", c.until); err != nil || ok {
			t.Errorf("ExtendBatch %s = %v, %v; want false", c.what, ok, err)
		}
	}
	if ok, err := clockAt(db, t0).ExtendBatch(ctx, "no-such-batch", "U-alice", t0.Add(time.Hour)); err != nil || ok {
		t.Errorf("ExtendBatch(missing) = %v, %v", ok, err)
	}
	if _, err := clockAt(db, t0).ExtendBatch(ctx, b.ID, "", t0.Add(time.Hour)); err == nil {
		t.Error("ExtendBatch without an actor accepted")
	}
	got := loadBatch(t, db, b.ID)
	if !got.ExpiresAt.Equal(t0.Add(10*time.Minute)) || got.ExtendedBy != "" || got.ExtendedAt != nil ||
		!callByKey(t, got, "a").ExpiresAt.Equal(t0.Add(10*time.Minute)) {
		t.Fatalf("refused extends changed the batch: %+v", got)
	}
	if evs := auditOf(t, db, b.ConversationID, confirm.AuditExtended); len(evs) != 0 {
		t.Fatalf("refused extends audited: %+v", evs)
	}
	// A batch that never expires has nothing to push.
	never := newBatch(t, db, time.Time{}, confirm.DecisionPending)
	if ok, err := db.ExtendBatch(ctx, never.ID, "U-alice", later()); err != nil || ok {
		t.Errorf("ExtendBatch(never expires) = %v, %v", ok, err)
	}
}

// editDetailOf decodes the call's call_edited audit events.
type editAudit struct {
	Before       json.RawMessage `json:"before"`
	PreviousEdit json.RawMessage `json:"previous_edit"`
	After        json.RawMessage `json:"after"`
	Voided       []string        `json:"voided"`
	Approvals    int             `json:"approvals"`
}

func editsOf(t *testing.T, db *DB, convID int64) ([]confirm.AuditEvent, []editAudit) {
	t.Helper()
	evs := auditOf(t, db, convID, confirm.AuditEdited)
	ds := make([]editAudit, len(evs))
	for i, e := range evs {
		if err := json.Unmarshal([]byte(e.Detail), &ds[i]); err != nil {
			t.Fatalf("call_edited detail %s: %v", e.Detail, err)
		}
	}
	return evs, ds
}

// testEditCallQuorum: a call needing two approvals, allowed by A, edited
// by B: A's vote is void (it approved other arguments), B's edit is B's
// vote, and A's allow then decides the edited call.
func testEditCallQuorum(t *testing.T, db *DB) {
	ctx := t.Context()
	b := quorumBatch(t, db, 2, later())
	now := time.Now()
	decide(t, clockAt(db, now), confirm.Decide{BatchID: b.ID, Key: "q", Status: confirm.DecisionAllowed, By: "U-a"})
	// Hostile text stays data: exact bytes, no HTML escaping, in storage
	// and the audit.
	const edited = `{"env": "staging", "note": "<!channel> </b>&"}`
	res, err := clockAt(db, now.Add(time.Second)).EditCall(ctx, confirm.EditCall{BatchID: b.ID, Key: "q", Args: json.RawMessage(edited), Summary: "deploy staging",
		By: "U-b", Approvals: 2, Restrict: []confirm.Approvers{{Users: []string{"U-a", "U-b", "U-c"}}},
		Reasons: []confirm.Reason{{Kind: confirm.ReasonRule, Rule: "staging"}}, Grantable: false})
	if err != nil {
		t.Fatal(err)
	}
	if res != (confirm.DecideResult{Won: true, Votes: 1, Required: 2}) {
		t.Fatalf("EditCall = %+v; want won, 1 of 2", res)
	}
	c := callByKey(t, loadBatch(t, db, b.ID), "q")
	if string(c.Args) != `{"env":"prod"}` || string(c.EditedArgs) != edited || string(c.RunArgs()) != edited {
		t.Fatalf("args %s, edited %s: the model's bytes must stay, the edit beside them", c.Args, c.EditedArgs)
	}
	if c.EditedBy != "U-b" || c.EditedAt == nil || !c.EditedAt.Equal(utc(now.Add(time.Second))) || c.Summary != "deploy staging" ||
		c.Approvals != 2 || c.Grantable || len(c.Restrict) != 1 || len(c.Reasons) != 1 || c.Reasons[0].Rule != "staging" {
		t.Fatalf("edited call = %+v", c)
	}
	if c.Decision != confirm.DecisionPending || voters(c) != "U-b" {
		t.Fatalf("after the edit: %s, votes %q; want pending, B's vote only", c.Decision, voters(c))
	}
	evs, ds := editsOf(t, db, b.ConversationID)
	if len(evs) != 1 || evs[0].Actor != "U-b" || evs[0].CallKey != "q" || evs[0].Tool != "deploy" {
		t.Fatalf("call_edited events %+v", evs)
	}
	d := ds[0]
	if string(d.Before) != `{"env":"prod"}` || string(d.PreviousEdit) != "null" || string(d.After) != edited ||
		!slices.Equal(d.Voided, []string{"U-a"}) || d.Approvals != 2 {
		t.Fatalf("call_edited detail %s", evs[0].Detail)
	}
	if !strings.Contains(evs[0].Detail, `"after":`+edited) {
		t.Fatalf("detail %s: want the edited bytes verbatim", evs[0].Detail)
	}

	// B cannot count twice; A's allow now approves the edited call.
	if res := decide(t, clockAt(db, now.Add(2*time.Second)), confirm.Decide{BatchID: b.ID, Key: "q", Status: confirm.DecisionAllowed, By: "U-b", Revision: 1}); res.Won || !res.AlreadyVoted {
		t.Fatalf("B again = %+v", res)
	}
	res = decide(t, clockAt(db, now.Add(3*time.Second)), confirm.Decide{BatchID: b.ID, Key: "q", Status: confirm.DecisionAllowed, By: "U-a", Revision: 1})
	if !res.Won || !res.Decided || res.Votes != 2 || res.Required != 2 {
		t.Fatalf("A after the edit = %+v", res)
	}
	c = callByKey(t, loadBatch(t, db, b.ID), "q")
	if c.Decision != confirm.DecisionAllowed || c.DecidedBy != "U-a" || voters(c) != "U-b U-a" || string(c.RunArgs()) != edited {
		t.Fatalf("decided call = %+v", c)
	}
	// An approval event per vote, the voided one included (audit is
	// append-only); the edit sits between.
	var kinds []string
	for _, k := range auditKinds(t, db, b.ConversationID) {
		if strings.HasSuffix(k, ":q") {
			kinds = append(kinds, k)
		}
	}
	if want := []string{"tool_call:q", "approval:q", "call_edited:q", "approval:q", "approval:q", "decision:q"}; !slices.Equal(kinds, want) {
		t.Fatalf("audit of q = %v, want %v", kinds, want)
	}
}

// testEditCallDecides: with one approval needed the edit is the editor's
// allow: it decides the call, and the batch when it was the last.
func testEditCallDecides(t *testing.T, db *DB) {
	ctx := t.Context()
	b := newBatch(t, db, later(), confirm.DecisionPending, confirm.DecisionPending)
	now := time.Now()
	first := `{"n": 10}`
	res, err := clockAt(db, now).EditCall(ctx, confirm.EditCall{BatchID: b.ID, Key: "k0", Args: json.RawMessage(first), Summary: "deploy 10", By: "U-ed"})
	if err != nil || res != (confirm.DecideResult{Won: true, Decided: true, Votes: 1, Required: 1}) {
		t.Fatalf("EditCall = %+v, %v; want decided, batch still pending", res, err)
	}
	c := callByKey(t, loadBatch(t, db, b.ID), "k0")
	if c.Decision != confirm.DecisionAllowed || c.DecidedBy != "U-ed" || c.Approvals != 1 || string(c.Args) != `{"n": 0}` || string(c.EditedArgs) != first {
		t.Fatalf("call = %+v", c)
	}
	// The last pending call: a re-edit whose verdict needs one approval
	// decides it (a re-edit of the same pending call records the previous
	// edit). A first edit with a hold stores it without a vote.
	res, err = clockAt(db, now).EditCall(ctx, confirm.EditCall{BatchID: b.ID, Key: "k1", Args: json.RawMessage(`{"n": 11}`), By: "U-x", Approvals: 1, Hold: true})
	if err != nil || res != (confirm.DecideResult{Won: true, Required: 1}) {
		t.Fatalf("EditCall k1 = %+v, %v", res, err)
	}
	res, err = clockAt(db, now.Add(time.Second)).EditCall(ctx, confirm.EditCall{BatchID: b.ID, Key: "k1", Args: json.RawMessage(`{"n": 12}`), By: "U-y", Approvals: 0, Revision: 1})
	decided := res.Batch
	res.Batch = nil
	if err != nil || res != (confirm.DecideResult{Won: true, Decided: true, BatchDecided: true, Votes: 1, Required: 1}) {
		t.Fatalf("re-edit = %+v, %v; want the batch decided", res, err)
	}
	got := loadBatch(t, db, b.ID)
	if !reflect.DeepEqual(decided, got) {
		t.Fatalf("the edit returned the batch\n%+v\nstored\n%+v", decided, got)
	}
	if c := callByKey(t, got, "k1"); got.Status != confirm.BatchDecided || c.DecidedBy != "U-y" || string(c.EditedArgs) != `{"n": 12}` ||
		c.EditedBy != "U-y" || voters(c) != "" || c.Approvals != 1 {
		t.Fatalf("batch %s, call %+v", got.Status, c)
	}
	_, ds := editsOf(t, db, b.ConversationID)
	if len(ds) != 3 || string(ds[2].Before) != `{"n": 1}` || string(ds[2].PreviousEdit) != `{"n": 11}` ||
		string(ds[2].After) != `{"n": 12}` || len(ds[2].Voided) != 0 || len(ds[0].Voided) != 0 {
		t.Fatalf("edits %+v", ds)
	}
	// The decisions are written as Decide writes an allow, from the edit form.
	for _, e := range auditOf(t, db, b.ConversationID, confirm.AuditDecision) {
		if e.Detail != decisionDetailFrom(confirm.DecisionAllowed, "", "", confirm.SurfaceEdit, false) {
			t.Errorf("decision %+v", e)
		}
	}
}

// testEditCallRefused: an edit of a call no longer pending, or past its
// expiry, or with bad input, changes nothing.
func testEditCallRefused(t *testing.T, db *DB) {
	ctx := t.Context()
	now := time.Now()
	b := newBatch(t, db, now.Add(time.Minute), confirm.DecisionPending, confirm.DecisionPending, confirm.DecisionPending)
	decide(t, clockAt(db, now), confirm.Decide{BatchID: b.ID, Key: "k0", Status: confirm.DecisionDenied, By: "U-a"})
	before := loadBatch(t, db, b.ID)
	audits := countRows(t, db, "audit")
	edit := func(key string, at time.Time, args string) (confirm.DecideResult, error) {
		return clockAt(db, at).EditCall(ctx, confirm.EditCall{BatchID: b.ID, Key: key, Args: json.RawMessage(args), Summary: "x", By: "U-b", Approvals: 1})
	}
	if res, err := edit("k0", now, `{"n": 9}`); err != nil || res.Won {
		t.Fatalf("edit of a denied call = %+v, %v; want not won", res, err)
	}
	if res, err := edit("k1", now.Add(time.Minute), `{"n": 9}`); err != nil || res.Won {
		t.Fatalf("edit at the expiry = %+v, %v; want not won", res, err)
	}
	if res, err := edit("k1", now.Add(2*time.Minute), `{"n": 9}`); err != nil || res.Won {
		t.Fatalf("edit after the expiry = %+v, %v; want not won", res, err)
	}
	for _, bad := range []string{``, `{"n": `, `not json`} {
		if _, err := edit("k1", now, bad); err == nil {
			t.Errorf("edit with arguments %q accepted", bad)
		}
	}
	if _, err := clockAt(db, now).EditCall(ctx, confirm.EditCall{BatchID: b.ID, Key: "k1", Args: json.RawMessage(`{}`)}); err == nil {
		t.Error("edit without an editor accepted")
	}
	if _, err := edit("nope", now, `{}`); !errors.Is(err, confirm.ErrNotFound) {
		t.Errorf("edit of a missing call = %v, want ErrNotFound", err)
	}
	if _, err := clockAt(db, now).EditCall(ctx, confirm.EditCall{BatchID: "no-such", Key: "k1", Args: json.RawMessage(`{}`), By: "U"}); !errors.Is(err, confirm.ErrNotFound) {
		t.Errorf("edit in a missing batch = %v, want ErrNotFound", err)
	}
	after := loadBatch(t, db, b.ID)
	for i := range before.Calls {
		bc, ac := before.Calls[i], after.Calls[i]
		if string(bc.Args) != string(ac.Args) || ac.EditedArgs != nil || ac.EditedBy != "" || ac.Summary != bc.Summary || ac.Decision != bc.Decision {
			t.Errorf("refused edits changed call %s: %+v", bc.Key, ac)
		}
	}
	if n := countRows(t, db, "audit"); n != audits {
		t.Fatalf("refused edits wrote %d audit rows", n-audits)
	}
	// Once the batch is decided, nothing is editable.
	if _, err := clockAt(db, now.Add(2*time.Minute)).ExpirePending(ctx, b.ID, "airlock", confirm.ExpiredMessage); err != nil {
		t.Fatal(err)
	}
	if res, err := edit("k1", now, `{"n": 9}`); err != nil || res.Won {
		t.Fatalf("edit in a decided batch = %+v, %v", res, err)
	}
}

// testRaceEditDecide: an allow and an edit of one call needing one
// approval racing: exactly one decides it, and the edited arguments run
// only under the editor's decision.
func testRaceEditDecide(t *testing.T, db *DB) {
	for range 5 {
		b := newBatch(t, db, later(), confirm.DecisionPending)
		var (
			wg         sync.WaitGroup
			dres, eres confirm.DecideResult
			derr, eerr error
		)
		start := make(chan struct{})
		wg.Go(func() {
			<-start
			dres, derr = db.Decide(t.Context(), confirm.Decide{BatchID: b.ID, Key: "k0", Status: confirm.DecisionAllowed, By: "U-a"})
		})
		wg.Go(func() {
			<-start
			eres, eerr = db.EditCall(t.Context(), confirm.EditCall{BatchID: b.ID, Key: "k0", Args: json.RawMessage(`{"n": 99}`), By: "U-b", Approvals: 1})
		})
		close(start)
		wg.Wait()
		if derr != nil || eerr != nil {
			t.Fatal(derr, eerr)
		}
		if dres.Decided == eres.Decided {
			t.Fatalf("decide %+v, edit %+v: want exactly one to decide", dres, eres)
		}
		c := callByKey(t, loadBatch(t, db, b.ID), "k0")
		if dres.Decided && (c.DecidedBy != "U-a" || c.EditedArgs != nil) || eres.Decided && (c.DecidedBy != "U-b" || string(c.EditedArgs) != `{"n": 99}`) {
			t.Fatalf("decide %+v, edit %+v, call %+v", dres, eres, c)
		}
	}
}

// testOutboxRouteEvents: extend, escalation and edit are webhook events
// written with their audit rows; an edited call's later events carry the
// edited arguments with the model's beside them; other events keep their
// shape.
func testOutboxRouteEvents(t *testing.T, db *DB) {
	ctx := t.Context()
	setWebhooks(t, db, WebhookTarget{ID: "all"}, WebhookTarget{ID: "edits", Events: []webhook.EventType{webhook.EventCallEdited}})
	t0 := time.Now().Truncate(time.Second)
	b := extendBatch(t, db, t0, 1)
	if ok, err := clockAt(db, t0.Add(time.Minute)).MarkEscalated(ctx, b.ID, 0); err != nil || !ok {
		t.Fatal(ok, err)
	}
	until := t0.Add(time.Hour)
	if ok, err := clockAt(db, t0.Add(2*time.Minute)).ExtendBatch(ctx, b.ID, "U-alice", until); err != nil || !ok {
		t.Fatal(ok, err)
	}
	const edited = `{"env": "<staging>"}`
	if res, err := clockAt(db, t0.Add(3*time.Minute)).EditCall(ctx, confirm.EditCall{BatchID: b.ID, Key: "a", Args: json.RawMessage(edited), By: "U-bob", Approvals: 1}); err != nil || !res.Decided {
		t.Fatal(res, err)
	}
	all := deliveries(t, db, DeliveryFilter{Target: "all", ConversationID: b.ConversationID})
	if got, want := types(all), "tool_call:a tool_call:p approval_request: escalated: extended: call_edited:a decision:a"; got != want {
		t.Fatalf("all:\n got %s\nwant %s", got, want)
	}
	if got := types(deliveries(t, db, DeliveryFilter{Target: "edits"})); got != "call_edited:a" {
		t.Fatalf("edits: %s", got)
	}
	ev := map[webhook.EventType]webhook.Event{}
	body := map[webhook.EventType]string{}
	for _, d := range all {
		var e webhook.Event
		if err := json.Unmarshal(d.Body, &e); err != nil {
			t.Fatal(err)
		}
		ev[d.Type], body[d.Type] = e, string(d.Body)
	}
	if e := ev[webhook.EventEscalated]; e.Step == nil || *e.Step != 1 || e.Actor != "airlock" || e.Batch != b.ID || e.Args != nil {
		t.Errorf("escalated = %s", body[webhook.EventEscalated])
	}
	if e := ev[webhook.EventExtended]; e.Expires == nil || !e.Expires.Equal(until) || e.Actor != "U-alice" || e.Batch != b.ID || e.Step != nil {
		t.Errorf("extended = %s", body[webhook.EventExtended])
	}
	for _, typ := range []webhook.EventType{webhook.EventCallEdited, webhook.EventDecision} {
		e := ev[typ]
		if string(e.Args) != edited || string(e.ModelArgs) != `{"env":"prod"}` || e.Actor != "U-bob" || e.Call != "a" {
			t.Errorf("%s = %s; want args the edit, model_args the model's", typ, body[typ])
		}
		if !strings.Contains(body[typ], `"args":`+edited+`,"model_args":{"env":"prod"},`) {
			t.Errorf("%s body %s: want both argument sets verbatim", typ, body[typ])
		}
	}
	// Unedited calls' events are as before: no model_args, no step.
	for _, typ := range []webhook.EventType{webhook.EventToolCall, webhook.EventApprovalRequest} {
		if strings.Contains(body[typ], "model_args") || strings.Contains(body[typ], `"step"`) {
			t.Errorf("%s = %s", typ, body[typ])
		}
	}
	if e := ev[webhook.EventToolCall]; string(e.Args) != `{}` { // the last tool_call kept is p's
		t.Errorf("tool_call = %s", body[webhook.EventToolCall])
	}
	// Each new event is written in its audit row's transaction.
	audits, outbox := countRows(t, db, "audit"), countRows(t, db, "outbox")
	boom := errors.New("boom")
	if err := db.tx(ctx, func(tx *txn) error {
		if err := db.insertAudit(ctx, tx, confirm.AuditEvent{Kind: confirm.AuditEscalated, ConversationID: b.ConversationID, BatchID: b.ID, Detail: `{"step":3}`}); err != nil {
			return err
		}
		return boom
	}); !errors.Is(err, boom) {
		t.Fatal(err)
	}
	if a, o := countRows(t, db, "audit"), countRows(t, db, "outbox"); a != audits || o != outbox {
		t.Fatalf("rolled back: audit %d→%d, outbox %d→%d", audits, a, outbox, o)
	}
}

// testMigrateCards builds a database as the release before migration 006
// left it, with a batch whose card was posted (card_ref) and one whose was
// not, and checks Open upgrades it: the posted card is listed as the
// batch's main card in the conversation's thread, so it keeps accepting
// clicks, and the new columns read back empty.
func testMigrateCards(t *testing.T, driver, dsn string) {
	ctx := t.Context()
	old := openAtMigration(t, driver, dsn, 5)
	created := time.Now().Add(-time.Minute)
	ts, exp := old.ts(created), old.ts(created.Add(time.Hour))
	execSeed(t, old, []seedSQL{
		{`INSERT INTO conversations (id, platform, channel, thread, created_at) VALUES (7, 'slack', 'C-ops', '1700.000001', ?)`, []any{ts}},
		{`INSERT INTO messages (conversation_id, seq, role, body, created_at) VALUES (7, 1, 'assistant', '{}', ?)`, []any{ts}},
		{`INSERT INTO messages (conversation_id, seq, role, body, created_at) VALUES (7, 2, 'assistant', '{}', ?)`, []any{ts}},
		{`INSERT INTO batches (id, conversation_id, message_seq, status, card_ref, created_at, expires_at, updated_at, reminded_at)
			VALUES ('b1', 7, 1, 'pending', 'C-ops/1700.000002', ?, ?, ?, ?)`, []any{ts, exp, ts, ts}},
		{`INSERT INTO batches (id, conversation_id, message_seq, status, created_at, expires_at, updated_at)
			VALUES ('b2', 7, 2, 'pending', ?, ?, ?)`, []any{ts, exp, ts}},
		{`INSERT INTO calls (batch_id, key, position, tool, args, flagged, decision, run_status, idempotency_key, expires_at, approvals)
			VALUES ('b1', 'k', 0, 'deploy', '{"a": 1}', TRUE, 'pending', 'not_started', 'b1/k', ?, 2)`, []any{exp}},
		{`INSERT INTO calls (batch_id, key, position, tool, args, flagged, decision, run_status, idempotency_key, expires_at, approvals)
			VALUES ('b2', 'k', 0, 'deploy', '{}', TRUE, 'pending', 'not_started', 'b2/k', ?, 1)`, []any{exp}},
		{`INSERT INTO votes (batch_id, key, approver, at) VALUES ('b1', 'k', 'U-early', ?)`, []any{ts}},
	})

	db := openUpgraded(t, driver, dsn, 5)
	ms, err := db.CardMessages(ctx, "b1")
	if err != nil {
		t.Fatal(err)
	}
	want := confirm.CardMessage{BatchID: "b1", Kind: confirm.CardMain, Platform: "slack", Channel: "C-ops", Thread: "1700.000001",
		Ref: "C-ops/1700.000002", CreatedAt: utc(created)}
	if len(ms) == 1 && ms[0].CreatedAt.Equal(want.CreatedAt) {
		ms[0].CreatedAt = want.CreatedAt
	}
	if len(ms) != 1 || ms[0] != want {
		t.Fatalf("backfilled cards of b1 = %+v, want %+v", ms, want)
	}
	if ms, err := db.CardMessages(ctx, "b2"); err != nil || len(ms) != 0 {
		t.Fatalf("b2 had no card posted; cards %+v, %v", ms, err)
	}
	b := loadBatch(t, db, "b1")
	if b.CardRef != "C-ops/1700.000002" || b.ExtendedBy != "" || b.ExtendedAt != nil || b.Escalated != nil {
		t.Fatalf("old batch = %+v", b)
	}
	if b.Intro != nil { // migration 007: its card reads the words from the message
		t.Fatalf("old batch's intro = %q, want none stored", *b.Intro)
	}
	if c := b.Calls[0]; c.EditedArgs != nil || c.EditedBy != "" || c.EditedAt != nil || string(c.RunArgs()) != `{"a": 1}` || voters(c) != "U-early" {
		t.Fatalf("old call = %+v", c)
	}
	// The old batch takes the new writes.
	if ok, err := db.ExtendBatch(ctx, "b1", "U-alice", created.Add(2*time.Hour)); err != nil || !ok {
		t.Fatalf("ExtendBatch on the old batch = %v, %v", ok, err)
	}
	if ok, err := db.MarkEscalated(ctx, "b1", 0); err != nil || !ok {
		t.Fatalf("MarkEscalated on the old batch = %v, %v", ok, err)
	}
	// The edit keeps the old call's two approvals (an edit never lowers
	// them): the editor's vote is one of two.
	res, err := db.EditCall(ctx, confirm.EditCall{BatchID: "b1", Key: "k", Args: json.RawMessage(`{"a": 2}`), By: "U-bob", Approvals: 1})
	if err != nil || res != (confirm.DecideResult{Won: true, Votes: 1, Required: 2}) {
		t.Fatalf("EditCall on the old call = %+v, %v", res, err)
	}
	if err := db.AddCardMessage(ctx, confirm.CardMessage{BatchID: "b1", Kind: confirm.CardDM, Platform: "slack", Channel: "D1", Ref: "D1/1"}); err != nil {
		t.Fatal(err)
	}
	if got := cardsOf(t, db, "b1"); len(got) != 2 || got[0] != "main slack/C-ops/1700.000001 C-ops/1700.000002" {
		t.Fatalf("cards after the upgrade: %q", got)
	}
}

// testEditCallHold: an edit with Hold (a critical call, whose Allow needs
// its phrase) stores the arguments and the next revision and audits the
// edit, but casts no vote: the call and its batch wait; an allow at the
// new revision then decides it.
func testEditCallHold(t *testing.T, db *DB) {
	ctx := t.Context()
	b := newBatch(t, db, later(), confirm.DecisionPending)
	now := time.Now()
	const edited = `{"env":"staging"}`
	res, err := clockAt(db, now).EditCall(ctx, confirm.EditCall{BatchID: b.ID, Key: "k0", Args: json.RawMessage(edited),
		Summary: "deploy staging", By: "U-bob", Approvals: 1, Risk: confirm.RiskCritical, Hold: true})
	if err != nil || res != (confirm.DecideResult{Won: true, Required: 1}) {
		t.Fatalf("EditCall with Hold = %+v, %v; want won, no vote", res, err)
	}
	got := loadBatch(t, db, b.ID)
	c := callByKey(t, got, "k0")
	if c.Decision != confirm.DecisionPending || len(c.Votes) != 0 || c.Revision != 1 || string(c.RunArgs()) != edited ||
		c.Risk != confirm.RiskCritical || got.Status != confirm.BatchPending {
		t.Fatalf("held call = %+v (batch %s); want pending at revision 1 with the edit and no vote", c, got.Status)
	}
	kinds := auditKinds(t, db, b.ConversationID)
	if !slices.Contains(kinds, "call_edited:k0") || slices.Contains(kinds, "decision:k0") {
		t.Fatalf("audit after a held edit: %v", kinds)
	}
	res = decide(t, clockAt(db, now.Add(time.Second)), confirm.Decide{BatchID: b.ID, Key: "k0", Status: confirm.DecisionAllowed, By: "U-bob", Revision: 1})
	if !res.Won || !res.Decided {
		t.Fatalf("allow after the held edit = %+v", res)
	}
}

// testEditCallNeverLowers (issue 34, item 1): an edit whose verdict asks
// less than the call needed lowers nothing. A call of two approvals,
// allowed by A, edited by B with a verdict of one: B's vote is one of two
// (A's is void) and the call waits; a critical call edited with a verdict
// of medium and no hold is held (no vote: its Allow needs its phrase) and
// stays critical; neither becomes grantable.
func testEditCallNeverLowers(t *testing.T, db *DB) {
	ctx := t.Context()
	now := time.Now()
	b := quorumBatch(t, db, 2, later())
	decide(t, clockAt(db, now), confirm.Decide{BatchID: b.ID, Key: "q", Status: confirm.DecisionAllowed, By: "U-a"})
	res, err := clockAt(db, now).EditCall(ctx, confirm.EditCall{BatchID: b.ID, Key: "q", Args: json.RawMessage(`{"env":"prod"}`),
		By: "U-b", Approvals: 1, Grantable: true, Risk: confirm.RiskMedium})
	if err != nil || res != (confirm.DecideResult{Won: true, Votes: 1, Required: 2}) {
		t.Fatalf("EditCall = %+v, %v; want 1 of the 2 approvals the call needed", res, err)
	}
	c := callByKey(t, loadBatch(t, db, b.ID), "q")
	if c.Decision != confirm.DecisionPending || c.Approvals != 2 || c.Grantable || voters(c) != "U-b" {
		t.Fatalf("edited call = %+v; want pending, 2 approvals, not grantable, B's vote", c)
	}
	if _, ds := editsOf(t, db, b.ConversationID); len(ds) != 1 || ds[0].Approvals != 2 {
		t.Fatalf("call_edited details %+v; want approvals 2", ds)
	}

	crit := &confirm.Batch{ConversationID: newConversation(t, db).ID, RequestedBy: "U-author", ExpiresAt: later(), Calls: []confirm.Call{
		{Key: "c", Tool: "deploy", Args: json.RawMessage(`{"env":"prod"}`), Flagged: true, Approvals: 1, Risk: confirm.RiskCritical},
	}}
	if err := db.CreateBatch(ctx, crit, confirm.Message{Role: "assistant", Body: json.RawMessage(`{}`)}); err != nil {
		t.Fatal(err)
	}
	res, err = clockAt(db, now).EditCall(ctx, confirm.EditCall{BatchID: crit.ID, Key: "c", Args: json.RawMessage(`{"env":"dev"}`),
		By: "U-b", Approvals: 1, Grantable: true, Risk: confirm.RiskMedium})
	if err != nil || res != (confirm.DecideResult{Won: true, Required: 1}) {
		t.Fatalf("EditCall of the critical call = %+v, %v; want held, no vote", res, err)
	}
	c = callByKey(t, loadBatch(t, db, crit.ID), "c")
	if c.Decision != confirm.DecisionPending || c.Risk != confirm.RiskCritical || c.Grantable || len(c.Votes) != 0 || string(c.RunArgs()) != `{"env":"dev"}` {
		t.Fatalf("edited critical call = %+v; want pending, critical, not grantable, no vote", c)
	}
}
