package storage

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/airlockhq/airlock/confirm"
)

var inboxTests = []conformanceTest{
	{"InboxRecordsOnce", testInboxRecordsOnce},
	{"InboxClaimsLapsed", testInboxClaimsLapsed},
	{"InboxFinish", testInboxFinish},
	{"InboxMessage", testInboxMessage},
	{"InboxPrune", testInboxPrune},
	{"InboxClearedAtStart", testInboxClearedAtStart},
	{"InboxConcurrentRecords", testInboxConcurrentRecords},
}

func inboxItem(key string) confirm.InboxItem {
	return confirm.InboxItem{Platform: "slack", Key: key, Kind: "interaction", Payload: []byte(`{"type":"block_actions","n":"` + key + `"}`)}
}

func record(t *testing.T, db *DB, it confirm.InboxItem, worker string, ttl time.Duration) bool {
	t.Helper()
	first, err := db.RecordInbox(t.Context(), it, worker, ttl)
	if err != nil {
		t.Fatalf("RecordInbox(%s): %v", it.Key, err)
	}
	return first
}

func claim(t *testing.T, db *DB, worker string, platforms ...string) []confirm.InboxItem {
	t.Helper()
	got, err := db.ClaimInbox(t.Context(), worker, platforms, time.Minute, 100)
	if err != nil {
		t.Fatalf("ClaimInbox(%s): %v", worker, err)
	}
	return got
}

func keysOf(items []confirm.InboxItem) []string {
	var out []string
	for _, it := range items {
		out = append(out, it.Key)
	}
	return out
}

// A delivery is recorded once per platform and key: Slack's retry of a
// recorded event writes nothing.
func testInboxRecordsOnce(t *testing.T, db *DB) {
	now := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	clockAt(db, now)
	if !record(t, db, inboxItem("Ev1"), "a", time.Minute) {
		t.Fatal("the first delivery was not recorded")
	}
	retry := inboxItem("Ev1")
	retry.Payload = []byte(`{"retry":1}`)
	if record(t, db, retry, "b", time.Minute) {
		t.Fatal("a retry of a recorded delivery was recorded again")
	}
	other := inboxItem("Ev1")
	other.Platform = "discord"
	if !record(t, db, other, "a", time.Minute) {
		t.Fatal("the same key of another platform is another delivery")
	}
	for _, bad := range []confirm.InboxItem{{Platform: "slack", Kind: "event"}, {Key: "k", Kind: "event"}, {Platform: "slack", Key: "k"}} {
		if _, err := db.RecordInbox(t.Context(), bad, "a", time.Minute); err == nil {
			t.Errorf("recorded %+v", bad)
		}
	}
	// The retry changed nothing: once a's claim lapses, b claims the
	// first payload.
	clockAt(db, now.Add(2*time.Minute))
	got := claim(t, db, "b", "slack")
	if len(got) != 1 || string(got[0].Payload) != string(inboxItem("Ev1").Payload) || got[0].Kind != "interaction" || !got[0].ReceivedAt.Equal(now) {
		t.Fatalf("claimed %+v", got)
	}
}

