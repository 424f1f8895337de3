package storage

import (
	"bytes"
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
)

// runConformance runs the confirm.Store contract against a fresh database
// from open for every test.
func runConformance(t *testing.T, open func(t *testing.T) *DB) {
	tests := []struct {
		name string
		fn   func(t *testing.T, db *DB)
	}{
		{"ConversationGetOrCreate", testConversationGetOrCreate},
		{"MessagesOrderAndBytes", testMessagesOrderAndBytes},
		{"ConcurrentAppend", testConcurrentAppend},
		{"CreateBatchRoundTrip", testCreateBatchRoundTrip},
		{"CreateBatchRollsBack", testCreateBatchRollsBack},
		{"DecideWinsOnce", testDecideWinsOnce},
		{"DecideAfterExpiry", testDecideAfterExpiry},
		{"LastDecisionFlipsBatch", testLastDecisionFlipsBatch},
		{"ResolvePendingExpiry", testResolvePendingExpiry},
		{"ResolvePendingAbandon", testResolvePendingAbandon},
		{"ClaimRunComplete", testClaimRunComplete},
		{"FinishRunAndComplete", testFinishRunAndComplete},
		{"RecoverRunning", testRecoverRunning},
		{"AuditEvents", testAuditEvents},
		{"AuditAppendOnly", testAuditAppendOnly},
		{"PendingBatch", testPendingBatch},
		{"BatchesInOrder", testBatchesInOrder},
		{"SetCardRef", testSetCardRef},
		{"OpenBatches", testOpenBatches},
		{"MigrateIdempotent", testMigrateIdempotent},
		{"TimeRoundTrip", testTimeRoundTrip},
		{"RaceDecideSameCall", testRaceDecideSameCall},
		{"RaceDecideAllCalls", testRaceDecideAllCalls},
		{"RaceClaim", testRaceClaim},
		{"ClaimBatchStarting", testClaimBatchStarting},
		{"RaceClaimStarting", testRaceClaimStarting},
		{"DecideClaiming", testDecideClaiming},
		{"RaceDecideClaiming", testRaceDecideClaiming},
		{"MarkEventOnce", testMarkEventOnce},
		{"Leases", testLeases},
		{"RaceLease", testRaceLease},
		{"Reminders", testReminders},
		{"RecoverOneBatch", testRecoverOneBatch},
		{"UnansweredConversations", testUnanswered},
		{"ConversationDM", testConversationDM},
		{"Reasons", testReasons},
		{"Quorum", testQuorum},
		{"QuorumDeny", testQuorumDeny},
		{"QuorumExpiry", testQuorumExpiry},
		{"RaceQuorum", testRaceQuorum},
		{"RaceSameApprover", testRaceSameApprover},
		{"Grants", testGrants},
		{"PauseDecisions", testPauseDecisions},
		{"AbandonGranted", testAbandonGranted},
		{"ExactArgsInAudit", testExactArgsInAudit},
		{"PendingInChannel", testPendingInChannel},
		{"UnknownCalls", testUnknownCalls},
		{"CountTurn", testCountTurn},
		{"RaceCountTurn", testRaceCountTurn},
		{"ClockSync", testClockSync},
		{"OutboxWithAudit", testOutboxWithAudit},
		{"OutboxNoWebhooks", testOutboxNoWebhooks},
		{"OutboxEvents", testOutboxEvents},
		{"OutboxClaimsInOrder", testOutboxClaimsInOrder},
		{"OutboxClaimExpiry", testOutboxClaimExpiry},
	}
	for _, tc := range append(append(append(append(tests, routeTests...), integrityTests...), boundsTests...), checkedTests...) {
		t.Run(tc.name, func(t *testing.T) {
			tc.fn(t, open(t))
		})
	}
}

var threadSeq atomic.Int64

func newConversation(t *testing.T, db *DB) confirm.Conversation {
	t.Helper()
	c, err := db.Conversation(t.Context(), "slack", "C1", fmt.Sprintf("thread-%d", threadSeq.Add(1)), false)
	if err != nil {
		t.Fatalf("Conversation: %v", err)
	}
	return c
}

// newBatch stores a batch of one call per decision (key "k<i>", position i)
// in a new conversation, expiring at expires.
func newBatch(t *testing.T, db *DB, expires time.Time, decisions ...confirm.DecisionStatus) *confirm.Batch {
	t.Helper()
	return batchIn(t, db, newConversation(t, db).ID, expires, decisions...)
}

// batchIn is newBatch in an existing conversation.
func batchIn(t *testing.T, db *DB, convID int64, expires time.Time, decisions ...confirm.DecisionStatus) *confirm.Batch {
	t.Helper()
	b := &confirm.Batch{ConversationID: convID, RequestedBy: "U-author", ExpiresAt: expires}
	for i, d := range decisions {
		b.Calls = append(b.Calls, confirm.Call{
			Key:      fmt.Sprintf("k%d", i),
			Position: i,
			CallID:   fmt.Sprintf("call_%d", i),
			Tool:     "deploy",
			Args:     json.RawMessage(fmt.Sprintf(`{"n": %d}`, i)),
			Summary:  fmt.Sprintf("deploy %d", i),
			Flagged:  d == confirm.DecisionPending,
			Decision: d,
		})
	}
	if err := db.CreateBatch(t.Context(), b, confirm.Message{Role: "assistant", Body: json.RawMessage(`{"calls":[]}`)}); err != nil {
		t.Fatalf("CreateBatch: %v", err)
	}
	return b
}

func loadBatch(t *testing.T, db *DB, id string) *confirm.Batch {
	t.Helper()
	b, err := db.Batch(t.Context(), id)
	if err != nil {
		t.Fatalf("Batch(%s): %v", id, err)
	}
	return b
}

func callByKey(t *testing.T, b *confirm.Batch, key string) confirm.Call {
	t.Helper()
	for _, c := range b.Calls {
		if c.Key == key {
			return c
		}
	}
	t.Fatalf("batch %s has no call %q", b.ID, key)
	return confirm.Call{}
}

func decide(t *testing.T, db *DB, d confirm.Decide) confirm.DecideResult {
	t.Helper()
	if d.Now.IsZero() {
		d.Now = time.Now()
	}
	res, err := db.Decide(t.Context(), d)
	if err != nil {
		t.Fatalf("Decide(%+v): %v", d, err)
	}
	return res
}

func auditKinds(t *testing.T, db *DB, convID int64) []string {
	t.Helper()
	evs, err := db.AuditEvents(t.Context(), confirm.AuditFilter{ConversationID: convID})
	if err != nil {
		t.Fatalf("AuditEvents: %v", err)
	}
	var kinds []string
	for _, e := range evs {
		kinds = append(kinds, string(e.Kind)+":"+e.CallKey)
	}
	return kinds
}

func later() time.Time { return time.Now().Add(time.Hour) }

func testConversationGetOrCreate(t *testing.T, db *DB) {
	ctx := t.Context()
	a, err := db.Conversation(ctx, "slack", "C1", "T1", false)
	if err != nil {
		t.Fatal(err)
	}
	b, err := db.Conversation(ctx, "slack", "C1", "T1", false)
	if err != nil {
		t.Fatal(err)
	}
	if a.ID == 0 || a.ID != b.ID || !a.CreatedAt.Equal(b.CreatedAt) {
		t.Fatalf("get-or-create not idempotent: %+v vs %+v", a, b)
	}
	if a.Platform != "slack" || a.Channel != "C1" || a.Thread != "T1" {
		t.Fatalf("fields: %+v", a)
	}
	other, err := db.Conversation(ctx, "slack", "C1", "", false)
	if err != nil {
		t.Fatal(err)
	}
	if other.ID == a.ID {
		t.Fatal("a different thread got the same conversation")
	}
	if err := db.AppendMessages(ctx, a.ID, confirm.Message{Role: "user", Body: json.RawMessage(`{"x":1}`)}); err != nil {
		t.Fatal(err)
	}
	if m, err := db.Message(ctx, a.ID, 1); err != nil || string(m.Body) != `{"x":1}` {
		t.Fatalf("Message = %+v, %v", m, err)
	}
	if _, err := db.Message(ctx, a.ID, 2); !errors.Is(err, confirm.ErrNotFound) {
		t.Fatalf("Message of a missing seq: %v", err)
	}
	found, err := db.FindConversation(ctx, "slack", "C1", "T1")
	if err != nil || found.ID != a.ID {
		t.Fatalf("FindConversation = %+v, %v", found, err)
	}
	if _, err := db.FindConversation(ctx, "slack", "C1", "no-such-thread"); !errors.Is(err, confirm.ErrNotFound) {
		t.Fatalf("FindConversation of a thread without one: %v", err)
	}
	byID, err := db.ConversationByID(ctx, a.ID)
	if err != nil || byID.ID != a.ID || byID.Thread != "T1" {
		t.Fatalf("ConversationByID = %+v, %v", byID, err)
	}
	if _, err := db.ConversationByID(ctx, 987654); !errors.Is(err, confirm.ErrNotFound) {
		t.Fatalf("ConversationByID(missing) error = %v, want ErrNotFound", err)
	}

	// Concurrent get-or-create of one thread yields one row.
	var wg sync.WaitGroup
	start := make(chan struct{})
	ids := make([]int64, 20)
	errs := make([]error, 20)
	for i := range ids {
		wg.Go(func() {
			<-start
			c, err := db.Conversation(ctx, "discord", "G", "same", false)
			ids[i], errs[i] = c.ID, err
		})
	}
	close(start)
	wg.Wait()
	for i := range ids {
		if errs[i] != nil {
			t.Fatalf("concurrent Conversation: %v", errs[i])
		}
		if ids[i] != ids[0] {
			t.Fatalf("concurrent Conversation returned ids %v", ids)
		}
	}
}

func testMessagesOrderAndBytes(t *testing.T, db *DB) {
	ctx := t.Context()
	conv := newConversation(t, db)
	bodies := []string{
		`{"role":"user","text":"hi"}`,
		"{ \"text\" :\t\"caf\u00e9 \\u0000 \\\"q\\\"\",\n  \"n\": 1.50 }",
		`"just a string"`,
		`[1,  2 ,3]`,
	}
	msgs := []confirm.Message{
		{Role: "user", Body: json.RawMessage(bodies[0])},
		{Role: "assistant", Body: json.RawMessage(bodies[1])},
	}
	if err := db.AppendMessages(ctx, conv.ID, msgs...); err != nil {
		t.Fatal(err)
	}
	if msgs[0].Seq != 1 || msgs[1].Seq != 2 {
		t.Errorf("AppendMessages set seqs %d, %d; want 1, 2", msgs[0].Seq, msgs[1].Seq)
	}
	if err := db.AppendMessages(ctx, conv.ID, confirm.Message{Role: "tool", Body: json.RawMessage(bodies[2])}); err != nil {
		t.Fatal(err)
	}
	if err := db.AppendMessages(ctx, conv.ID, confirm.Message{Role: "user", Body: json.RawMessage(bodies[3])}); err != nil {
		t.Fatal(err)
	}
	if err := db.AppendMessages(ctx, conv.ID); err != nil {
		t.Fatalf("AppendMessages with none: %v", err)
	}
	got, err := db.Messages(ctx, conv.ID)
	if err != nil {
		t.Fatal(err)
	}
	roles := []string{"user", "assistant", "tool", "user"}
	if len(got) != len(bodies) {
		t.Fatalf("got %d messages, want %d", len(got), len(bodies))
	}
	for i, m := range got {
		if m.Seq != i+1 || m.Role != roles[i] || m.ConversationID != conv.ID {
			t.Errorf("message %d = seq %d role %q conv %d", i, m.Seq, m.Role, m.ConversationID)
		}
		if !bytes.Equal(m.Body, []byte(bodies[i])) {
			t.Errorf("message %d body = %q, want %q", i, m.Body, bodies[i])
		}
		if m.CreatedAt.IsZero() || m.CreatedAt.Location() != time.UTC {
			t.Errorf("message %d CreatedAt = %v, want set, UTC", i, m.CreatedAt)
		}
	}
	other := newConversation(t, db)
	if got, err := db.Messages(ctx, other.ID); err != nil || len(got) != 0 {
		t.Fatalf("Messages(empty) = %v, %v", got, err)
	}
	if err := db.AppendMessages(ctx, 987654, confirm.Message{Role: "user", Body: json.RawMessage(`1`)}); !errors.Is(err, confirm.ErrNotFound) {
		t.Fatalf("AppendMessages(missing conversation) error = %v, want ErrNotFound", err)
	}
}

