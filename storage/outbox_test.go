package storage

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/airlockhq/airlock/confirm"
	"github.com/airlockhq/airlock/events/webhook"
	"github.com/airlockhq/airlock/gateway"
)

func setWebhooks(t *testing.T, db *DB, targets ...WebhookTarget) {
	t.Helper()
	if err := db.SetWebhooks(targets); err != nil {
		t.Fatalf("SetWebhooks: %v", err)
	}
}

func deliveries(t *testing.T, db *DB, f DeliveryFilter) []Delivery {
	t.Helper()
	ds, err := db.Deliveries(t.Context(), f)
	if err != nil {
		t.Fatalf("Deliveries: %v", err)
	}
	return ds
}

// types lists the deliveries' "type:call" in order.
func types(ds []Delivery) string {
	var s []string
	for _, d := range ds {
		var ev webhook.Event
		_ = json.Unmarshal(d.Body, &ev)
		s = append(s, string(d.Type)+":"+ev.Call)
	}
	return strings.Join(s, " ")
}

func countRows(t *testing.T, db *DB, table string) int {
	t.Helper()
	var n int
	if err := db.x.GetContext(t.Context(), &n, `SELECT COUNT(*) FROM `+table); err != nil {
		t.Fatal(err)
	}
	return n
}

// testOutboxWithAudit: each audit row is written with its outbox rows in
// one transaction; a failed transaction leaves neither.
func testOutboxWithAudit(t *testing.T, db *DB) {
	ctx := t.Context()
	setWebhooks(t, db, WebhookTarget{ID: "siem"}, WebhookTarget{ID: "pager"})
	b := newBatch(t, db, later(), confirm.DecisionPending, confirm.DecisionAllowedByPolicy)
	audit := auditKinds(t, db, b.ConversationID)
	for _, target := range []string{"siem", "pager"} {
		got := deliveries(t, db, DeliveryFilter{Target: target, ConversationID: b.ConversationID})
		if len(got) != len(audit) {
			t.Fatalf("%s: %d deliveries for %d audit rows (%v)", target, len(got), len(audit), audit)
		}
		for i, d := range got {
			if d.Status != DeliveryPending || d.Attempts != 0 || d.AuditID == 0 || d.EventID == "" || d.Target != target {
				t.Errorf("delivery %d = %+v", i, d)
			}
		}
	}
	siem := deliveries(t, db, DeliveryFilter{Target: "siem"})
	pager := deliveries(t, db, DeliveryFilter{Target: "pager"})
	if siem[0].EventID != pager[0].EventID || siem[0].EventID == siem[1].EventID || string(siem[0].Body) != string(pager[0].Body) {
		t.Errorf("one event to two webhooks: ids %s/%s, next %s", siem[0].EventID, pager[0].EventID, siem[1].EventID)
	}

	// A transaction that fails after writing the audit row leaves neither.
	audits, outbox := countRows(t, db, "audit"), countRows(t, db, "outbox")
	boom := errors.New("boom")
	err := db.tx(ctx, func(tx *txn) error {
		if err := db.insertAudit(ctx, tx, confirm.AuditEvent{Kind: confirm.AuditRejectedClick, ConversationID: b.ConversationID, Actor: "U-x"}); err != nil {
			return err
		}
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("tx = %v", err)
	}
	// So does a Decide that loses after its audit row would be written
	// (a missing call), and a CreateBatch that fails.
	if _, err := db.Decide(ctx, confirm.Decide{BatchID: b.ID, Key: "nope", Status: confirm.DecisionAllowed, By: "U"}); !errors.Is(err, confirm.ErrNotFound) {
		t.Fatalf("Decide(missing call) = %v", err)
	}
	dup := &confirm.Batch{ConversationID: b.ConversationID, Calls: []confirm.Call{
		{Key: "a", Position: 0, Tool: "t", Args: json.RawMessage(`1`)}, {Key: "b", Position: 0, Tool: "t", Args: json.RawMessage(`2`)}}}
	if err := db.CreateBatch(ctx, dup, confirm.Message{Role: "assistant", Body: json.RawMessage(`{}`)}); err == nil {
		t.Fatal("CreateBatch with duplicate positions succeeded")
	}
	if a, o := countRows(t, db, "audit"), countRows(t, db, "outbox"); a != audits || o != outbox {
		t.Fatalf("failed transactions left audit %d→%d, outbox %d→%d", audits, a, outbox, o)
	}

	// An outbox that cannot be written fails the audit row with it.
	if _, err := db.x.ExecContext(ctx, `DROP TABLE outbox`); err != nil {
		t.Fatal(err)
	}
	if err := db.Audit(ctx, confirm.AuditEvent{Kind: confirm.AuditRejectedClick, ConversationID: b.ConversationID, Actor: "U-x"}); err == nil {
		t.Fatal("Audit succeeded without its outbox")
	}
	if _, err := db.Decide(ctx, confirm.Decide{BatchID: b.ID, Key: "k0", Status: confirm.DecisionAllowed, By: "U"}); err == nil {
		t.Fatal("Decide succeeded without its outbox")
	}
	if a := countRows(t, db, "audit"); a != audits {
		t.Fatalf("audit rows %d → %d without their outbox rows", audits, a)
	}
	if c := callByKey(t, loadBatch(t, db, b.ID), "k0"); c.Decision != confirm.DecisionPending {
		t.Fatalf("the decision committed without its events: %+v", c)
	}
}

// testOutboxNoWebhooks: without webhooks nothing is queued; SetWebhooks
// refuses bad targets and nil switches queuing off again.
func testOutboxNoWebhooks(t *testing.T, db *DB) {
	newBatch(t, db, later(), confirm.DecisionPending)
	if n := countRows(t, db, "outbox"); n != 0 {
		t.Fatalf("%d outbox rows without webhooks", n)
	}
	for _, bad := range [][]WebhookTarget{{{ID: ""}}, {{ID: "a"}, {ID: "a"}}, {{ID: "a", Events: []webhook.EventType{"tool_calls"}}}} {
		if err := db.SetWebhooks(bad); err == nil {
			t.Errorf("SetWebhooks(%+v) accepted", bad)
		}
	}
	setWebhooks(t, db, WebhookTarget{ID: "a"})
	newBatch(t, db, later(), confirm.DecisionPending)
	if n := countRows(t, db, "outbox"); n != 2 { // tool_call, approval_request
		t.Fatalf("outbox rows: %d, want 2", n)
	}
	setWebhooks(t, db)
	before := countRows(t, db, "outbox")
	newBatch(t, db, later(), confirm.DecisionPending)
	if n := countRows(t, db, "outbox"); n != before {
		t.Fatalf("outbox grew %d → %d after SetWebhooks(nil)", before, n)
	}
}

// testOutboxEvents: every audit kind maps to its event, each webhook gets
// only the types it asked for, and arguments are the model's exact bytes.
func testOutboxEvents(t *testing.T, db *DB) {
	ctx := t.Context()
	setWebhooks(t, db,
		WebhookTarget{ID: "all"},
		WebhookTarget{ID: "some", Events: []webhook.EventType{webhook.EventToolCall, webhook.EventDecision, webhook.EventToolResult}},
		WebhookTarget{ID: "grants", Events: []webhook.EventType{webhook.EventGrantCreated, webhook.EventGrantRevoked}},
	)
	conv, err := db.Conversation(ctx, "slack", "C-ops", "T-1", false)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	const args = `{"svc": "api",  "note": "<b>&</b>"}`
	b := &confirm.Batch{ConversationID: conv.ID, RequestedBy: "U-author", ExpiresAt: now.Add(time.Hour), Calls: []confirm.Call{
		{Key: "ask", Position: 0, Tool: "deploy", Args: json.RawMessage(args), Flagged: true, Approvals: 2, Grantable: true,
			Reasons: []confirm.Reason{{Kind: confirm.ReasonRule, Rule: "two-person"}}},
		{Key: "refused", Position: 1, Tool: "drop_db", Args: json.RawMessage(`{}`), Decision: confirm.DecisionDeniedByRule,
			DecidedBy: "rule:no-drops", DenyMessage: "no", Reasons: []confirm.Reason{{Kind: confirm.ReasonRule, Rule: "no-drops"}}},
		{Key: "granted", Position: 2, Tool: "restart", Args: json.RawMessage(`{"x":1}`), Decision: confirm.DecisionAllowedByGrant,
			DecidedBy: "grant:g-7", GrantID: "g-7"},
	}}
	seedGrant(t, db, conv.ID, "g-7", "restart")
	if err := db.CreateBatch(ctx, b, confirm.Message{Role: "assistant", Body: json.RawMessage(`1`)}); err != nil {
		t.Fatal(err)
	}
	decide(t, clockAt(db, now), confirm.Decide{BatchID: b.ID, Key: "ask", Status: confirm.DecisionAllowed, By: "U-alice"})
	g := &confirm.Grant{ID: "g-1", ExpiresAt: now.Add(time.Hour)}
	decide(t, clockAt(db, now.Add(time.Second)), confirm.Decide{BatchID: b.ID, Key: "ask", Status: confirm.DecisionAllowed, By: "U-bob", Grant: g})
	if ok, err := db.ClaimBatch(ctx, b.ID, "w"); err != nil || !ok {
		t.Fatal(ok, err)
	}
	for _, r := range []struct {
		key string
		st  confirm.RunStatus
	}{{"ask", confirm.RunSucceeded}, {"granted", confirm.RunFailed}} {
		if ok, err := db.StartRun(ctx, b.ID, r.key); err != nil || !ok {
			t.Fatal(ok, err)
		}
		if err := db.FinishRun(ctx, b.ID, r.key, r.st, "out"); err != nil {
			t.Fatal(err)
		}
	}
	if ok, err := clockAt(db, now.Add(2*time.Second)).RevokeGrant(ctx, "g-1", "cli:ops"); err != nil || !ok {
		t.Fatal(ok, err)
	}
	if err := db.Audit(ctx, confirm.AuditEvent{Kind: confirm.AuditRejectedClick, Actor: "U-mallory",
		Detail: `{"why":"unknown button","platform":"slack","channel":"C-x"}`}); err != nil {
		t.Fatal(err)
	}
	// An expired call and an abandoned pause, in conversations of their own.
	exp := newBatch(t, db, now.Add(-time.Second), confirm.DecisionPending)
	if n, err := clockAt(db, now).ExpirePending(ctx, exp.ID, "airlock", confirm.ExpiredMessage); err != nil || n != 1 {
		t.Fatal(n, err)
	}
	ab := newBatch(t, db, later(), confirm.DecisionPending, confirm.DecisionAllowedByPolicy)
	if n, err := clockAt(db, now).AbandonPending(ctx, ab.ID, "airlock", confirm.MovedOnMessage); err != nil || n != 2 {
		t.Fatal(n, err)
	}

	all := deliveries(t, db, DeliveryFilter{Target: "all", ConversationID: conv.ID})
	want := "tool_call:ask tool_call:refused tool_call:granted decision:refused grant_used:granted approval_request: " +
		"approval:ask approval:ask decision:ask grant_created:ask tool_result:ask tool_result:granted grant_revoked:ask"
	if got := types(all); got != want {
		t.Fatalf("all:\n got %s\nwant %s", got, want)
	}
	if got := types(deliveries(t, db, DeliveryFilter{Target: "some", ConversationID: conv.ID})); got != "tool_call:ask tool_call:refused tool_call:granted decision:refused decision:ask tool_result:ask tool_result:granted" {
		t.Fatalf("some: %s", got)
	}
	if got := types(deliveries(t, db, DeliveryFilter{Target: "grants"})); got != "grant_created:ask grant_revoked:ask" {
		t.Fatalf("grants: %s", got)
	}

	events := map[string]webhook.Event{}
	ids := map[string]bool{}
	for _, d := range deliveries(t, db, DeliveryFilter{Target: "all"}) {
		var ev webhook.Event
		if err := json.Unmarshal(d.Body, &ev); err != nil {
			t.Fatalf("body %s: %v", d.Body, err)
		}
		if ev.ID != d.EventID || ev.Type != d.Type || ids[ev.ID] {
			t.Fatalf("event %+v of delivery %+v (ids seen %v)", ev, d, ids)
		}
		ids[ev.ID] = true
		if ev.Time.IsZero() || !strings.Contains(string(d.Body), `"time":"`+ev.Time.UTC().Format(time.RFC3339Nano)+`"`) {
			t.Errorf("time of %s", d.Body)
		}
		k := string(ev.Type) + ":" + ev.Call
		switch {
		case ev.Type == webhook.EventApproval:
			k += fmt.Sprint(ev.Votes)
		case ev.Type == webhook.EventDecision && ev.Conversation.ID == ab.ConversationID:
			k += ":" + ev.Outcome
		case ev.Type == webhook.EventExpired, ev.Conversation.ID == conv.ID, ev.Conversation.ID == 0:
		default:
			continue // the other batches' tool calls and cards
		}
		events[k] = ev
	}
	toolCall := events["tool_call:ask"]
	if toolCall.Conversation != (webhook.Conversation{ID: conv.ID, Platform: "slack", Channel: "C-ops", Thread: "T-1"}) ||
		toolCall.Batch != b.ID || toolCall.Tool != "deploy" || string(toolCall.Args) != args || toolCall.Actor != "U-author" || toolCall.Rule != "two-person" {
		t.Errorf("tool_call = %+v (args %s)", toolCall, toolCall.Args)
	}
	for _, d := range all {
		if d.Type == webhook.EventToolCall && strings.Contains(string(d.Body), `"call":"ask"`) && !strings.Contains(string(d.Body), `"args":`+args+`,`) {
			t.Errorf("body %s: want the args spliced in verbatim", d.Body)
		}
	}
	checks := []struct {
		key  string
		ok   func(webhook.Event) bool
		what string
	}{
		{"approval_request:", func(e webhook.Event) bool {
			return e.Actor == "U-author" && e.Expires != nil && e.Expires.Equal(utc(b.ExpiresAt)) && e.Args == nil
		}, "actor author, expires"},
		{"decision:refused", func(e webhook.Event) bool {
			return e.Outcome == webhook.OutcomeDenied && e.Rule == "no-drops" && e.Actor == "airlock" && string(e.Args) == `{}`
		}, "denied by rule no-drops, actor airlock"},
		{"grant_used:granted", func(e webhook.Event) bool { return e.Grant == "g-7" && e.Actor == "airlock" }, "grant g-7"},
		{"approval:ask1", func(e webhook.Event) bool { return e.Actor == "U-alice" && e.Votes == 1 && e.Required == 2 }, "alice 1/2"},
		{"approval:ask2", func(e webhook.Event) bool { return e.Actor == "U-bob" && e.Votes == 2 && e.Required == 2 }, "bob 2/2"},
		{"decision:ask", func(e webhook.Event) bool {
			return e.Outcome == webhook.OutcomeAllowed && e.Actor == "U-bob" && string(e.Args) == args
		}, "allowed by bob, exact args"},
		{"grant_created:ask", func(e webhook.Event) bool {
			return e.Grant == "g-1" && e.Actor == "U-bob" && e.Expires != nil && e.Expires.Equal(utc(g.ExpiresAt))
		}, "grant g-1 by bob"},
		{"tool_result:ask", func(e webhook.Event) bool { return e.Outcome == "succeeded" && e.Actor == "airlock" }, "succeeded"},
		{"tool_result:granted", func(e webhook.Event) bool { return e.Outcome == "failed" && string(e.Args) == `{"x":1}` }, "failed"},
		{"grant_revoked:ask", func(e webhook.Event) bool { return e.Grant == "g-1" && e.Actor == "cli:ops" }, "revoked by cli:ops"},
		{"rejected_click:", func(e webhook.Event) bool {
			return e.Actor == "U-mallory" && e.Reason == "unknown button" && e.Conversation.Platform == "slack" && e.Conversation.Channel == "C-x"
		}, "mallory, why, platform and channel from the click"},
		{"expired:k0", func(e webhook.Event) bool { return e.Outcome == webhook.OutcomeExpired && e.Actor == "airlock" }, "expired"},
		{"decision:k0:abandoned", func(e webhook.Event) bool { return e.Outcome == webhook.OutcomeAbandoned }, "abandoned"},
		{"decision:k1:abandoned", func(e webhook.Event) bool { return e.Outcome == webhook.OutcomeAbandoned }, "abandoned (allowed earlier)"},
	}
	for _, c := range checks {
		e, ok := events[c.key]
		if !ok {
			t.Errorf("no event %s (have %v)", c.key, slices.Sorted(func(yield func(string) bool) {
				for k := range events {
					if !yield(k) {
						return
					}
				}
			}))
			continue
		}
		if !c.ok(e) {
			t.Errorf("%s = %+v (args %s); want %s", c.key, e, e.Args, c.what)
		}
	}
}

// testOutboxClaimsInOrder: only the oldest undelivered event of a
// conversation is claimable per webhook; a failed or dead one holds the
// later ones back until it is delivered; RetryDelivery revives a dead one.
func testOutboxClaimsInOrder(t *testing.T, db *DB) {
	ctx := t.Context()
	setWebhooks(t, db, WebhookTarget{ID: "w", Events: []webhook.EventType{webhook.EventToolCall}}, WebhookTarget{ID: "v", Events: []webhook.EventType{webhook.EventToolCall}})
	a := newBatch(t, db, later(), confirm.DecisionAllowedByPolicy, confirm.DecisionAllowedByPolicy, confirm.DecisionAllowedByPolicy)
	c := newBatch(t, db, later(), confirm.DecisionAllowedByPolicy)
	now := time.Now().Add(time.Minute)
	claim := func(worker string, at time.Time) []Delivery {
		t.Helper()
		ds, err := db.ClaimDeliveries(ctx, "w", worker, at, time.Minute, 10)
		if err != nil {
			t.Fatal(err)
		}
		return ds
	}
	convs := func(ds []Delivery) string {
		var s []string
		for _, d := range ds {
			var ev webhook.Event
			_ = json.Unmarshal(d.Body, &ev)
			s = append(s, fmt.Sprintf("%d/%s", d.ConversationID, ev.Call))
		}
		return strings.Join(s, " ")
	}
	got := claim("r1", now)
	if want := fmt.Sprintf("%d/k0 %d/k0", a.ConversationID, c.ConversationID); convs(got) != want {
		t.Fatalf("first claim = %s, want the head of each conversation %s", convs(got), want)
	}
	if got[0].Attempts != 1 || got[0].ClaimedBy != "r1" || got[0].FirstAttemptAt == nil || !got[0].FirstAttemptAt.Equal(utc(now)) {
		t.Fatalf("claimed = %+v", got[0])
	}
	if again := claim("r2", now); len(again) != 0 {
		t.Fatalf("r2 claimed %s while r1 holds the heads", convs(again))
	}
	// The other webhook's queue is its own.
	if v, err := db.ClaimDeliveries(ctx, "v", "r2", now, time.Minute, 10); err != nil || len(v) != 2 {
		t.Fatalf("webhook v claims = %d, %v", len(v), err)
	}
	// A failure: retried at next; the conversation's later events wait.
	head := got[0]
	if ok, err := db.MarkFailed(ctx, head.ID, "r2", now, now.Add(time.Second), false, "HTTP 500"); err != nil || ok {
		t.Fatalf("MarkFailed by a worker not holding the claim = %v, %v", ok, err)
	}
	if ok, err := db.MarkFailed(ctx, head.ID, "r1", now, now.Add(time.Second), false, "HTTP 500"); err != nil || !ok {
		t.Fatalf("MarkFailed = %v, %v", ok, err)
	}
	if ok, err := db.MarkDelivered(ctx, got[1].ID, now); err != nil || !ok {
		t.Fatalf("MarkDelivered = %v, %v", ok, err)
	}
	if again := claim("r2", now.Add(500*time.Millisecond)); len(again) != 0 {
		t.Fatalf("claimed %s before the failed head was due", convs(again))
	}
	retry := claim("r2", now.Add(time.Second))
	if len(retry) != 1 || retry[0].ID != head.ID || retry[0].Attempts != 2 || !retry[0].FirstAttemptAt.Equal(utc(now)) || retry[0].LastError != "HTTP 500" {
		t.Fatalf("retry claim = %+v", retry)
	}
	// Dead: the later events still wait; RetryDelivery revives it.
	if ok, err := db.MarkFailed(ctx, head.ID, "r2", now.Add(time.Second), time.Time{}, true, "gave up"); err != nil || !ok {
		t.Fatal(ok, err)
	}
	if again := claim("r1", now.Add(time.Hour)); len(again) != 0 {
		t.Fatalf("claimed %s behind a dead delivery", convs(again))
	}
	dead := deliveries(t, db, DeliveryFilter{Status: []DeliveryStatus{DeliveryDead}})
	if len(dead) != 1 || dead[0].ID != head.ID || dead[0].DeadAt == nil || dead[0].LastError != "gave up" || dead[0].ClaimedBy != "" {
		t.Fatalf("dead = %+v", dead)
	}
	if ok, err := db.RetryDelivery(ctx, got[1].ID, now); err != nil || ok {
		t.Fatalf("RetryDelivery of a delivered one = %v, %v", ok, err)
	}
	if ok, err := db.RetryDelivery(ctx, 987654, now); err != nil || ok {
		t.Fatalf("RetryDelivery of a missing one = %v, %v", ok, err)
	}
	if ok, err := db.RetryDelivery(ctx, head.ID, now.Add(time.Hour)); err != nil || !ok {
		t.Fatalf("RetryDelivery = %v, %v", ok, err)
	}
	revived, err := db.Delivery(ctx, head.ID)
	if err != nil || revived.Status != DeliveryPending || revived.Attempts != 0 || revived.FirstAttemptAt != nil || revived.DeadAt != nil {
		t.Fatalf("revived = %+v, %v", revived, err)
	}
	if _, err := db.Delivery(ctx, 987654); !errors.Is(err, confirm.ErrNotFound) {
		t.Fatalf("Delivery(missing) = %v", err)
	}
	later := now.Add(2 * time.Hour)
	for i, want := range []string{"k0", "k1", "k2"} {
		ds := claim("r1", later)
		if len(ds) != 1 || convs(ds) != fmt.Sprintf("%d/%s", a.ConversationID, want) {
			t.Fatalf("claim %d = %s, want %s", i, convs(ds), want)
		}
		if ok, err := db.MarkDelivered(ctx, ds[0].ID, later); err != nil || !ok {
			t.Fatal(ok, err)
		}
		if ok, err := db.MarkDelivered(ctx, ds[0].ID, later); err != nil || ok {
			t.Fatalf("second MarkDelivered = %v, %v", ok, err)
		}
	}
	if left := deliveries(t, db, DeliveryFilter{Target: "w", Status: []DeliveryStatus{DeliveryPending, DeliveryDead}}); len(left) != 0 {
		t.Fatalf("left undelivered: %+v", left)
	}
	// Pruning forgets delivered rows older than the cut, and only those.
	n, err := db.PruneDeliveries(ctx, later.Add(time.Second))
	if err != nil || n != 4 {
		t.Fatalf("PruneDeliveries = %d, %v; want 4", n, err)
	}
	left := deliveries(t, db, DeliveryFilter{})
	if len(left) != 4 {
		t.Fatalf("after prune: %d deliveries, want webhook v's 4", len(left))
	}
	for _, d := range left {
		if d.Target != "v" || d.Status != DeliveryPending {
			t.Fatalf("after prune: %s %s %s", d.Target, d.Status, d.Body)
		}
	}
}

// testOutboxClaimExpiry: a claim lapses at its expiry (a replica died
// mid-send); the old holder can then no longer record a failure.
func testOutboxClaimExpiry(t *testing.T, db *DB) {
	ctx := t.Context()
	setWebhooks(t, db, WebhookTarget{ID: "w", Events: []webhook.EventType{webhook.EventApprovalRequest}})
	newBatch(t, db, later(), confirm.DecisionPending)
	now := time.Now().Add(time.Minute)
	first, err := db.ClaimDeliveries(ctx, "w", "dead-replica", now, 30*time.Second, 5)
	if err != nil || len(first) != 1 {
		t.Fatal(first, err)
	}
	if ds, _ := db.ClaimDeliveries(ctx, "w", "r2", now.Add(29*time.Second), 30*time.Second, 5); len(ds) != 0 {
		t.Fatalf("claimed before the claim lapsed: %+v", ds)
	}
	ds, err := db.ClaimDeliveries(ctx, "w", "r2", now.Add(30*time.Second), 30*time.Second, 5)
	if err != nil || len(ds) != 1 || ds[0].Attempts != 2 || ds[0].ClaimedBy != "r2" {
		t.Fatalf("claim after the lapse = %+v, %v", ds, err)
	}
	if ok, _ := db.MarkFailed(ctx, first[0].ID, "dead-replica", now, now, false, "x"); ok {
		t.Fatal("the lapsed holder recorded a failure")
	}
	if _, err := db.ClaimDeliveries(ctx, "w", "", now, time.Second, 1); err == nil {
		t.Fatal("claim without a worker")
	}
}

// testOutboxReplicas: two replicas (two pools on one database) claiming
// and completing deliveries as fast as they can never hold one delivery at
// once, never hold two of one conversation at once, and deliver each once.
func testOutboxReplicas(t *testing.T, driver, dsn string) {
	ctx := t.Context()
	dbs := openReplicas(t, driver, dsn, 2)
	for _, db := range dbs {
		setWebhooks(t, db, WebhookTarget{ID: "w"})
	}
	const convs, perConv = 6, 5
	for range convs {
		conv := newConversation(t, dbs[0])
		for range perConv {
			if err := dbs[0].Audit(ctx, confirm.AuditEvent{Kind: confirm.AuditRejectedClick, ConversationID: conv.ID, Actor: "U"}); err != nil {
				t.Fatal(err)
			}
		}
	}
	var (
		mu        sync.Mutex
		holding   = map[int64]string{} // delivery → replica
		convHeld  = map[int64]int64{}  // conversation → delivery
		delivered = map[int64]int{}
		lastSent  = map[int64]int64{} // conversation → last delivery id sent
		failures  []string
		total     atomic.Int64
	)
	fail := func(format string, args ...any) {
		failures = append(failures, fmt.Sprintf(format, args...))
	}
	var wg sync.WaitGroup
	for r := range 2 {
		for g := range 3 { // several goroutines per replica, like parallel sends
			worker := fmt.Sprintf("replica-%d", r)
			wg.Go(func() {
				db := dbs[r]
				for idle := 0; total.Load() < convs*perConv && idle < 2000; {
					ds, err := db.ClaimDeliveries(ctx, "w", worker, time.Time{}, time.Minute, 2)
					if err != nil {
						mu.Lock()
						fail("claim: %v", err)
						mu.Unlock()
						return
					}
					if len(ds) == 0 {
						idle++
						time.Sleep(time.Millisecond)
						continue
					}
					for _, d := range ds {
						mu.Lock()
						if other, held := holding[d.ID]; held {
							fail("delivery %d held by %s and %s/%d", d.ID, other, worker, g)
						}
						if other, held := convHeld[d.ConversationID]; held {
							fail("conversation %d: %d and %d held at once", d.ConversationID, other, d.ID)
						}
						if d.ID < lastSent[d.ConversationID] {
							fail("conversation %d: %d sent after %d", d.ConversationID, d.ID, lastSent[d.ConversationID])
						}
						holding[d.ID], convHeld[d.ConversationID], lastSent[d.ConversationID] = worker, d.ID, d.ID
						mu.Unlock()
						time.Sleep(time.Duration(d.ID%3) * time.Millisecond) // "sending"
						mu.Lock()
						delete(holding, d.ID)
						delete(convHeld, d.ConversationID)
						delivered[d.ID]++
						mu.Unlock()
						if ok, err := db.MarkDelivered(ctx, d.ID, time.Time{}); err != nil || !ok {
							mu.Lock()
							fail("MarkDelivered %d = %v, %v", d.ID, ok, err)
							mu.Unlock()
						}
						total.Add(1)
					}
				}
			})
		}
	}
	wg.Wait()
	for _, f := range failures {
		t.Error(f)
	}
	if len(delivered) != convs*perConv {
		t.Fatalf("delivered %d of %d", len(delivered), convs*perConv)
	}
	for id, n := range delivered {
		if n != 1 {
			t.Errorf("delivery %d sent %d times", id, n)
		}
	}
}

// testOutboxGatewaySession: an event of a gateway client's session names
// the client and the session; a chat thread's names neither.
func testOutboxGatewaySession(t *testing.T, db *DB) {
	ctx := t.Context()
	setWebhooks(t, db, WebhookTarget{ID: "siem"})
	gw, err := db.Conversation(ctx, "slack", "C-ops", gateway.SessionThread("bob-laptop", "sess-1"), false)
	if err != nil {
		t.Fatal(err)
	}
	chat, err := db.Conversation(ctx, "slack", "C-ops", "1700000000.000100", false)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []int64{gw.ID, chat.ID} {
		if err := db.Audit(ctx, confirm.AuditEvent{Kind: confirm.AuditToolCall, ConversationID: id, Tool: "Bash", Actor: "UBOB", Detail: `{}`}); err != nil {
			t.Fatal(err)
		}
	}
	convOf := func(id int64) webhook.Conversation {
		ds := deliveries(t, db, DeliveryFilter{Target: "siem", ConversationID: id})
		if len(ds) != 1 {
			t.Fatalf("%d deliveries", len(ds))
		}
		var ev webhook.Event
		if err := json.Unmarshal(ds[0].Body, &ev); err != nil {
			t.Fatal(err)
		}
		return ev.Conversation
	}
	if c := convOf(gw.ID); c.Client != "bob-laptop" || c.Session != "sess-1" {
		t.Errorf("the gateway session's event: %+v", c)
	}
	if c := convOf(chat.ID); c.Client != "" || c.Session != "" {
		t.Errorf("a chat thread's event: %+v", c)
	}
}