// A delivery is claimed by nobody else while its receiver's claim lives
// (renewed while it works); once it lapses, by one claimer, which counts
// an attempt; only the platforms asked for.
func testInboxClaimsLapsed(t *testing.T, db *DB) {
	ctx := t.Context()
	now := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	clockAt(db, now)
	record(t, db, inboxItem("k1"), "a", time.Minute)
	record(t, db, inboxItem("k2"), "a", time.Minute)
	d := inboxItem("d1")
	d.Platform = "discord"
	record(t, db, d, "a", time.Minute)

	if got := claim(t, clockAt(db, now.Add(59*time.Second)), "b", "slack", "discord"); len(got) != 0 {
		t.Fatalf("b claimed deliveries a is working on: %v", keysOf(got))
	}
	if n, err := clockAt(db, now.Add(50*time.Second)).RenewInbox(ctx, "a", time.Minute); err != nil || n != 3 {
		t.Fatalf("RenewInbox: %d, %v", n, err)
	}
	if got := claim(t, clockAt(db, now.Add(100*time.Second)), "b", "slack"); len(got) != 0 {
		t.Fatalf("b claimed deliveries a renewed: %v", keysOf(got))
	}
	clockAt(db, now.Add(111*time.Second)) // a died: its claims lapsed
	if got := claim(t, db, "a", "slack", "discord"); len(got) != 0 {
		t.Fatalf("a claimed its own deliveries %v: a live worker is working on what it holds", keysOf(got))
	}
	got := claim(t, db, "b", "slack")
	if !slices.Equal(keysOf(got), []string{"k1", "k2"}) || got[0].Attempts != 1 {
		t.Fatalf("b claimed %+v; want k1 and k2, one attempt each", got)
	}
	if again := claim(t, db, "c", "slack", "discord"); !slices.Equal(keysOf(again), []string{"d1"}) {
		t.Fatalf("c claimed %v; want only d1 (b holds the others)", keysOf(again))
	}
	if n, err := db.RenewInbox(ctx, "a", time.Minute); err != nil || n != 0 {
		t.Fatalf("the dead receiver renewed %d claims it lost (%v)", n, err)
	}
	// Released, a delivery is claimable at once, the released claim not
	// counted as an attempt; a release by another holder changes nothing.
	if err := db.ReleaseInbox(ctx, "slack", "k2", "c"); err != nil {
		t.Fatal(err)
	}
	if got := claim(t, db, "c", "slack"); len(got) != 0 {
		t.Fatalf("a release by another holder freed %v", keysOf(got))
	}
	if err := db.ReleaseInbox(ctx, "slack", "k2", "b"); err != nil {
		t.Fatal(err)
	}
	if got := claim(t, db, "c", "slack"); !slices.Equal(keysOf(got), []string{"k2"}) || got[0].Attempts != 1 {
		t.Fatalf("after b released k2, c claimed %+v", got)
	}
	if _, err := db.ClaimInbox(ctx, "", []string{"slack"}, time.Minute, 1); err == nil {
		t.Error("claimed without a worker")
	}
}

// A finished delivery is never claimed, keeps no payload, and finishing
// it again is no error.
func testInboxFinish(t *testing.T, db *DB) {
	ctx := t.Context()
	now := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	clockAt(db, now)
	record(t, db, inboxItem("done"), "a", time.Minute)
	record(t, db, inboxItem("open"), "a", time.Minute)
	for range 2 {
		if err := db.FinishInbox(ctx, "slack", "done"); err != nil {
			t.Fatal(err)
		}
	}
	if got := claim(t, clockAt(db, now.Add(time.Hour)), "b", "slack"); !slices.Equal(keysOf(got), []string{"open"}) {
		t.Fatalf("claimed %v; want only the unfinished one", keysOf(got))
	}
	var payload string
	if err := db.get(ctx, db.reader(), &payload, db.q(`SELECT payload FROM inbox WHERE key = ?`), "done"); err != nil || payload != "" {
		t.Fatalf("a finished delivery kept its payload %q (%v)", payload, err)
	}
	if n, err := db.RenewInbox(ctx, "b", time.Minute); err != nil || n != 1 {
		t.Fatalf("renewed %d, %v; want the one unfinished", n, err)
	}
}

// A turn's message is recorded with its delivery, in the append's
// transaction; a delivery without one says so.
func testInboxMessage(t *testing.T, db *DB) {
	ctx := t.Context()
	conv := newConversation(t, db)
	record(t, db, inboxItem("Ev9"), "a", time.Minute)
	if _, _, ok, err := db.InboxMessage(ctx, "slack", "Ev9"); err != nil || ok {
		t.Fatalf("before the append: ok %v, %v", ok, err)
	}
	if err := db.AppendMessages(ctx, conv.ID, confirm.Message{Role: "user", Body: json.RawMessage(`{"text":"earlier"}`)}); err != nil {
		t.Fatal(err)
	}
	if err := db.AppendInboxMessage(ctx, conv.ID, "slack", "Ev9", confirm.Message{Role: "user", Body: json.RawMessage(`{"text":"deploy"}`)}); err != nil {
		t.Fatal(err)
	}
	id, seq, ok, err := db.InboxMessage(ctx, "slack", "Ev9")
	if err != nil || !ok || id != conv.ID || seq != 2 {
		t.Fatalf("InboxMessage: %d/%d %v %v; want %d/2", id, seq, ok, err, conv.ID)
	}
	msgs, err := db.Messages(ctx, conv.ID)
	if err != nil || len(msgs) != 2 || string(msgs[1].Body) != `{"text":"deploy"}` {
		t.Fatalf("messages %+v, %v", msgs, err)
	}
	if _, _, ok, err := db.InboxMessage(ctx, "slack", "unknown"); err != nil || ok {
		t.Fatalf("an unknown delivery: ok %v, %v", ok, err)
	}
	// A conversation that does not exist stores nothing.
	if err := db.AppendInboxMessage(ctx, 1<<40, "slack", "Ev9", confirm.Message{Role: "user", Body: json.RawMessage(`{}`)}); err == nil {
		t.Fatal("appended to a conversation that does not exist")
	}
	if _, seq, _, _ := db.InboxMessage(ctx, "slack", "Ev9"); seq != 2 {
		t.Fatalf("a failed append moved the delivery's message to %d", seq)
	}
}

