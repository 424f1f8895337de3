package storage

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/airlockhq/airlock/confirm"
	"github.com/airlockhq/airlock/events/webhook"
)

// previewTests are the confirm.PreviewStore contract, run by
// runConformance against each database.
var previewTests = []conformanceTest{
	{"PreviewLandingMakesClicksStale", testPreviewLandingMakesClicksStale},
	{"PreviewOfADecidedCall", testPreviewOfADecidedCall},
	{"RunningPreviews", testRunningPreviews},
	{"PreviewRecheckAuditedAndSent", testPreviewRecheckAuditedAndSent},
	{"CreateBatchRefusesAFinishedPreview", testCreateBatchRefusesAFinishedPreview},
	{"PreviewKeptInPartHashedWhole", testPreviewKeptInPartHashedWhole},
}

// previewBatch stores a pending batch of one call (key k0) whose preview runs.
func previewBatch(t *testing.T, db *DB) *confirm.Batch {
	t.Helper()
	b := &confirm.Batch{ConversationID: newConversation(t, db).ID, RequestedBy: "U-author", ExpiresAt: time.Now().Add(time.Hour)}
	b.Calls = []confirm.Call{{Key: "k0", CallID: "c0", Tool: "apply", Args: json.RawMessage(`{"path":"a.yaml"}`), Flagged: true,
		Decision: confirm.DecisionPending, Preview: confirm.Preview{State: confirm.PreviewRunning}}}
	if err := db.CreateBatch(t.Context(), b, confirm.Message{Role: "assistant", Body: json.RawMessage(`1`)}); err != nil {
		t.Fatal(err)
	}
	return b
}

// A preview landing on a pending call makes its next revision: a click
// carrying the reference rendered before (revision 0) changes nothing; one
// from the card showing the preview counts.
func testPreviewLandingMakesClicksStale(t *testing.T, db *DB) {
	ctx := t.Context()
	b := previewBatch(t, db)
	if got := loadBatch(t, db, b.ID).Calls[0].Preview.State; got != confirm.PreviewRunning {
		t.Fatalf("stored preview state %q, want running", got)
	}
	out := "- replicas: 2\n+ replicas: 20\n"
	if ok, err := db.FinishPreview(ctx, b.ID, "k0", confirm.PreviewDone, out, "bad", int64(len(out))); err == nil || ok {
		t.Fatalf("FinishPreview with a wrong hash = %v, %v", ok, err)
	}
	if ok, err := db.FinishPreview(ctx, b.ID, "k0", confirm.PreviewDone, out, confirm.PreviewHash(out), int64(len(out))); err != nil || !ok {
		t.Fatalf("FinishPreview = %v, %v", ok, err)
	}
	c := loadBatch(t, db, b.ID).Calls[0]
	if c.Preview.State != confirm.PreviewDone || c.Preview.Output != out || c.Preview.Hash != confirm.PreviewHash(out) || c.Revision != 1 {
		t.Fatalf("call after the preview: %+v revision %d", c.Preview, c.Revision)
	}
	// Landing again (a second runner) changes nothing.
	if ok, err := db.FinishPreview(ctx, b.ID, "k0", confirm.PreviewFailed, "late", "", 0); err != nil || ok {
		t.Fatalf("second FinishPreview = %v, %v; want false", ok, err)
	}
	res, err := db.Decide(ctx, confirm.Decide{BatchID: b.ID, Key: "k0", Status: confirm.DecisionAllowed, By: "U-bob", Revision: 0})
	if err != nil || !res.Stale || res.Won {
		t.Fatalf("Decide at the pre-preview revision = %+v, %v; want stale", res, err)
	}
	if d := loadBatch(t, db, b.ID).Calls[0].Decision; d != confirm.DecisionPending {
		t.Fatalf("a stale click decided the call: %s", d)
	}
	res, err = db.Decide(ctx, confirm.Decide{BatchID: b.ID, Key: "k0", Status: confirm.DecisionAllowed, By: "U-bob", Revision: 1})
	if err != nil || !res.Won {
		t.Fatalf("Decide at the preview's revision = %+v, %v", res, err)
	}
}

