package storage

import (
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/airlockhq/airlock/confirm"
)

var _ confirm.CardSyncStore = (*DB)(nil)

// cardSyncTests are the confirm.CardSyncStore contract, run by
// runConformance against each database.
var cardSyncTests = []conformanceTest{
	{"CardSyncVersions", testCardSyncVersions},
	{"CardSyncWaitsAndGone", testCardSyncWaitsAndGone},
	{"CardSyncPostedDuringChange", testCardSyncPostedDuringChange},
	{"RaceClaimCard", testRaceClaimCard},
	{"ChangeAndClaimCards", testChangeAndClaimCards},
}

// ChangeAndClaimCards records the change and claims, in one write, the
// batch's messages behind that no live claim holds; a batch without
// messages says so.
func testChangeAndClaimCards(t *testing.T, db *DB) {
	ctx := t.Context()
	bare := newBatch(t, db, later(), confirm.DecisionPending)
	if claimed, listed, err := db.ChangeAndClaimCards(ctx, bare.ID, "r1", time.Minute, 8); err != nil || listed || len(claimed) != 0 {
		t.Fatalf("no messages: %v, listed %v, %v", claimed, listed, err)
	}
	if v, _ := db.CardVersion(ctx, bare.ID); v != 1 {
		t.Fatalf("version %d, want the change recorded", v)
	}
	b := newBatch(t, db, later(), confirm.DecisionPending)
	m1 := addCard(t, db, b.ID, confirm.CardMain, "C1", "C1/2.1", 0)
	m2 := addCard(t, db, b.ID, confirm.CardDM, "D1", "D1/2.2", 0)
	change(t, db, b.ID)
	if _, ok, err := db.ClaimCard(ctx, m2, "other", time.Minute); err != nil || !ok {
		t.Fatalf("claim by another: %v %v", ok, err)
	}
	claimed, listed, err := db.ChangeAndClaimCards(ctx, b.ID, "r1", time.Minute, 8)
	if err != nil || !listed || len(claimed) != 1 || claimed[0].ID != m1 || claimed[0].Version != 2 || claimed[0].Message.Ref != "C1/2.1" {
		t.Fatalf("ChangeAndClaimCards = %+v, listed %v, %v; want m1 at version 2 only", claimed, listed, err)
	}
	if ok, err := db.CardRendered(ctx, m1, "r1", 2); err != nil || !ok {
		t.Fatalf("CardRendered by the claim's holder = %v, %v", ok, err)
	}
	if got := behind(t, db); slices.Contains(got, m1) || slices.Contains(got, m2) {
		t.Fatalf("behind = %v: m1 rendered, m2 still claimed by another", got)
	}
}

func addCard(t *testing.T, db *DB, batchID, kind, channel, ref string, version int64) int64 {
	t.Helper()
	if err := db.AddCardMessage(t.Context(), confirm.CardMessage{BatchID: batchID, Kind: kind, Platform: "slack", Channel: channel, Ref: ref, Version: version}); err != nil {
		t.Fatalf("AddCardMessage: %v", err)
	}
	var id int64
	if err := db.get(t.Context(), db.x, &id, db.q(`SELECT id FROM cards WHERE batch_id = ? AND ref = ?`), batchID, ref); err != nil {
		t.Fatal(err)
	}
	return id
}

func behind(t *testing.T, db *DB) []int64 {
	t.Helper()
	ids, err := db.BehindCards(t.Context(), "", "", 100)
	if err != nil {
		t.Fatalf("BehindCards: %v", err)
	}
	return ids
}

func change(t *testing.T, db *DB, batchID string) {
	t.Helper()
	if err := db.ChangeCard(t.Context(), batchID); err != nil {
		t.Fatalf("ChangeCard: %v", err)
	}
}