func testInboxPrune(t *testing.T, db *DB) {
	now := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	record(t, clockAt(db, now.Add(-25*time.Hour)), inboxItem("old"), "a", time.Minute)
	record(t, clockAt(db, now), inboxItem("new"), "a", time.Minute)
	if n, err := db.PruneInbox(t.Context(), now.Add(-24*time.Hour)); err != nil || n != 1 {
		t.Fatalf("pruned %d, %v", n, err)
	}
	if !record(t, db, inboxItem("old"), "a", time.Minute) || record(t, db, inboxItem("new"), "a", time.Minute) {
		t.Fatal("pruned the wrong delivery")
	}
}

// SQLite's start clears the claims a killed process left: its deliveries
// are claimed at once.
func testInboxClearedAtStart(t *testing.T, db *DB) {
	now := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	clockAt(db, now)
	record(t, db, inboxItem("left"), "killed", time.Hour)
	if err := db.ClearLeases(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := claim(t, db, "new", "slack"); !slices.Equal(keysOf(got), []string{"left"}) {
		t.Fatalf("after ClearLeases claimed %v", keysOf(got))
	}
}

// testInboxReplicas: replicas claiming the deliveries a dead receiver
// left, all at once and again and again, claim each exactly once.
func testInboxReplicas(t *testing.T, driver, dsn string) {
	dbs := openReplicas(t, driver, dsn, 3)
	now := time.Now().UTC()
	const n = 40
	for i := range n {
		record(t, clockAt(dbs[0], now.Add(-time.Hour)), inboxItem(fmt.Sprintf("left-%02d", i)), "dead", time.Minute)
	}
	dbs[0].setClock(nil)
	var mu sync.Mutex
	claimed := map[string]int{}
	raceAll(t, 6, func(i int) error {
		db := dbs[i%len(dbs)]
		for range 10 {
			got, err := db.ClaimInbox(t.Context(), fmt.Sprintf("replica-%d", i), []string{"slack"}, time.Hour, 7)
			if err != nil {
				return err
			}
			mu.Lock()
			for _, it := range got {
				claimed[it.Key]++
			}
			mu.Unlock()
		}
		return nil
	})
	if len(claimed) != n {
		t.Fatalf("%d of %d deliveries claimed", len(claimed), n)
	}
	for k, c := range claimed {
		if c != 1 {
			t.Errorf("%s claimed %d times", k, c)
		}
	}
}

// Deliveries recorded at once (on SQLite, gathered into one INSERT) are
// each recorded, a key sent twice at once once: one of its callers is
// told it is new.
func testInboxConcurrentRecords(t *testing.T, db *DB) {
	const keys = 20
	var mu sync.Mutex
	firsts := map[string]int{}
	raceAll(t, 2*keys, func(i int) error {
		it := inboxItem(fmt.Sprintf("k%02d", i%keys))
		first, err := db.RecordInbox(t.Context(), it, "a", time.Minute)
		if first {
			mu.Lock()
			firsts[it.Key]++
			mu.Unlock()
		}
		return err
	})
	for i := range keys {
		if k := fmt.Sprintf("k%02d", i); firsts[k] != 1 {
			t.Errorf("%s recorded as new %d times", k, firsts[k])
		}
	}
	if err := db.ClearLeases(t.Context()); err != nil {
		t.Fatal(err)
	}
	got, err := db.ClaimInbox(t.Context(), "b", []string{"slack"}, time.Minute, 100)
	if err != nil || len(got) != keys {
		t.Fatalf("claimed %d of %d deliveries (%v)", len(got), keys, err)
	}
	// A caller whose wait has ended writes nothing and is told so.
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := db.RecordInbox(ctx, inboxItem("late"), "a", time.Minute); err == nil {
		t.Fatal("a record whose context had ended was written")
	}
	if !record(t, db, inboxItem("late"), "a", time.Minute) {
		t.Fatal("the record whose context had ended was written")
	}
}