// A call decided (denied) while its preview ran keeps its revision; the
// failure is stored for the card, without a hash.
func testPreviewOfADecidedCall(t *testing.T, db *DB) {
	ctx := t.Context()
	b := previewBatch(t, db)
	if res, err := db.Decide(ctx, confirm.Decide{BatchID: b.ID, Key: "k0", Status: confirm.DecisionDenied, By: "U-bob"}); err != nil || !res.Won {
		t.Fatal(res, err)
	}
	if ok, err := db.FinishPreview(ctx, b.ID, "k0", confirm.PreviewFailed, "timed out", "x", 9); err != nil || !ok {
		t.Fatal(ok, err)
	}
	c := loadBatch(t, db, b.ID).Calls[0]
	if c.Revision != 0 || c.Preview.State != confirm.PreviewFailed || c.Preview.Output != "timed out" || c.Preview.Hash != "" || c.Preview.Size != 0 {
		t.Fatalf("call %+v revision %d", c.Preview, c.Revision)
	}
}

func testRunningPreviews(t *testing.T, db *DB) {
	ctx := t.Context()
	a, done, denied := previewBatch(t, db), previewBatch(t, db), previewBatch(t, db)
	if _, err := db.FinishPreview(ctx, done.ID, "k0", confirm.PreviewDone, "", confirm.PreviewHash(""), 0); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Decide(ctx, confirm.Decide{BatchID: denied.ID, Key: "k0", Status: confirm.DecisionDenied, By: "U-bob"}); err != nil {
		t.Fatal(err)
	}
	got, err := db.RunningPreviews(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0] != (confirm.CallKey{BatchID: a.ID, Key: "k0"}) {
		t.Fatalf("RunningPreviews = %v, want only %s/k0", got, a.ID)
	}
}

// The tool_result of a call with a preview carries the approved hash and
// the recheck in its audit detail and webhook event.
func testPreviewRecheckAuditedAndSent(t *testing.T, db *DB) {
	ctx := t.Context()
	setWebhooks(t, db, WebhookTarget{ID: "results", Events: []webhook.EventType{webhook.EventToolResult, webhook.EventDecision}})
	b := previewBatch(t, db)
	approved, now := confirm.PreviewHash("v1"), confirm.PreviewHash("v2")
	if _, err := db.FinishPreview(ctx, b.ID, "k0", confirm.PreviewDone, "v1", approved, 2); err != nil {
		t.Fatal(err)
	}
	if res, err := db.Decide(ctx, confirm.Decide{BatchID: b.ID, Key: "k0", Status: confirm.DecisionAllowed, By: "U-bob", Revision: 1}); err != nil || !res.Won {
		t.Fatal(res, err)
	}
	if ok, err := db.ClaimBatch(ctx, b.ID, "w1"); err != nil || !ok {
		t.Fatal(ok, err)
	}
	if ok, err := db.StartRun(ctx, b.ID, "k0"); err != nil || !ok {
		t.Fatal(ok, err)
	}
	if err := db.RecordRecheck(ctx, b.ID, "k0", confirm.RecheckChanged, now); err != nil {
		t.Fatal(err)
	}
	if err := db.FinishRun(ctx, b.ID, "k0", confirm.RunFailed, confirm.PreviewChangedMessage(approved, now)); err != nil {
		t.Fatal(err)
	}
	c := loadBatch(t, db, b.ID).Calls[0]
	if c.Preview.Recheck != confirm.RecheckChanged || c.Preview.RecheckHash != now {
		t.Fatalf("recheck %+v", c.Preview)
	}
	evs, err := db.AuditEvents(ctx, confirm.AuditFilter{})
	if err != nil {
		t.Fatal(err)
	}
	var detail string
	for _, e := range evs {
		if e.Kind == confirm.AuditToolResult && e.BatchID == b.ID {
			detail = e.Detail
		}
	}
	for _, want := range []string{`"preview_hash":"` + approved + `"`, `"recheck":"changed"`, `"recheck_hash":"` + now + `"`} {
		if !strings.Contains(detail, want) {
			t.Errorf("tool_result audit detail %s lacks %s", detail, want)
		}
	}
	ds := deliveries(t, db, DeliveryFilter{Target: "results"})
	var sawDecision, sawResult bool
	for _, d := range ds {
		var ev webhook.Event
		if err := json.Unmarshal(d.Body, &ev); err != nil {
			t.Fatal(err)
		}
		if ev.PreviewHash != approved {
			t.Errorf("%s event preview_hash %q, want %q", ev.Type, ev.PreviewHash, approved)
		}
		switch ev.Type {
		case webhook.EventDecision:
			sawDecision = ev.RecheckMatched == nil
		case webhook.EventToolResult:
			sawResult = ev.RecheckMatched != nil && !*ev.RecheckMatched
		}
	}
	if !sawDecision || !sawResult {
		t.Fatalf("deliveries %s: want a decision without recheck and a tool_result with recheck_matched false", types(ds))
	}
}