func testConcurrentAppend(t *testing.T, db *DB) {
	ctx := t.Context()
	conv := newConversation(t, db)
	const workers, each = 10, 3
	var wg sync.WaitGroup
	start := make(chan struct{})
	errs := make(chan error, workers)
	for w := range workers {
		wg.Go(func() {
			<-start
			for i := range each {
				body := fmt.Sprintf(`{"w":%d,"i":%d}`, w, i)
				if err := db.AppendMessages(ctx, conv.ID, confirm.Message{Role: "user", Body: json.RawMessage(body)}); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("concurrent AppendMessages: %v", err)
	}
	got, err := db.Messages(ctx, conv.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != workers*each {
		t.Fatalf("got %d messages, want %d", len(got), workers*each)
	}
	for i, m := range got {
		if m.Seq != i+1 {
			t.Fatalf("message %d has seq %d", i, m.Seq)
		}
	}
}

func testCreateBatchRoundTrip(t *testing.T, db *DB) {
	ctx := t.Context()
	conv := newConversation(t, db)
	if err := db.AppendMessages(ctx, conv.ID, confirm.Message{Role: "user", Body: json.RawMessage(`"deploy please"`)}); err != nil {
		t.Fatal(err)
	}
	expires := time.Date(2031, 5, 6, 7, 8, 9, 123456000, time.FixedZone("X", 3600))
	oddArgs := `{"b": 1, "a":2}`
	intro := "Deploying v2 \u202e<!channel> now" // a right-to-left override, escaped here
	b := &confirm.Batch{
		ConversationID: conv.ID,
		RequestedBy:    "U-alice",
		ExpiresAt:      expires,
		Intro:          &intro,
		Calls: []confirm.Call{ // positions out of slice order: Batch orders by position
			{Key: "#1", Position: 1, Tool: "restart", Args: json.RawMessage(`{}`), Decision: confirm.DecisionAllowedByPolicy, Summary: "restart web"},
			{Key: "call_a", Position: 0, CallID: "call_a", Tool: "deploy", Args: json.RawMessage(oddArgs), Flagged: true, Summary: "deploy v2 to prod"},
			{Key: "#2", Position: 2, Tool: "bad", Args: json.RawMessage(`{not json`), Decision: confirm.DecisionInvalid, DenyMessage: "bad args"},
		},
	}
	assistant := confirm.Message{Role: "assistant", Body: json.RawMessage(`{"tool_calls": [ 1,2 ]}`)}
	if err := db.CreateBatch(ctx, b, assistant); err != nil {
		t.Fatal(err)
	}
	if len(b.ID) != 26 {
		t.Errorf("generated id %q, want 26 characters", b.ID)
	}
	if b.MessageSeq != 2 {
		t.Errorf("MessageSeq = %d, want 2", b.MessageSeq)
	}
	got := loadBatch(t, db, b.ID)
	if got.ConversationID != conv.ID || got.MessageSeq != 2 || got.RequestedBy != "U-alice" || got.Status != confirm.BatchPending ||
		got.CardRef != "" || got.ClaimedBy != "" {
		t.Errorf("batch = %+v", got)
	}
	if got.Intro == nil || *got.Intro != intro {
		t.Errorf("Intro = %v, want %q exactly", got.Intro, intro)
	}
	if !got.ExpiresAt.Equal(expires) || got.ExpiresAt.Location() != time.UTC {
		t.Errorf("ExpiresAt = %v, want %v in UTC", got.ExpiresAt, expires)
	}
	if !got.CreatedAt.Equal(b.CreatedAt) {
		t.Errorf("CreatedAt = %v, want %v", got.CreatedAt, b.CreatedAt)
	}
	if len(got.Calls) != 3 {
		t.Fatalf("got %d calls", len(got.Calls))
	}
	for i, key := range []string{"call_a", "#1", "#2"} {
		if got.Calls[i].Key != key || got.Calls[i].Position != i {
			t.Errorf("call %d = %q at %d, want %q", i, got.Calls[i].Key, got.Calls[i].Position, key)
		}
	}
	a := got.Calls[0]
	if string(a.Args) != oddArgs {
		t.Errorf("args = %q, want exactly %q", a.Args, oddArgs)
	}
	if a.BatchID != b.ID || a.CallID != "call_a" || a.Tool != "deploy" || !a.Flagged || a.Summary != "deploy v2 to prod" ||
		a.Decision != confirm.DecisionPending || a.Run != confirm.RunNotStarted || a.DecidedAt != nil || a.DecidedBy != "" ||
		a.IdempotencyKey != b.ID+"/call_a" || !a.ExpiresAt.Equal(expires) {
		t.Errorf("call = %+v", a)
	}
	if got.Calls[1].Decision != confirm.DecisionAllowedByPolicy || got.Calls[1].Flagged {
		t.Errorf("policy call = %+v", got.Calls[1])
	}
	if c := got.Calls[2]; c.Decision != confirm.DecisionInvalid || c.DenyMessage != "bad args" || string(c.Args) != `{not json` {
		t.Errorf("invalid call = %+v", c)
	}
	msgs, err := db.Messages(ctx, conv.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(msgs) != 2 || msgs[1].Role != "assistant" || string(msgs[1].Body) != string(assistant.Body) {
		t.Errorf("messages = %+v", msgs)
	}
	evs, err := db.AuditEvents(ctx, confirm.AuditFilter{ConversationID: conv.ID})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"tool_call:#1", "tool_call:call_a", "tool_call:#2", "approval_request:"}
	if len(evs) != len(want) {
		t.Fatalf("audit = %v, want %v", auditKinds(t, db, conv.ID), want)
	}
	for i, e := range evs {
		if string(e.Kind)+":"+e.CallKey != want[i] || e.BatchID != b.ID || e.ConversationID != conv.ID {
			t.Errorf("audit %d = %+v, want %s", i, e, want[i])
		}
		if !json.Valid([]byte(e.Detail)) {
			t.Errorf("audit %d detail not JSON: %s", i, e.Detail)
		}
	}
	var detail struct {
		Args    json.RawMessage `json:"args"`
		Flagged bool            `json:"flagged"`
	}
	if err := json.Unmarshal([]byte(evs[1].Detail), &detail); err != nil || !detail.Flagged || !json.Valid(detail.Args) {
		t.Errorf("tool_call detail = %s (%v)", evs[1].Detail, err)
	}
	if evs[3].Actor != "U-alice" {
		t.Errorf("approval_request actor = %q, want U-alice", evs[3].Actor)
	}

	// A caller-chosen id is kept.
	b2 := &confirm.Batch{ID: "my-id", ConversationID: conv.ID, Calls: []confirm.Call{{Key: "x", Tool: "t", Args: json.RawMessage(`1`)}}}
	if err := db.CreateBatch(ctx, b2, confirm.Message{Role: "assistant", Body: json.RawMessage(`2`)}); err != nil {
		t.Fatal(err)
	}
	if b2.ID != "my-id" || b2.MessageSeq != 3 {
		t.Errorf("b2 = %+v", b2)
	}
	if c := loadBatch(t, db, "my-id").Calls[0]; !c.ExpiresAt.IsZero() {
		t.Errorf("zero expiry stored as %v", c.ExpiresAt)
	}
	// No intro given: none stored (a card reads the message), and an
	// empty one is kept as empty.
	if got := loadBatch(t, db, "my-id").Intro; got != nil {
		t.Errorf("Intro = %q, want nil", *got)
	}
	empty := ""
	b3 := &confirm.Batch{ConversationID: conv.ID, Intro: &empty, Calls: []confirm.Call{{Key: "x", Tool: "t", Args: json.RawMessage(`1`)}}}
	if err := db.CreateBatch(ctx, b3, confirm.Message{Role: "assistant", Body: json.RawMessage(`3`)}); err != nil {
		t.Fatal(err)
	}
	if got := loadBatch(t, db, b3.ID).Intro; got == nil || *got != "" {
		t.Errorf("empty Intro = %v, want a pointer to \"\"", got)
	}
}

func testCreateBatchRollsBack(t *testing.T, db *DB) {
	ctx := t.Context()
	conv := newConversation(t, db)
	b := &confirm.Batch{ConversationID: conv.ID, Calls: []confirm.Call{
		{Key: "a", Position: 0, Tool: "t", Args: json.RawMessage(`1`)},
		{Key: "b", Position: 0, Tool: "t", Args: json.RawMessage(`2`)}, // duplicate position
	}}
	if err := db.CreateBatch(ctx, b, confirm.Message{Role: "assistant", Body: json.RawMessage(`{}`)}); err == nil {
		t.Fatal("CreateBatch with duplicate positions succeeded")
	}
	if b.ID != "" || b.MessageSeq != 0 {
		t.Errorf("failed CreateBatch changed the batch: %+v", b)
	}
	if msgs, _ := db.Messages(ctx, conv.ID); len(msgs) != 0 {
		t.Errorf("failed CreateBatch left %d messages", len(msgs))
	}
	if evs, _ := db.AuditEvents(ctx, confirm.AuditFilter{ConversationID: conv.ID}); len(evs) != 0 {
		t.Errorf("failed CreateBatch left %d audit events", len(evs))
	}
	if err := db.CreateBatch(ctx, &confirm.Batch{ConversationID: conv.ID}, confirm.Message{}); err == nil {
		t.Error("CreateBatch without calls succeeded")
	}
	bad := &confirm.Batch{ConversationID: 987654, Calls: []confirm.Call{{Key: "a", Tool: "t", Args: json.RawMessage(`1`)}}}
	if err := db.CreateBatch(ctx, bad, confirm.Message{Role: "assistant"}); !errors.Is(err, confirm.ErrNotFound) {
		t.Errorf("CreateBatch(missing conversation) error = %v, want ErrNotFound", err)
	}
}

func testDecideWinsOnce(t *testing.T, db *DB) {
	ctx := t.Context()
	b := newBatch(t, db, later(), confirm.DecisionPending, confirm.DecisionPending)
	res := decide(t, db, confirm.Decide{BatchID: b.ID, Key: "k0", Status: confirm.DecisionAllowed, By: "U-alice"})
	if !res.Won || res.BatchDecided {
		t.Fatalf("first Decide = %+v, want won, batch not decided", res)
	}
	res = decide(t, db, confirm.Decide{BatchID: b.ID, Key: "k0", Status: confirm.DecisionDenied, By: "U-bob", Message: "no"})
	if res.Won || res.BatchDecided {
		t.Fatalf("second Decide = %+v, want lost", res)
	}
	c := callByKey(t, loadBatch(t, db, b.ID), "k0")
	if c.Decision != confirm.DecisionAllowed || c.DecidedBy != "U-alice" || c.DenyMessage != "" || c.DecidedAt == nil {
		t.Fatalf("call after losing decision = %+v", c)
	}
	if _, err := db.Decide(ctx, confirm.Decide{BatchID: "nope", Key: "k0", Status: confirm.DecisionAllowed, Now: time.Now()}); !errors.Is(err, confirm.ErrNotFound) {
		t.Errorf("Decide(missing batch) error = %v, want ErrNotFound", err)
	}
	if _, err := db.Decide(ctx, confirm.Decide{BatchID: b.ID, Key: "nope", Status: confirm.DecisionAllowed, Now: time.Now()}); !errors.Is(err, confirm.ErrNotFound) {
		t.Errorf("Decide(missing call) error = %v, want ErrNotFound", err)
	}
	if _, err := db.Decide(ctx, confirm.Decide{BatchID: b.ID, Key: "k1", Status: confirm.DecisionPending, Now: time.Now()}); err == nil {
		t.Error("Decide with status pending succeeded")
	}
	kinds := auditKinds(t, db, b.ConversationID)
	if n := strings.Count(strings.Join(kinds, " "), "decision:k0"); n != 1 {
		t.Errorf("audit has %d decision events for k0, want 1: %v", n, kinds)
	}
	// A denial with a message.
	res = decide(t, db, confirm.Decide{BatchID: b.ID, Key: "k1", Status: confirm.DecisionDenied, By: "U-bob", Message: "not now"})
	if !res.Won || !res.BatchDecided {
		t.Fatalf("deciding k1 = %+v", res)
	}
	c = callByKey(t, loadBatch(t, db, b.ID), "k1")
	if c.Decision != confirm.DecisionDenied || c.DenyMessage != "not now" || c.DecidedBy != "U-bob" {
		t.Fatalf("denied call = %+v", c)
	}
	// Decided batch: any further decision loses, missing call still not found.
	if res := decide(t, db, confirm.Decide{BatchID: b.ID, Key: "k1", Status: confirm.DecisionAllowed, By: "U-carol"}); res.Won {
		t.Fatal("decision on a decided batch won")
	}
	if _, err := db.Decide(ctx, confirm.Decide{BatchID: b.ID, Key: "nope", Status: confirm.DecisionAllowed, Now: time.Now()}); !errors.Is(err, confirm.ErrNotFound) {
		t.Errorf("Decide(missing call of decided batch) error = %v, want ErrNotFound", err)
	}
}

func testDecideAfterExpiry(t *testing.T, db *DB) {
	expires := time.Now().Add(time.Minute).Truncate(time.Millisecond)
	b := newBatch(t, db, expires, confirm.DecisionPending, confirm.DecisionPending)
	for _, now := range []time.Time{expires, expires.Add(time.Millisecond), expires.Add(time.Hour)} {
		if res := decide(t, db, confirm.Decide{BatchID: b.ID, Key: "k0", Status: confirm.DecisionAllowed, By: "U", Now: now}); res.Won {
			t.Fatalf("Decide at %v (expiry %v) won", now, expires)
		}
	}
	got := loadBatch(t, db, b.ID)
	if c := callByKey(t, got, "k0"); c.Decision != confirm.DecisionPending || c.DecidedBy != "" {
		t.Fatalf("expired call changed: %+v", c)
	}
	if res := decide(t, db, confirm.Decide{BatchID: b.ID, Key: "k1", Status: confirm.DecisionAllowed, By: "U", Now: expires.Add(-time.Millisecond)}); !res.Won {
		t.Fatal("Decide just before expiry lost")
	}
	if got := loadBatch(t, db, b.ID); got.Status != confirm.BatchPending {
		t.Fatalf("batch with an expired pending call is %s", got.Status)
	}
}

func testLastDecisionFlipsBatch(t *testing.T, db *DB) {
	b := newBatch(t, db, later(), confirm.DecisionPending, confirm.DecisionAllowedByPolicy, confirm.DecisionPending, confirm.DecisionPending)
	for i, key := range []string{"k3", "k0", "k2"} {
		res := decide(t, db, confirm.Decide{BatchID: b.ID, Key: key, Status: confirm.DecisionAllowed, By: "U"})
		last := i == 2
		if !res.Won || res.BatchDecided != last {
			t.Fatalf("Decide(%s) = %+v, want won, BatchDecided=%v", key, res, last)
		}
		want := confirm.BatchPending
		if last {
			want = confirm.BatchDecided
		}
		if got := loadBatch(t, db, b.ID).Status; got != want {
			t.Fatalf("after deciding %s batch is %s, want %s", key, got, want)
		}
	}
}

func testResolvePendingExpiry(t *testing.T, db *DB) {
	ctx := t.Context()
	expires := time.Now().Add(time.Minute)
	b := newBatch(t, db, expires, confirm.DecisionAllowedByPolicy, confirm.DecisionPending, confirm.DecisionPending)
	decide(t, db, confirm.Decide{BatchID: b.ID, Key: "k2", Status: confirm.DecisionAllowed, By: "U-alice"})

	if ids, err := db.ExpiredBatches(ctx, expires.Add(-time.Second)); err != nil || len(ids) != 0 {
		t.Fatalf("ExpiredBatches before expiry = %v, %v", ids, err)
	}
	after := expires.Add(time.Second)
	ids, err := db.ExpiredBatches(ctx, after)
	if err != nil || len(ids) != 1 || ids[0] != b.ID {
		t.Fatalf("ExpiredBatches after expiry = %v, %v; want [%s]", ids, err, b.ID)
	}
	n, err := db.ResolvePending(ctx, b.ID, confirm.DecisionExpired, "airlock", confirm.ExpiredMessage, false, after)
	if err != nil || n != 1 {
		t.Fatalf("ResolvePending = %d, %v; want 1", n, err)
	}
	got := loadBatch(t, db, b.ID)
	if got.Status != confirm.BatchDecided {
		t.Errorf("batch is %s, want decided", got.Status)
	}
	if c := callByKey(t, got, "k1"); c.Decision != confirm.DecisionExpired || c.DenyMessage != confirm.ExpiredMessage || c.DecidedBy != "airlock" {
		t.Errorf("expired call = %+v", c)
	}
	if c := callByKey(t, got, "k2"); c.Decision != confirm.DecisionAllowed || c.DecidedBy != "U-alice" {
		t.Errorf("allowed call changed by expiry: %+v", c)
	}
	if c := callByKey(t, got, "k0"); c.Decision != confirm.DecisionAllowedByPolicy {
		t.Errorf("policy call changed by expiry: %+v", c)
	}
	if n, err := db.ResolvePending(ctx, b.ID, confirm.DecisionExpired, "airlock", confirm.ExpiredMessage, false, after); err != nil || n != 0 {
		t.Errorf("second ResolvePending = %d, %v; want 0", n, err)
	}
	if ids, err := db.ExpiredBatches(ctx, after.Add(time.Hour)); err != nil || len(ids) != 0 {
		t.Errorf("ExpiredBatches after resolving = %v, %v", ids, err)
	}
	if n, err := db.ResolvePending(ctx, "missing", confirm.DecisionExpired, "airlock", "", false, after); err != nil || n != 0 {
		t.Errorf("ResolvePending(missing) = %d, %v; want 0, nil", n, err)
	}
	kinds := auditKinds(t, db, b.ConversationID)
	if last := kinds[len(kinds)-1]; last != "decision:k1" {
		t.Errorf("last audit event %q, want decision:k1 (all: %v)", last, kinds)
	}
}

func testResolvePendingAbandon(t *testing.T, db *DB) {
	ctx := t.Context()
	b := newBatch(t, db, later(), confirm.DecisionAllowedByPolicy, confirm.DecisionPending, confirm.DecisionPending, confirm.DecisionInvalid)
	decide(t, db, confirm.Decide{BatchID: b.ID, Key: "k2", Status: confirm.DecisionAllowed, By: "U-alice"})
	now := time.Now()
	n, err := db.ResolvePending(ctx, b.ID, confirm.DecisionDenied, "U-author", confirm.MovedOnMessage, true, now)
	if err != nil || n != 3 {
		t.Fatalf("ResolvePending(abandon) = %d, %v; want 3", n, err)
	}
	got := loadBatch(t, db, b.ID)
	if got.Status != confirm.BatchDecided {
		t.Errorf("batch is %s, want decided", got.Status)
	}
	for _, key := range []string{"k0", "k1", "k2"} {
		c := callByKey(t, got, key)
		if c.Decision != confirm.DecisionDenied || c.DenyMessage != confirm.MovedOnMessage || c.DecidedBy != "U-author" || c.Run != confirm.RunNotStarted {
			t.Errorf("abandoned call %s = %+v", key, c)
		}
	}
	if c := callByKey(t, got, "k3"); c.Decision != confirm.DecisionInvalid {
		t.Errorf("invalid call changed: %+v", c)
	}
	kinds := auditKinds(t, db, b.ConversationID)
	tail := strings.Join(kinds[len(kinds)-3:], " ")
	if tail != "decision:k0 decision:k1 decision:k2" {
		t.Errorf("audit tail %q, want a decision per changed call in position order", tail)
	}
	// Nothing of an abandoned batch may start.
	if ok, err := db.ClaimBatch(ctx, b.ID, "w"); err != nil || !ok {
		t.Fatalf("ClaimBatch = %v, %v", ok, err)
	}
	for _, key := range []string{"k0", "k1", "k2", "k3"} {
		if ok, err := db.StartRun(ctx, b.ID, key); err != nil || ok {
			t.Errorf("StartRun(%s) of abandoned batch = %v, %v", key, ok, err)
		}
	}
}

// FinishRunAndComplete writes the last run's outcome, its tool_result
// event, the results message and the batch's completion together, or
// nothing.
func testFinishRunAndComplete(t *testing.T, db *DB) {
	ctx := t.Context()
	b := newBatch(t, db, later(), confirm.DecisionPending)
	results := confirm.Message{Role: "tool", Body: json.RawMessage(`[{"id":"call_0","out":"done"}]`)}
	if ok, err := db.FinishRunAndComplete(ctx, b.ID, "k0", confirm.RunSucceeded, "done", results); err != nil || ok {
		t.Fatalf("on a pending batch = %v, %v", ok, err)
	}
	decide(t, db, confirm.Decide{BatchID: b.ID, Key: "k0", Status: confirm.DecisionAllowed, By: "U"})
	if ok, err := db.FinishRunAndComplete(ctx, b.ID, "k0", confirm.RunSucceeded, "done", results); err != nil || ok {
		t.Fatalf("on a batch not running = %v, %v", ok, err)
	}
	if ok, err := db.ClaimBatch(ctx, b.ID, "w1"); err != nil || !ok {
		t.Fatalf("ClaimBatch = %v, %v", ok, err)
	}
	// The run was never started: nothing is written, the batch still runs.
	if _, err := db.FinishRunAndComplete(ctx, b.ID, "k0", confirm.RunSucceeded, "done", results); !errors.Is(err, ErrNotRunning) {
		t.Fatalf("a run not running: %v", err)
	}
	if got := loadBatch(t, db, b.ID); got.Status != confirm.BatchRunning || got.Calls[0].Run != confirm.RunNotStarted {
		t.Fatalf("after a refused finish: batch %s, run %s", got.Status, got.Calls[0].Run)
	}
	if _, err := db.FinishRunAndComplete(ctx, b.ID, "k0", confirm.RunRunning, "x", results); err == nil {
		t.Fatal("finishing to running succeeded")
	}
	if ok, err := db.StartRun(ctx, b.ID, "k0"); err != nil || !ok {
		t.Fatalf("StartRun = %v, %v", ok, err)
	}
	if ok, err := db.FinishRunAndComplete(ctx, b.ID, "k0", confirm.RunSucceeded, "done", results); err != nil || !ok {
		t.Fatalf("FinishRunAndComplete = %v, %v", ok, err)
	}
	got := loadBatch(t, db, b.ID)
	if got.Status != confirm.BatchDone || got.Calls[0].Run != confirm.RunSucceeded || got.Calls[0].Result != "done" {
		t.Fatalf("after: batch %s, call %+v", got.Status, got.Calls[0])
	}
	msgs, err := db.Messages(ctx, b.ConversationID)
	if err != nil || len(msgs) != 2 || string(msgs[1].Body) != string(results.Body) {
		t.Fatalf("messages %+v, %v", msgs, err)
	}
	evs, err := db.AuditEvents(ctx, confirm.AuditFilter{ConversationID: b.ConversationID})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range evs {
		if e.Kind == confirm.AuditToolResult && e.CallKey == "k0" {
			n++
			if e.Tool != b.Calls[0].Tool || e.BatchID != b.ID || e.ConversationID != b.ConversationID || !strings.Contains(e.Detail, `"done"`) {
				t.Fatalf("tool_result event %+v", e)
			}
		}
	}
	if n != 1 {
		t.Fatalf("%d tool_result events", n)
	}
	if msgs[1].Seq != msgs[0].Seq+1 || msgs[1].ConversationID != b.ConversationID {
		t.Fatalf("results message %+v after %+v", msgs[1], msgs[0])
	}
	if ok, err := db.FinishRunAndComplete(ctx, b.ID, "k0", confirm.RunSucceeded, "again", results); err == nil && ok {
		t.Fatal("a second finish and complete succeeded")
	}
}

func testClaimRunComplete(t *testing.T, db *DB) {
	ctx := t.Context()
	b := newBatch(t, db, later(), confirm.DecisionAllowedByPolicy, confirm.DecisionPending, confirm.DecisionPending)
	if ok, err := db.ClaimBatch(ctx, b.ID, "w1"); err != nil || ok {
		t.Fatalf("ClaimBatch of pending batch = %v, %v", ok, err)
	}
	decide(t, db, confirm.Decide{BatchID: b.ID, Key: "k1", Status: confirm.DecisionAllowed, By: "U"})
	decide(t, db, confirm.Decide{BatchID: b.ID, Key: "k2", Status: confirm.DecisionDenied, By: "U"})
	if ids, err := db.BatchesIn(ctx, confirm.BatchDecided); err != nil || len(ids) != 1 || ids[0] != b.ID {
		t.Fatalf("BatchesIn(decided) = %v, %v", ids, err)
	}
	if ok, err := db.ClaimBatch(ctx, b.ID, "w1"); err != nil || !ok {
		t.Fatalf("ClaimBatch = %v, %v", ok, err)
	}
	if ok, err := db.ClaimBatch(ctx, b.ID, "w2"); err != nil || ok {
		t.Fatalf("second ClaimBatch = %v, %v", ok, err)
	}
	if _, err := db.ClaimBatch(ctx, "missing", "w"); !errors.Is(err, confirm.ErrNotFound) {
		t.Errorf("ClaimBatch(missing) error = %v, want ErrNotFound", err)
	}
	got := loadBatch(t, db, b.ID)
	if got.Status != confirm.BatchRunning || got.ClaimedBy != "w1" {
		t.Fatalf("claimed batch = %s by %q", got.Status, got.ClaimedBy)
	}
	if ok, err := db.StartRun(ctx, b.ID, "k2"); err != nil || ok {
		t.Fatalf("StartRun(denied) = %v, %v", ok, err)
	}
	for _, key := range []string{"k0", "k1"} {
		if ok, err := db.StartRun(ctx, b.ID, key); err != nil || !ok {
			t.Fatalf("StartRun(%s) = %v, %v", key, ok, err)
		}
		if ok, err := db.StartRun(ctx, b.ID, key); err != nil || ok {
			t.Fatalf("second StartRun(%s) = %v, %v", key, ok, err)
		}
	}
	if _, err := db.StartRun(ctx, b.ID, "missing"); !errors.Is(err, confirm.ErrNotFound) {
		t.Errorf("StartRun(missing) error = %v, want ErrNotFound", err)
	}
	if err := db.FinishRun(ctx, b.ID, "k0", confirm.RunSucceeded, "deployed"); err != nil {
		t.Fatal(err)
	}
	long := strings.Repeat("é", 3000)
	if err := db.FinishRun(ctx, b.ID, "k1", confirm.RunFailed, long); err != nil {
		t.Fatal(err)
	}
	if err := db.FinishRun(ctx, b.ID, "k0", confirm.RunFailed, "again"); !errors.Is(err, ErrNotRunning) {
		t.Errorf("second FinishRun error = %v, want ErrNotRunning", err)
	}
	if err := db.FinishRun(ctx, b.ID, "k2", confirm.RunSucceeded, "x"); !errors.Is(err, ErrNotRunning) {
		t.Errorf("FinishRun(not started) error = %v, want ErrNotRunning", err)
	}
	if err := db.FinishRun(ctx, b.ID, "missing", confirm.RunSucceeded, "x"); !errors.Is(err, confirm.ErrNotFound) {
		t.Errorf("FinishRun(missing) error = %v, want ErrNotFound", err)
	}
	if err := db.FinishRun(ctx, b.ID, "k0", confirm.RunRunning, "x"); err == nil {
		t.Error("FinishRun to running succeeded")
	}
	got = loadBatch(t, db, b.ID)
	if c := callByKey(t, got, "k0"); c.Run != confirm.RunSucceeded || c.Result != "deployed" {
		t.Errorf("k0 = %+v", c)
	}
	if c := callByKey(t, got, "k1"); c.Run != confirm.RunFailed || c.Result != long {
		t.Errorf("k1 run %s, result of %d bytes", c.Run, len(c.Result))
	}
	if c := callByKey(t, got, "k2"); c.Run != confirm.RunNotStarted {
		t.Errorf("k2 = %+v", c)
	}
	evs, err := db.AuditEvents(ctx, confirm.AuditFilter{ConversationID: b.ConversationID})
	if err != nil {
		t.Fatal(err)
	}
	var results []confirm.AuditEvent
	for _, e := range evs {
		if e.Kind == confirm.AuditToolResult {
			results = append(results, e)
		}
	}
	if len(results) != 2 || results[0].CallKey != "k0" || results[1].CallKey != "k1" || results[0].Tool != "deploy" {
		t.Fatalf("tool_result events = %+v", results)
	}
	var detail struct {
		Status string `json:"status"`
		Result string `json:"result"`
	}
	if err := json.Unmarshal([]byte(results[1].Detail), &detail); err != nil || detail.Status != "failed" || len(detail.Result) >= len(long) || !strings.HasPrefix(long, detail.Result) {
		t.Errorf("tool_result detail = %.80s... (%v)", results[1].Detail, err)
	}

	results0 := confirm.Message{Role: "tool", Body: json.RawMessage(`[{"id":"call_0","out":"deployed"}]`)}
	if ok, err := db.CompleteBatch(ctx, b.ID, results0); err != nil || !ok {
		t.Fatalf("CompleteBatch = %v, %v", ok, err)
	}
	if ok, err := db.CompleteBatch(ctx, b.ID, results0); err != nil || ok {
		t.Fatalf("second CompleteBatch = %v, %v", ok, err)
	}
	if _, err := db.CompleteBatch(ctx, "missing", results0); !errors.Is(err, confirm.ErrNotFound) {
		t.Errorf("CompleteBatch(missing) error = %v, want ErrNotFound", err)
	}
	if got := loadBatch(t, db, b.ID); got.Status != confirm.BatchDone {
		t.Errorf("batch is %s, want done", got.Status)
	}
	msgs, err := db.Messages(ctx, b.ConversationID)
	if err != nil {
		t.Fatal(err)
	}
	if len(msgs) != 2 || msgs[1].Seq != b.MessageSeq+1 || string(msgs[1].Body) != string(results0.Body) {
		t.Fatalf("messages after completion = %+v", msgs)
	}
	if err := db.ReleaseBatch(ctx, b.ID); err != nil {
		t.Fatal(err)
	}
	if got := loadBatch(t, db, b.ID); got.Status != confirm.BatchDone {
		t.Errorf("ReleaseBatch moved a done batch to %s", got.Status)
	}
}

func testRecoverRunning(t *testing.T, db *DB) {
	ctx := t.Context()
	var batches []*confirm.Batch
	for range 2 {
		b := newBatch(t, db, later(), confirm.DecisionAllowedByPolicy, confirm.DecisionPending)
		decide(t, db, confirm.Decide{BatchID: b.ID, Key: "k1", Status: confirm.DecisionAllowed, By: "U"})
		if ok, err := db.ClaimBatch(ctx, b.ID, "w-dead"); err != nil || !ok {
			t.Fatalf("ClaimBatch = %v, %v", ok, err)
		}
		for _, key := range []string{"k0", "k1"} {
			if ok, err := db.StartRun(ctx, b.ID, key); err != nil || !ok {
				t.Fatalf("StartRun = %v, %v", ok, err)
			}
		}
		batches = append(batches, b)
	}
	// One call finished before the crash.
	if err := db.FinishRun(ctx, batches[0].ID, "k0", confirm.RunSucceeded, "ok"); err != nil {
		t.Fatal(err)
	}
	ids, err := db.RecoverRunning(ctx, batches[0].ID, batches[1].ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(ids) != 2 || !((ids[0] == batches[0].ID && ids[1] == batches[1].ID) || (ids[0] == batches[1].ID && ids[1] == batches[0].ID)) {
		t.Fatalf("RecoverRunning = %v, want both batches once", ids)
	}
	for _, b := range batches {
		got := loadBatch(t, db, b.ID)
		for _, c := range got.Calls {
			if b == batches[0] && c.Key == "k0" {
				if c.Run != confirm.RunSucceeded {
					t.Errorf("finished call changed to %s", c.Run)
				}
				continue
			}
			if c.Run != confirm.RunUnknown || c.Result != confirm.UnknownOutcomeMessage {
				t.Errorf("recovered call %s/%s = %s %q", b.ID, c.Key, c.Run, c.Result)
			}
			if ok, err := db.StartRun(ctx, b.ID, c.Key); err != nil || ok {
				t.Errorf("StartRun of an unknown call = %v, %v", ok, err)
			}
		}
		if got.Status != confirm.BatchRunning {
			t.Errorf("batch status %s, want running until released", got.Status)
		}
		n := 0
		for _, k := range auditKinds(t, db, b.ConversationID) {
			if strings.HasPrefix(k, "tool_result:") {
				n++
			}
		}
		if want := 2; n != want {
			t.Errorf("batch %s has %d tool_result events, want %d", b.ID, n, want)
		}
	}
	if ids, err := db.RecoverRunning(ctx, batches[0].ID, batches[1].ID); err != nil || len(ids) != 0 {
		t.Fatalf("second RecoverRunning = %v, %v", ids, err)
	}
	running, err := db.BatchesIn(ctx, confirm.BatchRunning)
	if err != nil || len(running) != 2 {
		t.Fatalf("BatchesIn(running) = %v, %v", running, err)
	}
	for _, id := range running {
		if err := db.ReleaseBatch(ctx, id); err != nil {
			t.Fatal(err)
		}
		if got := loadBatch(t, db, id); got.Status != confirm.BatchDecided || got.ClaimedBy != "" {
			t.Errorf("released batch = %s by %q", got.Status, got.ClaimedBy)
		}
		if ok, err := db.ClaimBatch(ctx, id, "w-new"); err != nil || !ok {
			t.Errorf("reclaim = %v, %v", ok, err)
		}
		for _, key := range []string{"k0", "k1"} {
			if ok, err := db.StartRun(ctx, id, key); err != nil || ok {
				t.Errorf("StartRun after recovery = %v, %v", ok, err)
			}
		}
	}
	if err := db.ReleaseBatch(ctx, "missing"); !errors.Is(err, confirm.ErrNotFound) {
		t.Errorf("ReleaseBatch(missing) error = %v, want ErrNotFound", err)
	}
}

func testAuditEvents(t *testing.T, db *DB) {
	ctx := t.Context()
	conv := newConversation(t, db)
	other := newConversation(t, db)
	t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	events := []confirm.AuditEvent{
		{At: t0.Add(2 * time.Second), Kind: confirm.AuditRejectedClick, ConversationID: conv.ID, BatchID: "b1", CallKey: "k", Actor: "U-mallory", Detail: `{"reason":"not allowed"}`},
		{At: t0, Kind: confirm.AuditDecision, ConversationID: other.ID, Actor: "U"},
		{At: t0.Add(time.Second), Kind: confirm.AuditToolResult, ConversationID: conv.ID, Tool: "deploy", Actor: "airlock", Detail: `{}`},
		{Kind: confirm.AuditApprovalRequest, ConversationID: conv.ID}, // At now: before t0
	}
	before := time.Now().UTC()
	for _, e := range events {
		if err := db.Audit(ctx, e); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Audit(ctx, confirm.AuditEvent{}); err == nil {
		t.Error("Audit without kind succeeded")
	}
	all, err := db.AuditEvents(ctx, confirm.AuditFilter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 4 {
		t.Fatalf("got %d events, want 4", len(all))
	}
	for i, e := range all {
		if e.Kind != events[i].Kind || (i > 0 && e.ID <= all[i-1].ID) {
			t.Errorf("event %d = %+v, want kind %s in id order", i, e, events[i].Kind)
		}
	}
	if e := all[0]; !e.At.Equal(events[0].At) || e.BatchID != "b1" || e.CallKey != "k" || e.Actor != "U-mallory" || e.Detail != events[0].Detail {
		t.Errorf("event 0 = %+v", e)
	}
	if at := all[3].At; at.Before(before.Add(-time.Second)) || at.Location() != time.UTC {
		t.Errorf("zero At stored as %v, want now in UTC", at)
	}
	mine, err := db.AuditEvents(ctx, confirm.AuditFilter{ConversationID: conv.ID})
	if err != nil || len(mine) != 3 {
		t.Fatalf("filtered by conversation: %d events, %v", len(mine), err)
	}
	since, err := db.AuditEvents(ctx, confirm.AuditFilter{ConversationID: conv.ID, Since: t0.Add(time.Second)})
	if err != nil {
		t.Fatal(err)
	}
	var kinds []confirm.AuditKind
	for _, e := range since {
		kinds = append(kinds, e.Kind)
	}
	if fmt.Sprint(kinds) != fmt.Sprint([]confirm.AuditKind{confirm.AuditRejectedClick, confirm.AuditToolResult}) {
		t.Errorf("since filter kinds = %v", kinds)
	}
}

func testAuditAppendOnly(t *testing.T, db *DB) {
	ctx := t.Context()
	if err := db.Audit(ctx, confirm.AuditEvent{Kind: confirm.AuditDecision, Actor: "U"}); err != nil {
		t.Fatal(err)
	}
	if _, err := db.x.ExecContext(ctx, `UPDATE audit SET actor = 'someone else'`); err == nil {
		t.Error("UPDATE of audit succeeded")
	}
	if _, err := db.x.ExecContext(ctx, `DELETE FROM audit`); err == nil {
		t.Error("DELETE from audit succeeded")
	}
	evs, err := db.AuditEvents(ctx, confirm.AuditFilter{})
	if err != nil || len(evs) != 1 || evs[0].Actor != "U" {
		t.Fatalf("audit after refused changes = %+v, %v", evs, err)
	}
}

func testPendingBatch(t *testing.T, db *DB) {
	ctx := t.Context()
	conv := newConversation(t, db)
	if _, err := db.PendingBatch(ctx, conv.ID); !errors.Is(err, confirm.ErrNotFound) {
		t.Fatalf("PendingBatch(none) error = %v, want ErrNotFound", err)
	}
	if _, err := db.Batch(ctx, "missing"); !errors.Is(err, confirm.ErrNotFound) {
		t.Fatalf("Batch(missing) error = %v, want ErrNotFound", err)
	}
	mk := func(created time.Time) *confirm.Batch {
		b := &confirm.Batch{ConversationID: conv.ID, CreatedAt: created, ExpiresAt: later(), Calls: []confirm.Call{
			{Key: "k0", Tool: "t", Args: json.RawMessage(`{}`), Flagged: true},
		}}
		if err := db.CreateBatch(ctx, b, confirm.Message{Role: "assistant", Body: json.RawMessage(`{}`)}); err != nil {
			t.Fatal(err)
		}
		return b
	}
	old := mk(time.Now().Add(-time.Minute))
	newer := mk(time.Now())
	got, err := db.PendingBatch(ctx, conv.ID)
	if err != nil || got.ID != newer.ID || len(got.Calls) != 1 {
		t.Fatalf("PendingBatch = %+v, %v; want %s", got, err, newer.ID)
	}
	decide(t, db, confirm.Decide{BatchID: newer.ID, Key: "k0", Status: confirm.DecisionAllowed, By: "U"})
	if got, err := db.PendingBatch(ctx, conv.ID); err != nil || got.ID != old.ID {
		t.Fatalf("PendingBatch after deciding the newer = %v, %v; want %s", got, err, old.ID)
	}
	decide(t, db, confirm.Decide{BatchID: old.ID, Key: "k0", Status: confirm.DecisionDenied, By: "U"})
	if _, err := db.PendingBatch(ctx, conv.ID); !errors.Is(err, confirm.ErrNotFound) {
		t.Fatalf("PendingBatch after deciding all error = %v, want ErrNotFound", err)
	}
}

func testBatchesInOrder(t *testing.T, db *DB) {
	ctx := t.Context()
	conv := newConversation(t, db)
	base := time.Now().Add(-time.Hour)
	var want []string
	for _, offset := range []time.Duration{3, 1, 2} {
		b := &confirm.Batch{ConversationID: conv.ID, CreatedAt: base.Add(offset * time.Minute), Calls: []confirm.Call{
			{Key: "k0", Tool: "t", Args: json.RawMessage(`{}`)},
		}}
		if err := db.CreateBatch(ctx, b, confirm.Message{Role: "assistant", Body: json.RawMessage(`{}`)}); err != nil {
			t.Fatal(err)
		}
		want = append(want, b.ID)
	}
	want = []string{want[1], want[2], want[0]}
	got, err := db.BatchesIn(ctx, confirm.BatchPending)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("BatchesIn(pending) = %v, want oldest first %v", got, want)
	}
	if got, err := db.BatchesIn(ctx, confirm.BatchDone); err != nil || len(got) != 0 {
		t.Fatalf("BatchesIn(done) = %v, %v", got, err)
	}
}

func testSetCardRef(t *testing.T, db *DB) {
	ctx := t.Context()
	b := newBatch(t, db, later(), confirm.DecisionPending)
	if err := db.SetCardRef(ctx, b.ID, "C1/1700000000.000100"); err != nil {
		t.Fatal(err)
	}
	if got := loadBatch(t, db, b.ID); got.CardRef != "C1/1700000000.000100" {
		t.Fatalf("CardRef = %q", got.CardRef)
	}
	if err := db.SetCardRef(ctx, "missing", "x"); !errors.Is(err, confirm.ErrNotFound) {
		t.Fatalf("SetCardRef(missing) error = %v, want ErrNotFound", err)
	}
}

func testOpenBatches(t *testing.T, db *DB) {
	ctx := t.Context()
	conv := newConversation(t, db)
	mk := func(offset time.Duration) string {
		b := &confirm.Batch{ConversationID: conv.ID, CreatedAt: time.Now().Add(offset), Calls: []confirm.Call{
			{Key: "k0", Tool: "t", Args: json.RawMessage(`{}`)},
		}}
		if err := db.CreateBatch(ctx, b, confirm.Message{Role: "assistant", Body: json.RawMessage(`{}`)}); err != nil {
			t.Fatal(err)
		}
		return b.ID
	}
	running, decided, done, pending := mk(-4*time.Minute), mk(-3*time.Minute), mk(-2*time.Minute), mk(-time.Minute)
	for _, id := range []string{running, decided, done} {
		decide(t, db, confirm.Decide{BatchID: id, Key: "k0", Status: confirm.DecisionAllowed, By: "U"})
	}
	for _, id := range []string{running, done} {
		if ok, err := db.ClaimBatch(ctx, id, "w"); err != nil || !ok {
			t.Fatalf("ClaimBatch = %v, %v", ok, err)
		}
	}
	if ok, err := db.CompleteBatch(ctx, done, confirm.Message{Role: "tool", Body: json.RawMessage(`[]`)}); err != nil || !ok {
		t.Fatalf("CompleteBatch = %v, %v", ok, err)
	}
	newBatch(t, db, later(), confirm.DecisionPending) // another conversation
	got, err := db.OpenBatches(ctx, conv.ID)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(got, ",") != running+","+decided {
		t.Fatalf("OpenBatches = %v, want [running decided] = [%s %s] (pending %s, done %s excluded)", got, running, decided, pending, done)
	}
}

func testMigrateIdempotent(t *testing.T, db *DB) {
	ctx := t.Context()
	b := newBatch(t, db, later(), confirm.DecisionPending)
	if err := db.Migrate(ctx); err != nil {
		t.Fatalf("second Migrate: %v", err)
	}
	var wg sync.WaitGroup
	errs := make([]error, 5)
	for i := range errs {
		wg.Go(func() { errs[i] = db.Migrate(ctx) })
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatalf("concurrent Migrate: %v", err)
		}
	}
	ms, err := db.migrations()
	if err != nil {
		t.Fatal(err)
	}
	var n int
	if err := db.x.GetContext(ctx, &n, `SELECT COUNT(*) FROM schema_migrations`); err != nil {
		t.Fatal(err)
	}
	if n != len(ms) || n == 0 {
		t.Fatalf("schema_migrations has %d rows, want %d", n, len(ms))
	}
	if got := loadBatch(t, db, b.ID); len(got.Calls) != 1 {
		t.Fatal("data lost across Migrate")
	}
	if err := db.Ping(ctx); err != nil {
		t.Fatal(err)
	}
}

func testTimeRoundTrip(t *testing.T, db *DB) {
	ctx := t.Context()
	conv := newConversation(t, db)
	if d := time.Since(conv.CreatedAt); d < 0 || d > time.Minute || conv.CreatedAt.Location() != time.UTC {
		t.Errorf("conversation CreatedAt = %v", conv.CreatedAt)
	}
	at := time.Date(2029, 12, 31, 23, 59, 59, 987654321, time.FixedZone("EST", -5*3600))
	if err := db.AppendMessages(ctx, conv.ID, confirm.Message{Role: "user", Body: json.RawMessage(`1`), CreatedAt: at}); err != nil {
		t.Fatal(err)
	}
	msgs, err := db.Messages(ctx, conv.ID)
	if err != nil {
		t.Fatal(err)
	}
	got := msgs[0].CreatedAt
	if want := at.Truncate(time.Microsecond); !got.Equal(want) || got.Location() != time.UTC {
		t.Fatalf("CreatedAt round trip = %v, want %v (to the microsecond) in UTC", got, want)
	}
	// Expiry comparisons use time order, not text order, across zones.
	expires := time.Date(2030, 1, 1, 0, 0, 0, 0, time.FixedZone("E", 9*3600)) // 2029-12-31T15:00Z
	b := newBatch(t, db, expires, confirm.DecisionPending)
	if ids, _ := db.ExpiredBatches(ctx, time.Date(2029, 12, 31, 14, 0, 0, 0, time.UTC)); len(ids) != 0 {
		t.Errorf("expired an hour early: %v", ids)
	}
	if ids, _ := db.ExpiredBatches(ctx, time.Date(2029, 12, 31, 10, 0, 1, 0, time.FixedZone("W", -5*3600))); len(ids) != 1 || ids[0] != b.ID {
		t.Errorf("not expired a second after expiry: %v", ids)
	}
}

// The races below start every goroutine at once on a barrier.

func testRaceDecideSameCall(t *testing.T, db *DB) {
	b := newBatch(t, db, later(), confirm.DecisionPending, confirm.DecisionPending)
	const n = 50
	var wg sync.WaitGroup
	start := make(chan struct{})
	results := make([]confirm.DecideResult, n)
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() {
			<-start
			results[i], errs[i] = db.Decide(t.Context(), confirm.Decide{
				BatchID: b.ID, Key: "k0", Status: confirm.DecisionAllowed, By: fmt.Sprintf("U%d", i), Now: time.Now(),
			})
		})
	}
	close(start)
	wg.Wait()
	won, winner := 0, ""
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("Decide %d: %v", i, errs[i])
		}
		if results[i].Won {
			won++
			winner = fmt.Sprintf("U%d", i)
		}
		if results[i].BatchDecided {
			t.Errorf("Decide %d decided the batch with k1 pending", i)
		}
	}
	if won != 1 {
		t.Fatalf("%d of %d concurrent decisions won, want exactly 1", won, n)
	}
	if c := callByKey(t, loadBatch(t, db, b.ID), "k0"); c.DecidedBy != winner {
		t.Errorf("decided_by = %q, want the winner %q", c.DecidedBy, winner)
	}
	kinds := auditKinds(t, db, b.ConversationID)
	if got := strings.Count(strings.Join(kinds, " "), "decision:k0"); got != 1 {
		t.Errorf("%d decision events, want 1", got)
	}
}

func testRaceDecideAllCalls(t *testing.T, db *DB) {
	const n = 12
	decisions := make([]confirm.DecisionStatus, n)
	for i := range decisions {
		decisions[i] = confirm.DecisionPending
	}
	for round := range 3 {
		b := newBatch(t, db, later(), decisions...)
		var wg sync.WaitGroup
		start := make(chan struct{})
		results := make([]confirm.DecideResult, n)
		errs := make([]error, n)
		for i := range n {
			wg.Go(func() {
				<-start
				results[i], errs[i] = db.Decide(t.Context(), confirm.Decide{
					BatchID: b.ID, Key: fmt.Sprintf("k%d", i), Status: confirm.DecisionAllowed, By: "U", Now: time.Now(),
				})
			})
		}
		close(start)
		wg.Wait()
		decided := 0
		for i := range n {
			if errs[i] != nil {
				t.Fatalf("round %d Decide %d: %v", round, i, errs[i])
			}
			if !results[i].Won {
				t.Errorf("round %d: decision on its own call %d lost", round, i)
			}
			if results[i].BatchDecided {
				decided++
			}
		}
		if decided != 1 {
			t.Fatalf("round %d: %d results had BatchDecided, want exactly 1", round, decided)
		}
		if got := loadBatch(t, db, b.ID).Status; got != confirm.BatchDecided {
			t.Fatalf("round %d: batch is %s", round, got)
		}
	}
}

func testRaceClaim(t *testing.T, db *DB) {
	b := newBatch(t, db, later(), confirm.DecisionPending)
	decide(t, db, confirm.Decide{BatchID: b.ID, Key: "k0", Status: confirm.DecisionAllowed, By: "U"})
	const n = 20
	var wg sync.WaitGroup
	start := make(chan struct{})
	wins := make([]bool, n)
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() {
			<-start
			wins[i], errs[i] = db.ClaimBatch(t.Context(), b.ID, fmt.Sprintf("w%d", i))
		})
	}
	close(start)
	wg.Wait()
	won, winner := 0, ""
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("ClaimBatch %d: %v", i, errs[i])
		}
		if wins[i] {
			won++
			winner = fmt.Sprintf("w%d", i)
		}
	}
	if won != 1 {
		t.Fatalf("%d of %d concurrent claims won, want exactly 1", won, n)
	}
	if got := loadBatch(t, db, b.ID); got.ClaimedBy != winner || got.Status != confirm.BatchRunning {
		t.Fatalf("batch = %s claimed by %q, want running by %q", got.Status, got.ClaimedBy, winner)
	}
}

