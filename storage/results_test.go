package storage

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/airlockhq/airlock/confirm"
	"github.com/airlockhq/airlock/events/webhook"
)

// testOutboxToolResult: a tool_result event carries the run's stored
// result, cut at each webhook's bound on a UTF-8 boundary and marked
// result_truncated; a webhook with no bound gets no result; a recovered
// run's result is its unknown-outcome message.
func testOutboxToolResult(t *testing.T, db *DB) {
	ctx := t.Context()
	setWebhooks(t, db,
		WebhookTarget{ID: "whole", MaxResultBytes: 16 << 10},
		WebhookTarget{ID: "cut", MaxResultBytes: 9},
		WebhookTarget{ID: "none"},
	)
	b := newBatch(t, db, later(), confirm.DecisionPending, confirm.DecisionPending)
	decide(t, db, confirm.Decide{BatchID: b.ID, Key: "k0", Status: confirm.DecisionAllowed, By: "U"})
	decide(t, db, confirm.Decide{BatchID: b.ID, Key: "k1", Status: confirm.DecisionAllowed, By: "U"})
	if ok, err := db.ClaimBatch(ctx, b.ID, "w"); err != nil || !ok {
		t.Fatal(ok, err)
	}
	const result = "héllo wörld ✓ done" // "héllo wö" is 10 bytes: a cut at 9 falls inside ö
	if ok, err := db.StartRun(ctx, b.ID, "k0"); err != nil || !ok {
		t.Fatal(ok, err)
	}
	if err := db.FinishRun(ctx, b.ID, "k0", confirm.RunSucceeded, result); err != nil {
		t.Fatal(err)
	}
	if ok, err := db.StartRun(ctx, b.ID, "k1"); err != nil || !ok {
		t.Fatal(ok, err)
	}
	if _, err := db.RecoverRunning(ctx, b.ID); err != nil {
		t.Fatal(err)
	}
	resultsOf := func(target string) []webhook.Event {
		t.Helper()
		var out []webhook.Event
		for _, d := range deliveries(t, db, DeliveryFilter{Target: target}) {
			if d.Type != webhook.EventToolResult {
				continue
			}
			var ev webhook.Event
			if err := json.Unmarshal(d.Body, &ev); err != nil {
				t.Fatal(err)
			}
			if strings.Contains(string(d.Body), `"result"`) != (ev.Result != nil) {
				t.Fatalf("body %s", d.Body)
			}
			out = append(out, ev)
		}
		if len(out) != 2 {
			t.Fatalf("%s: %d tool_result events, want 2", target, len(out))
		}
		return out
	}
	whole := resultsOf("whole")
	if whole[0].Result == nil || *whole[0].Result != result || whole[0].ResultTruncated || whole[0].Outcome != "succeeded" {
		t.Fatalf("whole: %+v", whole[0])
	}
	if whole[1].Result == nil || *whole[1].Result != confirm.UnknownOutcomeMessage || whole[1].Outcome != "unknown" {
		t.Fatalf("recovered: %+v", whole[1])
	}
	cut := resultsOf("cut")[0]
	if cut.Result == nil || *cut.Result != "héllo w" || !cut.ResultTruncated || !utf8.ValidString(*cut.Result) {
		t.Fatalf("cut: %+v, want %q truncated", cut, "héllo w")
	}
	for _, ev := range resultsOf("none") {
		if ev.Result != nil || ev.ResultTruncated {
			t.Fatalf("a webhook without a bound got a result: %+v", ev)
		}
	}
	// The same event to every webhook.
	if cut.ID != whole[0].ID {
		t.Fatalf("event ids differ: %s and %s", cut.ID, whole[0].ID)
	}
	if err := db.SetWebhooks([]WebhookTarget{{ID: "x", MaxResultBytes: -1}}); err == nil {
		t.Fatal("a negative bound was accepted")
	}
}
