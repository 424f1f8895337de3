package storage

import (
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/airlockhq/airlock/confirm"
	"github.com/airlockhq/airlock/events/webhook"
)

// checkedTests are the confirm.CheckStore contract, run by runConformance
// against each database.
var checkedTests = []conformanceTest{
	{"MarkChecked", testMarkChecked},
	{"MarkCheckedRefused", testMarkCheckedRefused},
	{"RaceMarkChecked", testRaceMarkChecked},
	{"UnknownNoticeRef", testUnknownNoticeRef},
	{"OutboxUnknownChecked", testOutboxUnknownChecked},
}

// unknownBatch stores a decided batch in conv of one allowed call per key
// (tool charge), runs them and loses their outcome: each is unknown.
func unknownBatch(t *testing.T, db *DB, convID int64, keys ...string) *confirm.Batch {
	t.Helper()
	ctx := t.Context()
	b := &confirm.Batch{ConversationID: convID, RequestedBy: "U-author", Status: confirm.BatchDecided}
	for i, k := range keys {
		b.Calls = append(b.Calls, confirm.Call{Key: k, Position: i, Tool: "charge", Args: json.RawMessage(`{"amount": 10}`),
			Decision: confirm.DecisionAllowedByPolicy})
	}
	if err := db.CreateBatch(ctx, b, confirm.Message{Role: "assistant", Body: json.RawMessage(`1`)}); err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		if ok, err := db.StartRun(ctx, b.ID, k); err != nil || !ok {
			t.Fatalf("StartRun(%s) = %v, %v", k, ok, err)
		}
	}
	if _, err := db.RecoverRunning(ctx, b.ID); err != nil {
		t.Fatal(err)
	}
	return b
}

func unknownKeys(t *testing.T, db *DB, convID int64) []string {
	t.Helper()
	calls, err := db.UnknownCalls(t.Context(), convID)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, c := range calls {
		out = append(out, c.Key)
	}
	return out
}

// A checked unknown run is no longer listed by UnknownCalls, records who
// checked it and when, and is audited once; the other unknown run stays.
func testMarkChecked(t *testing.T, db *DB) {
	ctx := t.Context()
	conv := newConversation(t, db)
	b := unknownBatch(t, db, conv.ID, "a", "b")
	if got := unknownKeys(t, db, conv.ID); len(got) != 2 {
		t.Fatalf("UnknownCalls before = %v, want a b", got)
	}
	for _, c := range loadBatch(t, db, b.ID).Calls {
		if c.CheckedBy != "" || c.CheckedAt != nil || c.NoticeRef != "" {
			t.Fatalf("a fresh unknown call = %+v, want not checked", c)
		}
	}
	at := time.Date(2031, 1, 2, 3, 4, 5, 678900000, time.UTC)
	ok, err := clockAt(db, at).MarkChecked(ctx, b.ID, "a", "U-alice")
	if err != nil || !ok {
		t.Fatalf("MarkChecked = %v, %v; want won", ok, err)
	}
	c := callByKey(t, loadBatch(t, db, b.ID), "a")
	if c.CheckedBy != "U-alice" || c.CheckedAt == nil || !c.CheckedAt.Equal(at) || c.Run != confirm.RunUnknown {
		t.Fatalf("checked call = %+v; want checked by U-alice at %v, still unknown", c, at)
	}
	if got := unknownKeys(t, db, conv.ID); len(got) != 1 || got[0] != "b" {
		t.Fatalf("UnknownCalls after = %v, want only b", got)
	}
	evs := auditOf(t, db, conv.ID, confirm.AuditUnknownChecked)
	if len(evs) != 1 || evs[0].Actor != "U-alice" || evs[0].BatchID != b.ID || evs[0].CallKey != "a" || evs[0].Tool != "charge" || !evs[0].At.Equal(at) {
		t.Fatalf("unknown_checked audit = %+v", evs)
	}
	// Again (a double click): nothing changes, nothing more is audited.
	if ok, err := clockAt(db, at.Add(time.Minute)).MarkChecked(ctx, b.ID, "a", "U-carol"); err != nil || ok {
		t.Fatalf("second MarkChecked = %v, %v; want lost", ok, err)
	}
	if c := callByKey(t, loadBatch(t, db, b.ID), "a"); c.CheckedBy != "U-alice" || !c.CheckedAt.Equal(at) {
		t.Fatalf("a second mark changed the call: %+v", c)
	}
	if n := len(auditOf(t, db, conv.ID, confirm.AuditUnknownChecked)); n != 1 {
		t.Fatalf("%d unknown_checked events after a double mark, want 1", n)
	}
}