// ClaimBatchStarting claims a decided batch and starts one run in one
// write: the run starts only with the claim, a denied call's run never
// starts, and a lost claim changes nothing.
func testClaimBatchStarting(t *testing.T, db *DB) {
	ctx := t.Context()
	b := newBatch(t, db, later(), confirm.DecisionPending, confirm.DecisionPending)
	if won, started, err := db.ClaimBatchStarting(ctx, b.ID, "w1", "k0"); err != nil || won || started {
		t.Fatalf("ClaimBatchStarting of a pending batch = %v, %v, %v", won, started, err)
	}
	if c := callByKey(t, loadBatch(t, db, b.ID), "k0"); c.Run != confirm.RunNotStarted {
		t.Fatalf("a lost claim started k0: %s", c.Run)
	}
	decide(t, db, confirm.Decide{BatchID: b.ID, Key: "k0", Status: confirm.DecisionDenied, By: "U"})
	decide(t, db, confirm.Decide{BatchID: b.ID, Key: "k1", Status: confirm.DecisionAllowed, By: "U"})
	// The denied call: the claim is won, its run does not start.
	if won, started, err := db.ClaimBatchStarting(ctx, b.ID, "w1", "k0"); err != nil || !won || started {
		t.Fatalf("ClaimBatchStarting(denied k0) = %v, %v, %v; want won, not started", won, started, err)
	}
	got := loadBatch(t, db, b.ID)
	if got.Status != confirm.BatchRunning || got.ClaimedBy != "w1" {
		t.Fatalf("batch = %s by %q", got.Status, got.ClaimedBy)
	}
	if c := callByKey(t, got, "k0"); c.Run != confirm.RunNotStarted {
		t.Fatalf("denied k0 run = %s", c.Run)
	}
	// A second claim loses and starts nothing.
	if won, started, err := db.ClaimBatchStarting(ctx, b.ID, "w2", "k1"); err != nil || won || started {
		t.Fatalf("second ClaimBatchStarting = %v, %v, %v", won, started, err)
	}
	if c := callByKey(t, loadBatch(t, db, b.ID), "k1"); c.Run != confirm.RunNotStarted {
		t.Fatalf("a lost claim started k1: %s", c.Run)
	}
	if _, _, err := db.ClaimBatchStarting(ctx, "missing", "w", "k0"); !errors.Is(err, confirm.ErrNotFound) {
		t.Errorf("ClaimBatchStarting(missing) error = %v, want ErrNotFound", err)
	}

	// An allowed call: claimed and started at once; StartRun then loses.
	b2 := newBatch(t, db, later(), confirm.DecisionPending)
	decide(t, db, confirm.Decide{BatchID: b2.ID, Key: "k0", Status: confirm.DecisionAllowed, By: "U"})
	if won, started, err := db.ClaimBatchStarting(ctx, b2.ID, "w1", "k0"); err != nil || !won || !started {
		t.Fatalf("ClaimBatchStarting(allowed) = %v, %v, %v", won, started, err)
	}
	got = loadBatch(t, db, b2.ID)
	if c := callByKey(t, got, "k0"); got.Status != confirm.BatchRunning || c.Run != confirm.RunRunning {
		t.Fatalf("batch %s, k0 run %s; want running, running", got.Status, c.Run)
	}
	if ok, err := db.StartRun(ctx, b2.ID, "k0"); err != nil || ok {
		t.Fatalf("StartRun after ClaimBatchStarting = %v, %v", ok, err)
	}
	// A crash now leaves the run unknown: it is never run again.
	if _, err := db.RecoverRunning(ctx, b2.ID); err != nil {
		t.Fatal(err)
	}
	if c := callByKey(t, loadBatch(t, db, b2.ID), "k0"); c.Run != confirm.RunUnknown {
		t.Fatalf("recovered k0 run = %s, want unknown", c.Run)
	}
}

