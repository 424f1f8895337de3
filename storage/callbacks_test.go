package storage

import (
	"encoding/json"
	"sync"
	"testing"

	"github.com/airlockhq/airlock/confirm"
	"github.com/airlockhq/airlock/gateway"
)

var callbackTests = []conformanceTest{
	{"CallbacksWaitForTheDecision", testCallbacksWaitForTheDecision},
	{"RaceQueueCallback", testRaceQueueCallback},
	{"ToolCallNamesTheClient", testToolCallNamesTheClient},
	{"BindableBatch", testBindableBatch},
	{"MarkClientLeft", testMarkClientLeft},
}

// testMarkClientLeft: a pending batch records once when its MCP client
// stopped waiting; a decided one does not.
func testMarkClientLeft(t *testing.T, db *DB) {
	ctx := t.Context()
	b := newBatch(t, db, later(), confirm.DecisionPending)
	for i, want := range []bool{true, false} {
		if won, err := db.MarkClientLeft(ctx, b.ID); err != nil || won != want {
			t.Fatalf("mark %d: %v %v, want %v", i+1, won, err, want)
		}
	}
	if got := loadBatch(t, db, b.ID); got.ClientLeftAt == nil {
		t.Fatal("ClientLeftAt not loaded")
	}
	decided := newBatch(t, db, later(), confirm.DecisionPending)
	decide(t, db, confirm.Decide{BatchID: decided.ID, Key: "k0", Status: confirm.DecisionAllowed, By: "U"})
	if won, err := db.MarkClientLeft(ctx, decided.ID); err != nil || won {
		t.Fatalf("a decided batch: %v %v", won, err)
	}
	if got := loadBatch(t, db, decided.ID); got.ClientLeftAt != nil {
		t.Fatal("a decided batch's ClientLeftAt set")
	}
}

// testToolCallNamesTheClient: the tool_call row of a gateway client's
// call names the client and the session (chained with the row); a chat
// thread's names neither.
func testToolCallNamesTheClient(t *testing.T, db *DB) {
	ctx := t.Context()
	gw, err := db.Conversation(ctx, "slack", "C-ops", gateway.SessionThread("bob-laptop", "sess-1"), false)
	if err != nil {
		t.Fatal(err)
	}
	chat := newConversation(t, db)
	for _, conv := range []confirm.Conversation{gw, chat} {
		batchIn(t, db, conv.ID, later(), confirm.DecisionPending)
		evs, err := db.AuditEvents(ctx, confirm.AuditFilter{ConversationID: conv.ID})
		if err != nil {
			t.Fatal(err)
		}
		var d struct{ Client, Session *string }
		for _, e := range evs {
			if e.Kind == confirm.AuditToolCall {
				if err := json.Unmarshal([]byte(e.Detail), &d); err != nil {
					t.Fatal(err)
				}
			}
		}
		switch {
		case conv.ID == gw.ID && (d.Client == nil || *d.Client != "bob-laptop" || d.Session == nil || *d.Session != "sess-1"):
			t.Errorf("the gateway call's tool_call: client %v, session %v", d.Client, d.Session)
		case conv.ID == chat.ID && (d.Client != nil || d.Session != nil):
			t.Errorf("a chat call's tool_call names a client: %v %v", d.Client, d.Session)
		}
	}
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

// testBindableBatch: a gateway request binds to the newest live one-call
// batch of its conversation with the same tool and exact arguments:
// pending, or allowed by a person and not started. Not to one the policy
// allowed, one consumed, one denied, one of several calls, one of another
// conversation or tool.
func testBindableBatch(t *testing.T, db *DB) {
	ctx := t.Context()
	conv := newConversation(t, db)
	other := newConversation(t, db)
	args := []byte(`{"n": 0}`) // batchIn's first call's
	find := func(convID int64, tool string, a []byte) string {
		t.Helper()
		id, err := db.BindableBatch(ctx, convID, tool, a)
		if err != nil {
			t.Fatal(err)
		}
		return id
	}
	batchIn(t, db, conv.ID, later(), confirm.DecisionAllowedByPolicy)
	batchIn(t, db, conv.ID, later(), confirm.DecisionPending, confirm.DecisionPending)
	if id := find(conv.ID, "deploy", args); id != "" {
		t.Fatalf("bound to %s: policy-allowed, or of two calls", id)
	}
	older := batchIn(t, db, conv.ID, later(), confirm.DecisionPending)
	newer := batchIn(t, db, conv.ID, later(), confirm.DecisionPending)
	if id := find(conv.ID, "deploy", args); id != newer.ID {
		t.Fatalf("bound to %q, want the newest pending %s", id, newer.ID)
	}
	for name, id := range map[string]string{
		"other args": find(conv.ID, "deploy", []byte(`{"n":0}`)), "other tool": find(conv.ID, "restart", args), "other conversation": find(other.ID, "deploy", args),
	} {
		if id != "" {
			t.Errorf("%s: bound to %s", name, id)
		}
	}
	decide(t, db, confirm.Decide{BatchID: newer.ID, Key: "k0", Status: confirm.DecisionDenied, By: "U"})
	decide(t, db, confirm.Decide{BatchID: older.ID, Key: "k0", Status: confirm.DecisionAllowed, By: "U"})
	if id := find(conv.ID, "deploy", args); id != older.ID {
		t.Fatalf("bound to %q, want the allowed, not started %s", id, older.ID)
	}
	if won, err := db.StartRun(ctx, older.ID, "k0"); err != nil || !won {
		t.Fatal(won, err)
	}
	if id := find(conv.ID, "deploy", args); id != "" {
		t.Fatalf("bound to %s after its consume", id)
	}
}