// Only an unknown run can be marked checked: a succeeded, a failed, a
// not-started or a missing call is refused and nothing is written.
func testMarkCheckedRefused(t *testing.T, db *DB) {
	ctx := t.Context()
	b := newBatch(t, db, later(), confirm.DecisionAllowedByPolicy, confirm.DecisionAllowedByPolicy, confirm.DecisionAllowedByPolicy)
	for key, st := range map[string]confirm.RunStatus{"k0": confirm.RunSucceeded, "k1": confirm.RunFailed} {
		if ok, err := db.StartRun(ctx, b.ID, key); err != nil || !ok {
			t.Fatal(ok, err)
		}
		if err := db.FinishRun(ctx, b.ID, key, st, "out"); err != nil {
			t.Fatal(err)
		}
	}
	for _, key := range []string{"k0", "k1", "k2", "nope"} {
		if ok, err := db.MarkChecked(ctx, b.ID, key, "U-alice"); err != nil || ok {
			t.Errorf("MarkChecked(%s) = %v, %v; want refused", key, ok, err)
		}
	}
	if ok, err := db.MarkChecked(ctx, "no-such-batch", "k0", "U-alice"); err != nil || ok {
		t.Errorf("MarkChecked of a missing batch = %v, %v", ok, err)
	}
	for _, c := range loadBatch(t, db, b.ID).Calls {
		if c.CheckedBy != "" || c.CheckedAt != nil {
			t.Errorf("refused mark changed %s: %+v", c.Key, c)
		}
	}
	if n := len(auditOf(t, db, b.ConversationID, confirm.AuditUnknownChecked)); n != 0 {
		t.Fatalf("%d unknown_checked events for refused marks", n)
	}
}

// Clicks at once on one unknown run: exactly one wins and is audited.
func testRaceMarkChecked(t *testing.T, db *DB) {
	conv := newConversation(t, db)
	b := unknownBatch(t, db, conv.ID, "a")
	const n = 8
	var wg sync.WaitGroup
	won := make([]bool, n)
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() {
			won[i], errs[i] = db.MarkChecked(t.Context(), b.ID, "a", "U-"+string(rune('a'+i)))
		})
	}
	wg.Wait()
	wins := 0
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("MarkChecked %d: %v", i, errs[i])
		}
		if won[i] {
			wins++
		}
	}
	if wins != 1 {
		t.Fatalf("%d concurrent marks won, want 1", wins)
	}
	if evs := auditOf(t, db, conv.ID, confirm.AuditUnknownChecked); len(evs) != 1 || evs[0].Actor != callByKey(t, loadBatch(t, db, b.ID), "a").CheckedBy {
		t.Fatalf("audit after the race = %+v", evs)
	}
}

func testUnknownNoticeRef(t *testing.T, db *DB) {
	ctx := t.Context()
	conv := newConversation(t, db)
	b := unknownBatch(t, db, conv.ID, "a", "b")
	if err := db.SetUnknownNoticeRef(ctx, b.ID, "b", "C1/1700000000.000200"); err != nil {
		t.Fatal(err)
	}
	got := loadBatch(t, db, b.ID)
	if a, bb := callByKey(t, got, "a"), callByKey(t, got, "b"); a.NoticeRef != "" || bb.NoticeRef != "C1/1700000000.000200" {
		t.Fatalf("notice refs a=%q b=%q", a.NoticeRef, bb.NoticeRef)
	}
	if err := db.SetUnknownNoticeRef(ctx, b.ID, "nope", "x"); !errors.Is(err, confirm.ErrNotFound) {
		t.Fatalf("SetUnknownNoticeRef of a missing call = %v, want ErrNotFound", err)
	}
}

// unknown_checked goes out as a webhook event of its own type, with the
// call's arguments and who checked it.
func testOutboxUnknownChecked(t *testing.T, db *DB) {
	setWebhooks(t, db, WebhookTarget{ID: "checks", Events: []webhook.EventType{webhook.EventUnknownChecked}})
	conv := newConversation(t, db)
	b := unknownBatch(t, db, conv.ID, "a")
	if ok, err := db.MarkChecked(t.Context(), b.ID, "a", "U-alice"); err != nil || !ok {
		t.Fatal(ok, err)
	}
	ds := deliveries(t, db, DeliveryFilter{Target: "checks", ConversationID: conv.ID})
	if len(ds) != 1 || ds[0].Type != webhook.EventUnknownChecked {
		t.Fatalf("deliveries = %s, want one unknown_checked", types(ds))
	}
	var ev webhook.Event
	if err := json.Unmarshal(ds[0].Body, &ev); err != nil {
		t.Fatal(err)
	}
	if ev.Actor != "U-alice" || ev.Batch != b.ID || ev.Call != "a" || ev.Tool != "charge" || string(ev.Args) != `{"amount": 10}` {
		t.Fatalf("event = %+v", ev)
	}
}