// Of many runners claiming one batch and starting its run at once,
// exactly one wins, and the run is started once.
func testRaceClaimStarting(t *testing.T, db *DB) {
	b := newBatch(t, db, later(), confirm.DecisionPending)
	decide(t, db, confirm.Decide{BatchID: b.ID, Key: "k0", Status: confirm.DecisionAllowed, By: "U"})
	const n = 20
	var wg sync.WaitGroup
	start := make(chan struct{})
	wins, starts := make([]bool, n), make([]bool, n)
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() {
			<-start
			wins[i], starts[i], errs[i] = db.ClaimBatchStarting(t.Context(), b.ID, fmt.Sprintf("w%d", i), "k0")
		})
	}
	close(start)
	wg.Wait()
	won, started := 0, 0
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("ClaimBatchStarting %d: %v", i, errs[i])
		}
		if wins[i] {
			won++
		}
		if starts[i] {
			started++
			if !wins[i] {
				t.Fatalf("runner %d started the run without the claim", i)
			}
		}
	}
	if won != 1 || started != 1 {
		t.Fatalf("%d claims won and %d runs started of %d runners, want 1 and 1", won, started, n)
	}
}

func runnable(tools ...string) func(string) bool {
	return func(tool string) bool { return slices.Contains(tools, tool) }
}

