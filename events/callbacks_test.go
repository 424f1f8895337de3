package events_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/airlockhq/airlock/confirm"
	"github.com/airlockhq/airlock/events"
	"github.com/airlockhq/airlock/gateway"
	"github.com/airlockhq/airlock/storage"
)

// queueCallback stores a decided one-call batch and queues a callback of
// it to url for client.
func queueCallback(t *testing.T, db *storage.DB, client, url string) confirm.Callback {
	t.Helper()
	ctx := t.Context()
	conv, err := db.Conversation(ctx, "slack", "C0OPS", gateway.SessionThread(client, "s1"), false)
	if err != nil {
		t.Fatal(err)
	}
	b := &confirm.Batch{ConversationID: conv.ID, RequestedBy: "U0ALICE", ExpiresAt: time.Now().Add(time.Hour),
		Calls: []confirm.Call{{Key: "#0", Tool: "Bash", Args: json.RawMessage(`{"command":"ls"}`), Decision: confirm.DecisionAllowedByPolicy}}}
	if err := db.CreateBatch(ctx, b, confirm.Message{Role: "gateway", Body: json.RawMessage(`{}`)}); err != nil {
		t.Fatal(err)
	}
	cb := confirm.Callback{BatchID: b.ID, URL: url, Client: client, ConversationID: conv.ID}
	if err := db.AddCallback(ctx, cb); err != nil {
		t.Fatal(err)
	}
	if won, err := db.QueueCallback(ctx, cb, gateway.CallbackTarget(client), []byte(`{"id":"`+b.ID+`","status":"allowed"}`)); err != nil || !won {
		t.Fatalf("QueueCallback: %v %v", won, err)
	}
	return cb
}

// A callback goes to its own URL, signed with its client's
// callback_secret (not a webhook's), with the event id header; one whose
// URL the client's callback_urls no longer allow is not sent.
func TestCallbackSignedWithTheClientsSecret(t *testing.T) {
	rcv := newReceiver(t, nil)
	db := openDB(t)
	const clientSecret = "the-temporal-clients-own-secret-0123"
	client := gateway.Client{Name: "temporal", CallbackSecret: clientSecret, CallbackURLs: []string{rcv.srv.URL + "/cb/"}}
	ok := queueCallback(t, db, "temporal", rcv.srv.URL+"/cb/wf-1")
	stale := queueCallback(t, db, "temporal", rcv.srv.URL+"/old/wf-2")
	clk := newClock()
	d := events.NewDeliverer(db, nil, events.Options{Now: clk.Now, Callbacks: []gateway.Client{client}})
	if n := poll(t, d); n != 1 {
		t.Fatalf("delivered %d, want 1", n)
	}
	got := rcv.receipts()
	if len(got) != 1 {
		t.Fatalf("%d requests, want 1", len(got))
	}
	r := got[0]
	if want := `{"id":"` + ok.BatchID + `","status":"allowed"}`; string(r.body) != want {
		t.Fatalf("body %s, want %s", r.body, want)
	}
	if err := events.Verify(clientSecret, r.header.Get(events.SignatureHeader), r.body, clk.Now(), time.Minute); err != nil {
		t.Fatalf("the signature does not verify with the client's secret: %v", err)
	}
	if err := events.Verify(secret, r.header.Get(events.SignatureHeader), r.body, clk.Now(), time.Minute); err == nil {
		t.Fatal("the signature verifies with the webhooks' secret")
	}
	if r.header.Get(events.EventIDHeader) == "" {
		t.Fatal("no event id")
	}
	ds, err := db.Deliveries(t.Context(), storage.DeliveryFilter{Status: []storage.DeliveryStatus{storage.DeliveryPending}})
	if err != nil || len(ds) != 1 || ds[0].URL != stale.URL || !strings.Contains(ds[0].LastError, "callback_urls") {
		t.Fatalf("the callback outside callback_urls: %+v, %v", ds, err)
	}
}