func testCreateBatchRefusesAFinishedPreview(t *testing.T, db *DB) {
	b := &confirm.Batch{ConversationID: newConversation(t, db).ID, RequestedBy: "U"}
	b.Calls = []confirm.Call{{Key: "k0", Tool: "apply", Args: json.RawMessage(`{}`), Flagged: true,
		Decision: confirm.DecisionPending, Preview: confirm.Preview{State: confirm.PreviewDone, Output: "forged", Hash: confirm.PreviewHash("forged")}}}
	if err := db.CreateBatch(t.Context(), b, confirm.Message{Role: "assistant", Body: json.RawMessage(`1`)}); err == nil {
		t.Fatal("CreateBatch stored a preview no preview produced")
	}
}

// A long preview is stored in part: its start, the hash of the whole
// output and the whole's size, which the card reports. Nothing else is
// accepted: a size below what is kept, a hash of no length, or (a preview
// kept whole) a hash that is not the output's.
func testPreviewKeptInPartHashedWhole(t *testing.T, db *DB) {
	ctx := t.Context()
	b := previewBatch(t, db)
	whole := strings.Repeat("+ line\n", 4000)
	kept := confirm.KeepPreview(whole, confirm.MaxPreviewKept)
	for _, bad := range []struct {
		out, hash string
		size      int64
	}{
		{kept, confirm.PreviewHash(whole), int64(len(kept)) - 1},
		{kept, "abc", int64(len(whole))},
		{kept, confirm.PreviewHash(whole), int64(len(kept))},
	} {
		if ok, err := db.FinishPreview(ctx, b.ID, "k0", confirm.PreviewDone, bad.out, bad.hash, bad.size); err == nil || ok {
			t.Fatalf("FinishPreview(size %d, hash %q) = %v, %v; want refused", bad.size, bad.hash, ok, err)
		}
	}
	if ok, err := db.FinishPreview(ctx, b.ID, "k0", confirm.PreviewDone, kept, confirm.PreviewHash(whole), int64(len(whole))); err != nil || !ok {
		t.Fatalf("FinishPreview = %v, %v", ok, err)
	}
	p := loadBatch(t, db, b.ID).Calls[0].Preview
	if p.Output != kept || p.Hash != confirm.PreviewHash(whole) || p.Size != int64(len(whole)) || !p.Cut() {
		t.Fatalf("stored preview: %d bytes kept, size %d, hash %s; want %d kept of %d, the whole's hash", len(p.Output), p.Size, p.Hash, len(kept), len(whole))
	}
}