// A decision with a claim that decides the batch takes it straight to
// running for the claimer and starts its first run to be; one that does
// not decide it claims nothing.
func testDecideClaiming(t *testing.T, db *DB) {
	ctx := t.Context()
	claim := &confirm.Claim{Worker: "w1", Runnable: runnable("deploy")}
	b := newBatch(t, db, later(), confirm.DecisionPending, confirm.DecisionPending, confirm.DecisionPending)
	// Not the last pending call: decided, nothing claimed.
	if res := decide(t, db, confirm.Decide{BatchID: b.ID, Key: "k0", Status: confirm.DecisionDenied, By: "U", Claim: claim}); !res.Won || res.BatchDecided || res.Claimed || res.Started != "" {
		t.Fatalf("deny of k0 = %+v, want won and nothing claimed", res)
	}
	decide(t, db, confirm.Decide{BatchID: b.ID, Key: "k1", Status: confirm.DecisionAllowed, By: "U"})
	if got := loadBatch(t, db, b.ID); got.Status != confirm.BatchPending || got.ClaimedBy != "" {
		t.Fatalf("batch %s claimed by %q before its last decision", got.Status, got.ClaimedBy)
	}
	res := decide(t, db, confirm.Decide{BatchID: b.ID, Key: "k2", Status: confirm.DecisionAllowed, By: "U", Claim: claim})
	if !res.Won || !res.Decided || !res.BatchDecided || !res.Claimed || res.Started != "k1" {
		t.Fatalf("last decision = %+v, want the batch claimed and k1 (the first allowed) started", res)
	}
	got := loadBatch(t, db, b.ID)
	if got.Status != confirm.BatchRunning || got.ClaimedBy != "w1" {
		t.Fatalf("batch %s claimed by %q, want running by w1", got.Status, got.ClaimedBy)
	}
	if k1, k2 := callByKey(t, got, "k1"), callByKey(t, got, "k2"); k1.Run != confirm.RunRunning || k2.Run != confirm.RunNotStarted {
		t.Fatalf("runs k1 %s, k2 %s; want running, not_started", k1.Run, k2.Run)
	}
	// The returned batch is as the runner expects it: running, claimed, its
	// calls as before the run started.
	if res.Batch == nil || res.Batch.Status != confirm.BatchRunning || res.Batch.ClaimedBy != "w1" || callByKey(t, res.Batch, "k1").Run != confirm.RunNotStarted {
		t.Fatalf("returned batch %+v", res.Batch)
	}
	// Nobody else can take it, nor start its run again.
	if won, err := db.ClaimBatch(ctx, b.ID, "w2"); err != nil || won {
		t.Fatalf("ClaimBatch of a batch claimed by its decision = %v, %v", won, err)
	}
	if ok, err := db.StartRun(ctx, b.ID, "k1"); err != nil || ok {
		t.Fatalf("StartRun of the run the claim started = %v, %v", ok, err)
	}
	if kinds := strings.Join(auditKinds(t, db, b.ConversationID), " "); strings.Count(kinds, "decision:") != 3 {
		t.Fatalf("audit %s, want three decisions", kinds)
	}

	// An allowed call whose tool the runner lacks: claimed, nothing started
	// (the runner refuses the whole batch).
	b2 := newBatch(t, db, later(), confirm.DecisionPending)
	res = decide(t, db, confirm.Decide{BatchID: b2.ID, Key: "k0", Status: confirm.DecisionAllowed, By: "U", Claim: &confirm.Claim{Worker: "w1", Runnable: runnable("status")}})
	if !res.Claimed || res.Started != "" || callByKey(t, loadBatch(t, db, b2.ID), "k0").Run != confirm.RunNotStarted {
		t.Fatalf("decision with the tool gone = %+v", res)
	}
	// A deny of the only call: claimed, nothing to start.
	b3 := newBatch(t, db, later(), confirm.DecisionPending)
	res = decide(t, db, confirm.Decide{BatchID: b3.ID, Key: "k0", Status: confirm.DecisionDenied, By: "U", Claim: claim})
	if !res.Claimed || res.Started != "" || loadBatch(t, db, b3.ID).Status != confirm.BatchRunning {
		t.Fatalf("deny with a claim = %+v", res)
	}
	// A first approval of a call needing two claims nothing; the lost
	// decision after the batch is claimed changes nothing.
	b4 := newBatch(t, db, later(), confirm.DecisionPending)
	if _, err := db.x.ExecContext(ctx, db.q(`UPDATE calls SET approvals = 2 WHERE batch_id = ?`), b4.ID); err != nil {
		t.Fatal(err)
	}
	if res := decide(t, db, confirm.Decide{BatchID: b4.ID, Key: "k0", Status: confirm.DecisionAllowed, By: "U-a", Claim: claim}); !res.Won || res.Decided || res.Claimed {
		t.Fatalf("first of two approvals = %+v", res)
	}
	if res := decide(t, db, confirm.Decide{BatchID: b4.ID, Key: "k0", Status: confirm.DecisionAllowed, By: "U-b", Claim: claim}); !res.Claimed || res.Started != "k0" {
		t.Fatalf("second of two approvals = %+v", res)
	}
	if res := decide(t, db, confirm.Decide{BatchID: b4.ID, Key: "k0", Status: confirm.DecisionDenied, By: "U-c", Claim: &confirm.Claim{Worker: "w2", Runnable: runnable("deploy")}}); res.Won || res.Claimed {
		t.Fatalf("a decision after the claim = %+v", res)
	}
	if got := loadBatch(t, db, b4.ID); got.ClaimedBy != "w1" || len(callByKey(t, got, "k0").Votes) != 2 {
		t.Fatalf("batch claimed by %q, votes %+v", got.ClaimedBy, callByKey(t, got, "k0").Votes)
	}
}