// A change puts every message of its batch behind, oldest change first;
// a claim takes the latest version, and a message rendered at an older
// one than a change since stays behind.
func testCardSyncVersions(t *testing.T, db *DB) {
	ctx := t.Context()
	a := newBatch(t, db, later(), confirm.DecisionPending)
	b := newBatch(t, db, later(), confirm.DecisionPending)
	change(t, db, a.ID) // no messages yet: only the version moves
	if v, err := db.CardVersion(ctx, a.ID); err != nil || v != 1 {
		t.Fatalf("CardVersion = %d, %v; want 1", v, err)
	}
	a1 := addCard(t, db, a.ID, confirm.CardMain, "C1", "C1/1.1", 1)
	a2 := addCard(t, db, a.ID, confirm.CardDM, "D1", "D1/1.2", 1)
	b1 := addCard(t, db, b.ID, confirm.CardMain, "C1", "C1/1.3", 0)
	if got := behind(t, db); len(got) != 0 {
		t.Fatalf("freshly posted messages are behind: %v", got)
	}
	if n, _ := db.CardsBehind(ctx); n != 0 {
		t.Fatalf("CardsBehind = %d", n)
	}
	change(t, db, b.ID)
	time.Sleep(2 * time.Millisecond)
	change(t, db, a.ID)
	change(t, db, a.ID) // coalesced: still one render each
	if got := behind(t, db); fmt.Sprint(got) != fmt.Sprint([]int64{b1, a1, a2}) {
		t.Fatalf("behind = %v, want b's first (changed first), then a's: %v", got, []int64{b1, a1, a2})
	}
	if n, _ := db.CardsBehind(ctx); n != 3 {
		t.Fatalf("CardsBehind = %d, want 3", n)
	}
	c, ok, err := db.ClaimCard(ctx, a1, "r1", time.Minute)
	if err != nil || !ok || c.Version != 3 || c.Message.Ref != "C1/1.1" || c.Message.Kind != confirm.CardMain || c.ChangedAt.IsZero() {
		t.Fatalf("ClaimCard = %+v, %v, %v", c, ok, err)
	}
	if _, ok, _ := db.ClaimCard(ctx, a1, "r2", time.Minute); ok {
		t.Fatal("a second holder claimed a claimed message")
	}
	if got := behind(t, db); fmt.Sprint(got) != fmt.Sprint([]int64{b1, a2}) {
		t.Fatalf("a claimed message is listed: %v", got)
	}
	change(t, db, a.ID) // while rendering version 3
	if ok, err := db.CardRendered(ctx, a1, "r2", 3); err != nil || ok {
		t.Fatalf("CardRendered by a non-holder = %v, %v", ok, err)
	}
	if ok, err := db.CardRendered(ctx, a1, "r1", 3); err != nil || !ok {
		t.Fatalf("CardRendered = %v, %v", ok, err)
	}
	c, ok, err = db.ClaimCard(ctx, a1, "r2", time.Minute)
	if err != nil || !ok || c.Version != 4 {
		t.Fatalf("a change during the render leaves it behind: %+v %v %v", c, ok, err)
	}
	if ok, _ := db.CardRendered(ctx, a1, "r2", 4); !ok {
		t.Fatal("CardRendered 4")
	}
	if ok, _ := db.CardRendered(ctx, a1, "r2", 2); ok {
		t.Fatal("a render without a claim counted")
	}
	if _, ok, _ := db.ClaimCard(ctx, a1, "r1", time.Minute); ok {
		t.Fatal("a message in sync was claimed")
	}
	// A lapsed claim is taken over.
	if _, ok, _ := clockAt(db, time.Now()).ClaimCard(ctx, a2, "r1", time.Second); !ok {
		t.Fatal("claim a2")
	}
	if _, ok, _ := clockAt(db, time.Now().Add(2*time.Second)).ClaimCard(ctx, a2, "r2", time.Minute); !ok {
		t.Fatal("a lapsed claim was not taken over")
	}
	db.setClock(nil)
}

