package storage

import (
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/airlockhq/airlock/confirm"
	"github.com/airlockhq/airlock/events/webhook"
)

// boundsTests are the coalescing of rejected clicks and the results of
// tool_result events, run by runConformance on SQLite and PostgreSQL.
var boundsTests = []conformanceTest{
	{"RejectedClicksCoalesce", testRejectedClicksCoalesce},
	{"RaceRejectedClicks", testRaceRejectedClicks},
	{"OutboxToolResult", testOutboxToolResult},
}

func rejected(conv int64, batch, actor, why string, at time.Time) confirm.AuditEvent {
	d, _ := json.Marshal(map[string]any{"why": why, "allow": true, "platform": "slack", "channel": "C1"})
	return confirm.AuditEvent{At: at, Kind: confirm.AuditRejectedClick, ConversationID: conv, BatchID: batch, CallKey: "k0", Actor: actor, Detail: string(d)}
}

func rejectedRows(t *testing.T, db *DB) []confirm.AuditEvent {
	t.Helper()
	return auditOf(t, db, 0, confirm.AuditRejectedClick)
}

func suppressedOf(t *testing.T, e confirm.AuditEvent) int64 {
	t.Helper()
	var d struct {
		Suppressed int64  `json:"suppressed"`
		Why        string `json:"why"`
	}
	if err := json.Unmarshal([]byte(e.Detail), &d); err != nil || d.Why == "" {
		t.Fatalf("detail %q: %v (the bot's detail must be kept)", e.Detail, err)
	}
	return d.Suppressed
}

// testRejectedClicksCoalesce: a person hammering a button they may not
// press gets one audit row and one webhook event a minute per batch and
// reason; the repeats are counted and the count comes with the next row.
func testRejectedClicksCoalesce(t *testing.T, db *DB) {
	ctx := t.Context()
	setWebhooks(t, db, WebhookTarget{ID: "w"})
	conv := newConversation(t, db)
	t0 := time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)
	click := func(batch, actor, why string, at time.Time) bool {
		t.Helper()
		ok, err := db.AuditRejectedClick(ctx, rejected(conv.ID, batch, actor, why, at), why)
		if err != nil {
			t.Fatal(err)
		}
		return ok
	}
	for i := range 50 {
		written := click("b1", "U-mallory", "not an approver", t0.Add(time.Duration(i)*time.Second))
		if written != (i == 0) {
			t.Fatalf("click %d in the first minute written: %v", i, written)
		}
	}
	// Another reason, person or batch is its own key.
	if !click("b1", "U-mallory", "self-approval", t0.Add(10*time.Second)) ||
		!click("b1", "U-eve", "not an approver", t0.Add(10*time.Second)) ||
		!click("b2", "U-mallory", "not an approver", t0.Add(10*time.Second)) {
		t.Fatal("a different reason, person or batch was coalesced with another key")
	}
	if rows := rejectedRows(t, db); len(rows) != 4 {
		t.Fatalf("%d audit rows after 53 rejected clicks of 4 keys, want 4", len(rows))
	}
	if ds := deliveries(t, db, DeliveryFilter{}); len(ds) != 4 {
		t.Fatalf("%d webhook deliveries, want 4", len(ds))
	}
	// The next minute: one row again, carrying the 49 repeats.
	if !click("b1", "U-mallory", "not an approver", t0.Add(60*time.Second)) {
		t.Fatal("the first click of the next minute was not written")
	}
	if click("b1", "U-mallory", "not an approver", t0.Add(61*time.Second)) {
		t.Fatal("a repeat in the second minute was written")
	}
	rows := rejectedRows(t, db)
	if len(rows) != 5 {
		t.Fatalf("%d audit rows, want 5", len(rows))
	}
	last := rows[len(rows)-1]
	if n := suppressedOf(t, last); n != 49 || last.Actor != "U-mallory" || last.BatchID != "b1" {
		t.Fatalf("row of the next minute: %+v, suppressed %d, want 49", last, n)
	}
	for _, e := range rows[:4] {
		if n := suppressedOf(t, e); n != 0 {
			t.Fatalf("first row of a key says %d suppressed", n)
		}
	}
	ds := deliveries(t, db, DeliveryFilter{})
	if len(ds) != 5 {
		t.Fatalf("%d webhook deliveries, want 5", len(ds))
	}
	var ev webhook.Event
	if err := json.Unmarshal(ds[4].Body, &ev); err != nil {
		t.Fatal(err)
	}
	if ev.Type != webhook.EventRejectedClick || ev.Suppressed != 49 || ev.Reason != "not an approver" || ev.Actor != "U-mallory" {
		t.Fatalf("webhook event: %s", ds[4].Body)
	}
	// The second minute's repeat waits in the kept row; the earlier
	// window's row is gone.
	var kept []struct {
		Suppressed int64 `db:"suppressed"`
	}
	if err := db.x.SelectContext(ctx, &kept, db.q(`SELECT suppressed FROM rejected_clicks WHERE actor = ? AND batch_id = ? AND reason = ?`),
		"U-mallory", "b1", "not an approver"); err != nil {
		t.Fatal(err)
	}
	if len(kept) != 1 || kept[0].Suppressed != 1 {
		t.Fatalf("kept rows of the key: %+v, want one counting 1", kept)
	}
}

// testRaceRejectedClicks: clicks of one key at once write one row; none
// is lost from the count.
func testRaceRejectedClicks(t *testing.T, db *DB) {
	raceRejectedClicks(t, []*DB{db})
}

func raceRejectedClicks(t *testing.T, dbs []*DB) {
	ctx := t.Context()
	conv := newConversation(t, dbs[0])
	t0 := time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)
	const n = 24
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		written int
		errs    []error
	)
	for i := range n {
		db := dbs[i%len(dbs)]
		wg.Go(func() {
			ok, err := db.AuditRejectedClick(ctx, rejected(conv.ID, "b1", "U-mallory", "not an approver", t0.Add(time.Duration(i)*time.Second)), "not an approver")
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, err)
			}
			if ok {
				written++
			}
		})
	}
	wg.Wait()
	if len(errs) > 0 {
		t.Fatalf("errors: %v", errs)
	}
	if written != 1 {
		t.Fatalf("%d of %d simultaneous clicks written, want 1", written, n)
	}
	if ok, err := dbs[len(dbs)-1].AuditRejectedClick(ctx, rejected(conv.ID, "b1", "U-mallory", "not an approver", t0.Add(time.Minute)), "not an approver"); err != nil || !ok {
		t.Fatalf("next minute: %v %v", ok, err)
	}
	rows := rejectedRows(t, dbs[0])
	if len(rows) != 2 {
		t.Fatalf("%d rows, want 2", len(rows))
	}
	if s := suppressedOf(t, rows[1]); s != n-1 {
		t.Fatalf("suppressed %d, want %d", s, n-1)
	}
}

// testRejectedClickReplicas: two replicas (two pools on one database)
// coalesce too.
func testRejectedClickReplicas(t *testing.T, driver, dsn string) {
	dbs := openReplicas(t, driver, dsn, 2)
	for _, db := range dbs {
		setWebhooks(t, db, WebhookTarget{ID: "w"})
	}
	raceRejectedClicks(t, dbs)
	if ds := deliveries(t, dbs[0], DeliveryFilter{}); len(ds) != 2 {
		t.Fatalf("%d webhook deliveries from two replicas, want 2", len(ds))
	}
}