// Of deciders racing for the last pending calls of one batch, each with
// a claim, exactly one decides the batch and claims it, and its run is
// started once.
func testRaceDecideClaiming(t *testing.T, db *DB) {
	const n = 8
	decisions := make([]confirm.DecisionStatus, n)
	for i := range decisions {
		decisions[i] = confirm.DecisionPending
	}
	b := newBatch(t, db, later(), decisions...)
	var wg sync.WaitGroup
	start := make(chan struct{})
	results := make([]confirm.DecideResult, 2*n)
	errs := make([]error, 2*n)
	for i := range 2 * n {
		wg.Go(func() {
			<-start
			results[i], errs[i] = db.Decide(t.Context(), confirm.Decide{BatchID: b.ID, Key: fmt.Sprintf("k%d", i%n), Status: confirm.DecisionAllowed,
				By: fmt.Sprintf("U%d", i), Now: time.Now(), Claim: &confirm.Claim{Worker: fmt.Sprintf("w%d", i), Runnable: runnable("deploy")}})
		})
	}
	close(start)
	wg.Wait()
	won, claimed, worker := 0, 0, ""
	for i, res := range results {
		if errs[i] != nil {
			t.Fatalf("Decide %d: %v", i, errs[i])
		}
		if res.Won {
			won++
		}
		if res.Claimed {
			claimed++
			worker = fmt.Sprintf("w%d", i)
			if res.Started != "k0" {
				t.Fatalf("the claim started %q, want k0", res.Started)
			}
		}
	}
	got := loadBatch(t, db, b.ID)
	if won != n || claimed != 1 || got.Status != confirm.BatchRunning || got.ClaimedBy != worker {
		t.Fatalf("%d decisions won, %d claims, batch %s by %q (claimer %q); want %d, 1, running by the claimer", won, claimed, got.Status, got.ClaimedBy, worker, n)
	}
	running := 0
	for _, c := range got.Calls {
		if c.Run == confirm.RunRunning {
			running++
		}
	}
	if running != 1 || callByKey(t, got, "k0").Run != confirm.RunRunning {
		t.Fatalf("%d runs started, want k0 only", running)
	}
}