// A wait keeps a message behind but unlisted until it passes; a gone
// message is never listed or claimed again, and a change does not revive
// it.
func testCardSyncWaitsAndGone(t *testing.T, db *DB) {
	ctx := t.Context()
	t0 := time.Now()
	a := newBatch(t, db, later(), confirm.DecisionPending)
	id := addCard(t, db, a.ID, confirm.CardMain, "C1", "C1/2.1", 0)
	gone := addCard(t, db, a.ID, confirm.CardDM, "D1", "D1/2.2", 0)
	change(t, clockAt(db, t0), a.ID)
	if _, ok, _ := db.ClaimCard(ctx, id, "r1", time.Minute); !ok {
		t.Fatal("claim")
	}
	if err := db.CardRetry(ctx, id, "r1", 30*time.Second, false); err != nil {
		t.Fatal(err)
	}
	if got := behind(t, clockAt(db, t0.Add(10*time.Second))); fmt.Sprint(got) != fmt.Sprint([]int64{gone}) {
		t.Fatalf("a waiting message is listed: %v", got)
	}
	if _, ok, _ := db.ClaimCard(ctx, id, "r1", time.Minute); ok {
		t.Fatal("a waiting message was claimed")
	}
	if n, _ := db.CardsBehind(ctx); n != 2 {
		t.Fatalf("CardsBehind = %d, want 2 (waiting is behind)", n)
	}
	if _, ok, _ := db.ClaimCard(ctx, gone, "r1", time.Minute); !ok {
		t.Fatal("claim")
	}
	if err := db.CardGone(ctx, gone, "r1"); err != nil {
		t.Fatal(err)
	}
	change(t, db, a.ID)
	if got := behind(t, clockAt(db, t0.Add(31*time.Second))); fmt.Sprint(got) != fmt.Sprint([]int64{id}) {
		t.Fatalf("behind after the wait = %v, want %v only", got, id)
	}
	c, ok, err := db.ClaimCard(ctx, id, "r1", time.Minute)
	if err != nil || !ok || c.Failures != 0 {
		t.Fatalf("claim after the wait: %+v %v %v", c, ok, err)
	}
	if err := db.CardRetry(ctx, id, "r1", 0, true); err != nil {
		t.Fatal(err)
	}
	if c, _, _ := db.ClaimCard(ctx, id, "r1", time.Minute); c.Failures != 1 {
		t.Fatalf("failures = %d, want 1", c.Failures)
	}
	if n, _ := db.CardsBehind(ctx); n != 1 {
		t.Fatalf("CardsBehind = %d, want 1 (gone aside)", n)
	}
	db.setClock(nil)
}

// A message recorded after a change made while it was being posted (its
// version read before) is behind; one recorded at the current version is
// not.
func testCardSyncPostedDuringChange(t *testing.T, db *DB) {
	ctx := t.Context()
	a := newBatch(t, db, later(), confirm.DecisionPending)
	v, _ := db.CardVersion(ctx, a.ID)
	change(t, db, a.ID) // a click while the copy was being posted
	id := addCard(t, db, a.ID, confirm.CardDM, "D1", "D1/3.1", v)
	if got := behind(t, db); fmt.Sprint(got) != fmt.Sprint([]int64{id}) {
		t.Fatalf("a copy posted with an older state is not behind: %v", got)
	}
	addCard(t, db, a.ID, confirm.CardDM, "D2", "D2/3.2", v+1)
	if got := behind(t, db); len(got) != 1 {
		t.Fatalf("behind = %v", got)
	}
}

// Many holders claiming one message at once: one wins each round.
func testRaceClaimCard(t *testing.T, db *DB) {
	raceClaimCard(t, []*DB{db})
}

func raceClaimCard(t *testing.T, dbs []*DB) {
	ctx := t.Context()
	a := newBatch(t, dbs[0], later(), confirm.DecisionPending)
	id := addCard(t, dbs[0], a.ID, confirm.CardMain, "C1", "C1/4.1", 0)
	for round := range 5 {
		change(t, dbs[0], a.ID)
		var wins atomic.Int32
		var wg sync.WaitGroup
		for i := range 8 {
			wg.Go(func() {
				db := dbs[i%len(dbs)]
				if _, ok, err := db.ClaimCard(ctx, id, fmt.Sprintf("r%d", i), time.Minute); err != nil {
					t.Errorf("ClaimCard: %v", err)
				} else if ok {
					wins.Add(1)
					if ok, err := db.CardRendered(ctx, id, fmt.Sprintf("r%d", i), int64(round+1)); err != nil || !ok {
						t.Errorf("CardRendered: %v %v", ok, err)
					}
				}
			})
		}
		wg.Wait()
		if n := wins.Load(); n != 1 {
			t.Fatalf("round %d: %d holders claimed the message", round, n)
		}
	}
}

// Two replicas on one database: one claim wins each round.
func testCardSyncReplicas(t *testing.T, driver, dsn string) {
	raceClaimCard(t, openReplicas(t, driver, dsn, 2))
}
