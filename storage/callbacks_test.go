package storage

import (
	"sync"
	"testing"

	"github.com/airlockhq/airlock/confirm"
)

var callbackTests = []conformanceTest{
	{"CallbacksWaitForTheDecision", testCallbacksWaitForTheDecision},
	{"RaceQueueCallback", testRaceQueueCallback},
}

// testCallbacksWaitForTheDecision: a callback is due once its batch is
// decided, not before; registering it twice keeps one; once queued it is
// an outbox row to its own URL, due now, and no longer due.
func testCallbacksWaitForTheDecision(t *testing.T, db *DB) {
	ctx := t.Context()
	b := newBatch(t, db, later(), confirm.DecisionPending)
	cb := confirm.Callback{BatchID: b.ID, URL: "https://hooks.example.com/airlock?wf=1", Client: "temporal", ConversationID: b.ConversationID}
	for range 2 {
		if err := db.AddCallback(ctx, cb); err != nil {
			t.Fatal(err)
		}
	}
	if due, err := db.DueCallbacks(ctx, 10); err != nil || len(due) != 0 {
		t.Fatalf("due while pending: %v, %v", due, err)
	}
	decide(t, db, confirm.Decide{BatchID: b.ID, Key: "k0", Status: confirm.DecisionAllowed, By: "U-approver"})
	due, err := db.DueCallbacks(ctx, 10)
	if err != nil || len(due) != 1 || due[0] != cb {
		t.Fatalf("due once decided: %+v, %v; want just %+v", due, err, cb)
	}
	won, err := db.QueueCallback(ctx, cb, "callback/temporal", []byte(`{"id":"`+b.ID+`","status":"allowed"}`))
	if err != nil || !won {
		t.Fatalf("QueueCallback = %v, %v", won, err)
	}
	if due, err := db.DueCallbacks(ctx, 10); err != nil || len(due) != 0 {
		t.Fatalf("due once queued: %v, %v", due, err)
	}
	ds, err := db.ClaimDeliveries(ctx, "callback/temporal", "w", db.Clock()(), 60e9, 10)
	if err != nil || len(ds) != 1 {
		t.Fatalf("claim the callback: %v, %v", ds, err)
	}
	if d := ds[0]; d.URL != cb.URL || d.Type != CallbackEvent || d.ConversationID != b.ConversationID || string(d.Body) != `{"id":"`+b.ID+`","status":"allowed"}` {
		t.Fatalf("the callback's delivery: %+v", d)
	}
	if ds, _ := db.ClaimDeliveries(ctx, "callback/other", "w", db.Clock()(), 60e9, 10); len(ds) != 0 {
		t.Fatalf("another client's target claimed it: %+v", ds)
	}
}

// testRaceQueueCallback: replicas queueing one callback at once queue it
// once.
func testRaceQueueCallback(t *testing.T, db *DB) {
	ctx := t.Context()
	b := newBatch(t, db, later(), confirm.DecisionAllowedByPolicy)
	cb := confirm.Callback{BatchID: b.ID, URL: "https://hooks.example.com/a", Client: "c", ConversationID: b.ConversationID}
	if err := db.AddCallback(ctx, cb); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	wins := 0
	for range 8 {
		wg.Go(func() {
			won, err := db.QueueCallback(ctx, cb, "callback/c", []byte(`{}`))
			if err != nil {
				t.Error(err)
			}
			mu.Lock()
			defer mu.Unlock()
			if won {
				wins++
			}
		})
	}
	wg.Wait()
	ds, err := db.Deliveries(ctx, DeliveryFilter{Target: "callback/c"})
	if wins != 1 || err != nil || len(ds) != 1 {
		t.Fatalf("%d wins, %d deliveries (%v); want one each", wins, len(ds), err)
	}
}