func testMarkEventOnce(t *testing.T, db *DB) {
	ctx := t.Context()
	var wins atomic.Int64
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := 0; i < 20; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			first, err := db.MarkEvent(ctx, "slack", "Ev123", time.Now())
			if err != nil {
				t.Error(err)
			}
			if first {
				wins.Add(1)
			}
		}()
	}
	close(start)
	wg.Wait()
	if wins.Load() != 1 {
		t.Fatalf("%d deliveries of one event were taken as first, want 1", wins.Load())
	}
	if first, err := db.MarkEvent(ctx, "discord", "Ev123", time.Now()); err != nil || !first {
		t.Fatalf("the same id on another platform: %v %v", first, err)
	}
	if _, err := db.MarkEvent(ctx, "slack", "", time.Now()); err == nil {
		t.Fatal("an empty event id must be refused")
	}
	if n, err := db.PruneEvents(ctx, time.Now().Add(-time.Hour)); err != nil || n != 0 {
		t.Fatalf("pruned fresh events: %d %v", n, err)
	}
	if n, err := db.PruneEvents(ctx, time.Now().Add(time.Hour)); err != nil || n != 2 {
		t.Fatalf("prune: %d %v, want 2", n, err)
	}
	if first, _ := db.MarkEvent(ctx, "slack", "Ev123", time.Now()); !first {
		t.Fatal("a pruned id should count as new")
	}
}

func testLeases(t *testing.T, db *DB) {
	ctx := t.Context()
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	ok, err := db.AcquireLease(ctx, "conversation:1", "a", 10*time.Second, now)
	if err != nil || !ok {
		t.Fatalf("first acquire: %v %v", ok, err)
	}
	if ok, _ := db.AcquireLease(ctx, "conversation:1", "b", 10*time.Second, now.Add(time.Second)); ok {
		t.Fatal("b took a live lease")
	}
	if ok, _ := db.AcquireLease(ctx, "conversation:1", "a", 10*time.Second, now.Add(5*time.Second)); !ok {
		t.Fatal("the holder could not renew")
	}
	if ok, _ := db.AcquireLease(ctx, "conversation:1", "b", 10*time.Second, now.Add(12*time.Second)); ok {
		t.Fatal("b took a renewed lease before it lapsed")
	}
	if ok, _ := db.AcquireLease(ctx, "conversation:2", "b", 10*time.Second, now); !ok {
		t.Fatal("another key is independent")
	}
	if ok, _ := db.AcquireLease(ctx, "conversation:1", "b", 10*time.Second, now.Add(16*time.Second)); !ok {
		t.Fatal("b could not take a lapsed lease (holder died)")
	}
	if err := db.ReleaseLease(ctx, "conversation:1", "a"); err != nil {
		t.Fatal(err)
	}
	if ok, _ := db.AcquireLease(ctx, "conversation:1", "c", 10*time.Second, now.Add(17*time.Second)); ok {
		t.Fatal("a released b's lease")
	}
	if err := db.ReleaseLease(ctx, "conversation:1", "b"); err != nil {
		t.Fatal(err)
	}
	if ok, _ := db.AcquireLease(ctx, "conversation:1", "c", 10*time.Second, now.Add(17*time.Second)); !ok {
		t.Fatal("a released lease could not be taken")
	}
}

func testRaceLease(t *testing.T, db *DB) {
	ctx := t.Context()
	now := time.Now()
	var wins atomic.Int64
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := 0; i < 20; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			ok, err := db.AcquireLease(ctx, "conversation:race", fmt.Sprintf("holder-%d", i), time.Minute, now)
			if err != nil {
				t.Error(err)
			}
			if ok {
				wins.Add(1)
			}
		}()
	}
	close(start)
	wg.Wait()
	if wins.Load() != 1 {
		t.Fatalf("%d holders got the lease, want 1", wins.Load())
	}
}

func testReminders(t *testing.T, db *DB) {
	ctx := t.Context()
	conv := newConversation(t, db)
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	b := &confirm.Batch{ConversationID: conv.ID, Status: confirm.BatchPending, CreatedAt: now, ExpiresAt: now.Add(30 * time.Minute),
		Calls: []confirm.Call{{Key: "a", Tool: "t", Args: json.RawMessage(`{}`), Flagged: true, Decision: confirm.DecisionPending, ExpiresAt: now.Add(30 * time.Minute)}}}
	if err := db.CreateBatch(ctx, b, confirm.Message{Role: "assistant", Body: json.RawMessage(`{}`)}); err != nil {
		t.Fatal(err)
	}
	if ids, _ := db.DueReminders(ctx, now, now.Add(5*time.Minute)); len(ids) != 0 {
		t.Fatalf("due 25 minutes early: %v", ids)
	}
	ids, err := db.DueReminders(ctx, now.Add(26*time.Minute), now.Add(31*time.Minute))
	if err != nil || len(ids) != 1 || ids[0] != b.ID {
		t.Fatalf("due: %v %v", ids, err)
	}
	if ok, _ := db.MarkReminded(ctx, b.ID, now); !ok {
		t.Fatal("first MarkReminded lost")
	}
	if ok, _ := db.MarkReminded(ctx, b.ID, now); ok {
		t.Fatal("second MarkReminded won")
	}
	if ids, _ := db.DueReminders(ctx, now.Add(26*time.Minute), now.Add(31*time.Minute)); len(ids) != 0 {
		t.Fatalf("reminded batch still due: %v", ids)
	}
}

func testRecoverOneBatch(t *testing.T, db *DB) {
	ctx := t.Context()
	var ids []string
	for i := 0; i < 2; i++ {
		conv := newConversation(t, db)
		b := &confirm.Batch{ConversationID: conv.ID, Status: confirm.BatchDecided, CreatedAt: time.Now(),
			Calls: []confirm.Call{{Key: "a", Tool: "t", Args: json.RawMessage(`{}`), Decision: confirm.DecisionAllowed}}}
		if err := db.CreateBatch(ctx, b, confirm.Message{Role: "assistant", Body: json.RawMessage(`{}`)}); err != nil {
			t.Fatal(err)
		}
		if ok, err := db.ClaimBatch(ctx, b.ID, "w"); !ok || err != nil {
			t.Fatal(ok, err)
		}
		if ok, err := db.StartRun(ctx, b.ID, "a"); !ok || err != nil {
			t.Fatal(ok, err)
		}
		ids = append(ids, b.ID)
	}
	got, err := db.RecoverRunning(ctx, ids[0])
	if err != nil || len(got) != 1 || got[0] != ids[0] {
		t.Fatalf("RecoverRunning(%s) = %v, %v", ids[0], got, err)
	}
	other, _ := db.Batch(ctx, ids[1])
	if other.Calls[0].Run != confirm.RunRunning {
		t.Fatalf("another batch's running call became %s", other.Calls[0].Run)
	}
}

func testUnanswered(t *testing.T, db *DB) {
	ctx := t.Context()
	a, b := newConversation(t, db), newConversation(t, db)
	msg := func(role string) confirm.Message { return confirm.Message{Role: role, Body: json.RawMessage(`{}`)} }
	if err := db.AppendMessages(ctx, a.ID, msg("user"), msg("assistant"), msg("tool")); err != nil {
		t.Fatal(err)
	}
	if err := db.AppendMessages(ctx, b.ID, msg("user"), msg("assistant"), msg("tool"), msg("assistant")); err != nil {
		t.Fatal(err)
	}
	ids, err := db.UnansweredConversations(ctx)
	if err != nil || len(ids) != 1 || ids[0] != a.ID {
		t.Fatalf("unanswered = %v, %v; want only %d", ids, err, a.ID)
	}
}

func testConversationDM(t *testing.T, db *DB) {
	ctx := t.Context()
	dm, err := db.Conversation(ctx, "slack", "D1", "", true)
	if err != nil {
		t.Fatal(err)
	}
	if !dm.DM {
		t.Fatalf("created with dm: %+v", dm)
	}
	// An existing conversation keeps its own dm, whatever later callers say.
	again, err := db.Conversation(ctx, "slack", "D1", "", false)
	if err != nil || again.ID != dm.ID || !again.DM {
		t.Fatalf("Conversation(dm=false) of a dm = %+v, %v", again, err)
	}
	ch, err := db.Conversation(ctx, "slack", "C1", "T1", false)
	if err != nil || ch.DM {
		t.Fatalf("Conversation(dm=false) = %+v, %v", ch, err)
	}
	if again, err := db.Conversation(ctx, "slack", "C1", "T1", true); err != nil || again.ID != ch.ID || again.DM {
		t.Fatalf("Conversation(dm=true) of a channel thread = %+v, %v", again, err)
	}
	if found, err := db.FindConversation(ctx, "slack", "D1", ""); err != nil || found.ID != dm.ID || !found.DM {
		t.Fatalf("FindConversation = %+v, %v", found, err)
	}
	if found, err := db.FindConversation(ctx, "slack", "C1", "T1"); err != nil || found.DM {
		t.Fatalf("FindConversation = %+v, %v", found, err)
	}
	if byID, err := db.ConversationByID(ctx, dm.ID); err != nil || !byID.DM || byID.Channel != "D1" {
		t.Fatalf("ConversationByID = %+v, %v", byID, err)
	}
	if byID, err := db.ConversationByID(ctx, ch.ID); err != nil || byID.DM {
		t.Fatalf("ConversationByID = %+v, %v", byID, err)
	}
}

func testReasons(t *testing.T, db *DB) {
	ctx := t.Context()
	conv := newConversation(t, db)
	unknown := []confirm.Reason{{Kind: confirm.ReasonToolFlag}, {Kind: confirm.ReasonUnknownOutcome}}
	b := &confirm.Batch{ConversationID: conv.ID, RequestedBy: "U", ExpiresAt: later(), Calls: []confirm.Call{
		{Key: "a", Position: 0, Tool: "deploy", Args: json.RawMessage(`{}`), Flagged: true, Reasons: unknown},
		{Key: "b", Position: 1, Tool: "deploy", Args: json.RawMessage(`{}`), Flagged: true},
	}}
	if err := db.CreateBatch(ctx, b, confirm.Message{Role: "assistant", Body: json.RawMessage(`1`)}); err != nil {
		t.Fatal(err)
	}
	check := func(from string, got *confirm.Batch) {
		t.Helper()
		if r := callByKey(t, got, "a").Reasons; fmt.Sprint(r) != fmt.Sprint(unknown) {
			t.Errorf("%s: call a Reasons = %v, want %v", from, r, unknown)
		}
		if r := callByKey(t, got, "b").Reasons; r != nil {
			t.Errorf("%s: call b Reasons = %#v, want nil", from, r)
		}
	}
	check("Batch", loadBatch(t, db, b.ID))
	pending, err := db.PendingBatch(ctx, conv.ID)
	if err != nil {
		t.Fatal(err)
	}
	check("PendingBatch", pending)

	evs, err := db.AuditEvents(ctx, confirm.AuditFilter{ConversationID: conv.ID})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, e := range evs {
		if e.Kind != confirm.AuditToolCall {
			continue
		}
		var d map[string]json.RawMessage
		if err := json.Unmarshal([]byte(e.Detail), &d); err != nil {
			t.Fatalf("tool_call detail %s: %v", e.Detail, err)
		}
		r, has := d["reasons"]
		switch e.CallKey {
		case "a":
			var rs []confirm.Reason
			if err := json.Unmarshal(r, &rs); err != nil || fmt.Sprint(rs) != fmt.Sprint(unknown) {
				t.Errorf("call a detail reasons = %s (%v), want %v", r, err, unknown)
			}
		case "b":
			if has {
				t.Errorf("call b detail has reasons %s; want none when empty", r)
			}
		}
		if string(d["approvals"]) != "1" {
			t.Errorf("call %s detail approvals = %s, want 1", e.CallKey, d["approvals"])
		}
		seen[e.CallKey] = true
	}
	if !seen["a"] || !seen["b"] {
		t.Fatalf("tool_call events for %v, want a and b", seen)
	}
}

func testExactArgsInAudit(t *testing.T, db *DB) {
	ctx := t.Context()
	conv := newConversation(t, db)
	const args = `{"cmd": "a && b <c>",  "n": 1}` // two spaces, and <>& json.Marshal would escape
	b := &confirm.Batch{ConversationID: conv.ID, RequestedBy: "U", ExpiresAt: later(), Calls: []confirm.Call{
		{Key: "exact", Position: 0, CallID: "c1", Tool: "shell", Args: json.RawMessage(args), Flagged: true, Summary: "run <it> & see"},
		{Key: "bad", Position: 1, Tool: "shell", Args: json.RawMessage(`{not json`), Decision: confirm.DecisionInvalid},
		{Key: "empty", Position: 2, Tool: "shell", Decision: confirm.DecisionAllowedByPolicy},
	}}
	if err := db.CreateBatch(ctx, b, confirm.Message{Role: "assistant", Body: json.RawMessage(`1`)}); err != nil {
		t.Fatal(err)
	}
	if got := callByKey(t, loadBatch(t, db, b.ID), "exact").Args; string(got) != args {
		t.Errorf("Batch args = %q, want exactly %q", got, args)
	}
	evs, err := db.AuditEvents(ctx, confirm.AuditFilter{ConversationID: conv.ID})
	if err != nil {
		t.Fatal(err)
	}
	// Parsed the way `airlock audit` parses a tool_call detail.
	type toolCallDetail struct {
		CallID   string          `json:"call_id"`
		Args     json.RawMessage `json:"args"`
		Flagged  bool            `json:"flagged"`
		Decision string          `json:"decision"`
		Summary  string          `json:"summary"`
	}
	details := map[string]toolCallDetail{}
	for _, e := range evs {
		if e.Kind != confirm.AuditToolCall {
			continue
		}
		var d toolCallDetail
		if err := json.Unmarshal([]byte(e.Detail), &d); err != nil {
			t.Fatalf("tool_call detail of %s is not a JSON object: %s (%v)", e.CallKey, e.Detail, err)
		}
		details[e.CallKey] = d
		if e.CallKey == "exact" && !strings.Contains(e.Detail, `"args":`+args) {
			t.Errorf("detail = %s, want the args spliced in verbatim", e.Detail)
		}
	}
	if d := details["exact"]; string(d.Args) != args || d.CallID != "c1" || !d.Flagged || d.Decision != "pending" || d.Summary != "run <it> & see" {
		t.Errorf("exact detail = %+v (args %q, want %q)", d, d.Args, args)
	}
	var s string
	if err := json.Unmarshal(details["bad"].Args, &s); err != nil || s != `{not json` {
		t.Errorf("invalid args in detail = %s (%v), want the JSON string of the bytes", details["bad"].Args, err)
	}
	if err := json.Unmarshal(details["empty"].Args, &s); err != nil || s != "" {
		t.Errorf("empty args in detail = %s (%v), want \"\"", details["empty"].Args, err)
	}
}

func testPendingInChannel(t *testing.T, db *DB) {
	ctx := t.Context()
	conv := func(platform, channel, thread string) int64 {
		t.Helper()
		c, err := db.Conversation(ctx, platform, channel, thread, false)
		if err != nil {
			t.Fatal(err)
		}
		return c.ID
	}
	count := func(platform, channel string) int {
		t.Helper()
		n, err := db.PendingInChannel(ctx, platform, channel)
		if err != nil {
			t.Fatalf("PendingInChannel(%s, %s): %v", platform, channel, err)
		}
		return n
	}
	if n := count("slack", "C1"); n != 0 {
		t.Fatalf("empty channel: %d pending", n)
	}
	t1, t2, top := conv("slack", "C1", "T1"), conv("slack", "C1", "T2"), conv("slack", "C1", "")
	p1 := batchIn(t, db, t1, later(), confirm.DecisionPending)
	batchIn(t, db, t2, later(), confirm.DecisionPending, confirm.DecisionAllowedByPolicy)
	batchIn(t, db, top, later(), confirm.DecisionPending)
	// Not counted: another status, another channel, another platform.
	decided := batchIn(t, db, t1, later(), confirm.DecisionPending)
	decide(t, db, confirm.Decide{BatchID: decided.ID, Key: "k0", Status: confirm.DecisionAllowed, By: "U"})
	batchIn(t, db, conv("slack", "C2", "T1"), later(), confirm.DecisionPending)
	batchIn(t, db, conv("discord", "C1", "T1"), later(), confirm.DecisionPending)

	if n := count("slack", "C1"); n != 3 {
		t.Fatalf("slack/C1: %d pending, want 3 (one per thread)", n)
	}
	if n := count("slack", "C2"); n != 1 {
		t.Fatalf("slack/C2: %d pending, want 1", n)
	}
	if n := count("discord", "C1"); n != 1 {
		t.Fatalf("discord/C1: %d pending, want 1", n)
	}
	if n := count("slack", "C3"); n != 0 {
		t.Fatalf("slack/C3: %d pending, want 0", n)
	}
	if n, err := db.ResolvePending(ctx, p1.ID, confirm.DecisionExpired, "airlock", "", false, time.Now()); err != nil || n != 1 {
		t.Fatalf("ResolvePending = %d, %v", n, err)
	}
	if n := count("slack", "C1"); n != 2 {
		t.Fatalf("slack/C1 after one resolved: %d pending, want 2", n)
	}
}

func testUnknownCalls(t *testing.T, db *DB) {
	ctx := t.Context()
	conv := newConversation(t, db)
	// makeUnknown runs the batch's calls and loses their outcome, except
	// the keys in finished, which succeed first.
	makeUnknown := func(b *confirm.Batch, finished ...string) {
		t.Helper()
		for _, c := range b.Calls {
			if ok, err := db.StartRun(ctx, b.ID, c.Key); err != nil || !ok {
				t.Fatalf("StartRun(%s) = %v, %v", c.Key, ok, err)
			}
		}
		for _, key := range finished {
			if err := db.FinishRun(ctx, b.ID, key, confirm.RunSucceeded, "ok"); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := db.RecoverRunning(ctx, b.ID); err != nil {
			t.Fatal(err)
		}
	}
	if calls, err := db.UnknownCalls(ctx, conv.ID); err != nil || len(calls) != 0 {
		t.Fatalf("UnknownCalls of a fresh conversation = %v, %v", calls, err)
	}
	now := time.Now()
	create := func(createdAt time.Time, keys ...string) *confirm.Batch {
		t.Helper()
		b := &confirm.Batch{ConversationID: conv.ID, RequestedBy: "U", CreatedAt: createdAt, Status: confirm.BatchDecided}
		for i := len(keys) - 1; i >= 0; i-- { // positions out of slice order
			b.Calls = append(b.Calls, confirm.Call{Key: keys[i], Position: i, Tool: "deploy", Args: json.RawMessage(`{}`),
				Decision: confirm.DecisionAllowedByPolicy, Reasons: []confirm.Reason{{Kind: confirm.ReasonRule, Rule: "r-" + keys[i]}}})
		}
		if err := db.CreateBatch(ctx, b, confirm.Message{Role: "assistant", Body: json.RawMessage(`1`)}); err != nil {
			t.Fatal(err)
		}
		return b
	}
	newer := create(now, "n0", "n1")
	older := create(now.Add(-time.Minute), "o0", "o1", "o2") // created second, but older
	makeUnknown(newer)
	makeUnknown(older, "o1")
	// Another conversation's unknown call is not listed.
	makeUnknown(decidedBatchElsewhere(t, db))

	calls, err := db.UnknownCalls(ctx, conv.ID)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, c := range calls {
		got = append(got, c.Key)
		if c.Run != confirm.RunUnknown || c.Result != confirm.UnknownOutcomeMessage || len(c.Reasons) != 1 || c.Reasons[0].Rule != "r-"+c.Key || c.Tool != "deploy" {
			t.Errorf("call %s = %+v", c.Key, c)
		}
	}
	if want := "o0 o2 n0 n1"; strings.Join(got, " ") != want {
		t.Fatalf("UnknownCalls = %v, want %s (oldest batch first, then position)", got, want)
	}
}

// decidedBatchElsewhere stores a decided batch of one allowed call in a new conversation.
func decidedBatchElsewhere(t *testing.T, db *DB) *confirm.Batch {
	t.Helper()
	b := &confirm.Batch{ConversationID: newConversation(t, db).ID, Status: confirm.BatchDecided, Calls: []confirm.Call{
		{Key: "x", Tool: "deploy", Args: json.RawMessage(`{}`), Decision: confirm.DecisionAllowedByPolicy},
	}}
	if err := db.CreateBatch(t.Context(), b, confirm.Message{Role: "assistant", Body: json.RawMessage(`1`)}); err != nil {
		t.Fatal(err)
	}
	return b
}

func testCountTurn(t *testing.T, db *DB) {
	ctx := t.Context()
	t0 := time.Date(2030, 3, 4, 5, 6, 7, 0, time.UTC)
	const window = time.Hour
	count := func(platform, user string, at time.Time) int {
		t.Helper()
		n, err := db.CountTurn(ctx, platform, user, at, window)
		if err != nil {
			t.Fatalf("CountTurn(%s, %s, %v): %v", platform, user, at, err)
		}
		return n
	}
	rows := func(user string) int {
		t.Helper()
		var n int
		if err := db.x.GetContext(ctx, &n, db.q(`SELECT COUNT(*) FROM turn_log WHERE user_id = ?`), user); err != nil {
			t.Fatal(err)
		}
		return n
	}
	steps := []struct {
		at   time.Duration
		want int
	}{
		{0, 1},
		{10 * time.Minute, 2},
		{10 * time.Minute, 3}, // two turns at one instant both count
		{30 * time.Minute, 4},
		{65 * time.Minute, 4},  // t0 left the window
		{70 * time.Minute, 3},  // (t0+10m, t0+70m]: both t0+10m turns are out (the window is open at its start)
		{200 * time.Minute, 1}, // everything earlier left
	}
	for _, s := range steps {
		if got := count("slack", "U1", t0.Add(s.at)); got != s.want {
			t.Fatalf("CountTurn at t0+%v = %d, want %d", s.at, got, s.want)
		}
	}
	if n := rows("U1"); n != 1 {
		t.Errorf("turn_log keeps %d rows of U1, want 1: rows outside the window are pruned", n)
	}
	// Users and platforms count apart.
	if got := count("slack", "U2", t0.Add(200*time.Minute)); got != 1 {
		t.Errorf("another user: %d, want 1", got)
	}
	if got := count("discord", "U1", t0.Add(200*time.Minute)); got != 1 {
		t.Errorf("another platform: %d, want 1", got)
	}
	if got := count("slack", "U1", t0.Add(201*time.Minute)); got != 2 {
		t.Errorf("U1 after the others: %d, want 2", got)
	}
	// A zero now is the database clock's now.
	if got, err := db.CountTurn(ctx, "slack", "U3", time.Time{}, window); err != nil || got != 1 {
		t.Errorf("CountTurn(zero now) = %d, %v", got, err)
	}
	if got := count("slack", "U3", time.Now().Add(time.Second)); got != 2 {
		t.Errorf("CountTurn after a zero-now turn = %d, want 2", got)
	}
	if _, err := db.CountTurn(ctx, "slack", "U1", t0, 0); err == nil {
		t.Error("CountTurn with a zero window succeeded")
	}
}

// testRaceCountTurn: concurrent turns of one user each get a different
// count, and none is missed.
func testRaceCountTurn(t *testing.T, db *DB) {
	ctx := t.Context()
	const n = 24
	now := time.Now()
	counts := make([]int, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			counts[i], errs[i] = db.CountTurn(ctx, "slack", "U-race", now, time.Minute)
		})
	}
	close(start)
	wg.Wait()
	seen := make([]bool, n+1)
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("CountTurn: %v", errs[i])
		}
		if c := counts[i]; c < 1 || c > n || seen[c] {
			t.Fatalf("counts %v: want each of 1..%d once", counts, n)
		}
		seen[counts[i]] = true
	}
	if got, err := db.CountTurn(ctx, "slack", "U-race", now, time.Minute); err != nil || got != n+1 {
		t.Fatalf("CountTurn after the race = %d, %v; want %d", got, err, n+1)
	}
}

// testClockSync: with the local clock an hour fast, Clock gives the
// database's time after SyncClock (on PostgreSQL the server's clock, which
// here is the real one; on SQLite the local clock itself).
func testClockSync(t *testing.T, db *DB) {
	ctx := t.Context()
	if d := db.Clock()().Sub(time.Now()); d < -time.Second || d > time.Second {
		t.Fatalf("Clock before any sync or skew is off the local clock by %v", d)
	}
	const skew = time.Hour
	db.setLocalClock(func() time.Time { return time.Now().Add(skew) })
	if err := db.SyncClock(ctx); err != nil {
		t.Fatal(err)
	}
	got := db.Clock()()
	want := time.Now() // the server's clock: the real one
	if db.Driver() == DriverSQLite {
		want = want.Add(skew) // the database is on this machine: its clock is the local one
	}
	if d := got.Sub(want); d < -2*time.Second || d > 2*time.Second {
		t.Fatalf("Clock after SyncClock = %v, want %v (±2s; off by %v)", got, want, d)
	}
	// The database's clock is what storage stamps rows with.
	conv := newConversation(t, db)
	if d := conv.CreatedAt.Sub(want); d < -2*time.Second || d > 2*time.Second {
		t.Errorf("conversation CreatedAt = %v, want about %v", conv.CreatedAt, want)
	}
}
