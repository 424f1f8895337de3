package storage

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/airlockhq/airlock/confirm"
)

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
			{Key: "call_a", Position: 0, CallID: "call_a", Tool: "deploy", Args: json.RawMessage(oddArgs), Flagged: true, Summary: "deploy v2 to prod", Risk: confirm.RiskCritical},
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
		a.IdempotencyKey != b.ID+"/call_a" || !a.ExpiresAt.Equal(expires) || a.Risk != confirm.RiskCritical || got.Calls[1].Risk != "" {
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
		if err := clockAt(db, b.CreatedAt).CreateBatch(ctx, b, confirm.Message{Role: "assistant", Body: json.RawMessage(`{}`)}); err != nil {
			t.Fatal(err)
		}
		return b
	}
	old := mk(time.Now().Add(-time.Minute))
	newer := mk(time.Now())
	newBatch(t, db, later(), confirm.DecisionPending) // another conversation
	if ids, err := db.PendingBatches(ctx, conv.ID); err != nil || strings.Join(ids, " ") != old.ID+" "+newer.ID {
		t.Fatalf("PendingBatches = %v, %v; want [%s %s], oldest first", ids, err, old.ID, newer.ID)
	}
	got, err := db.PendingBatch(ctx, conv.ID)
	if err != nil || got.ID != newer.ID || len(got.Calls) != 1 {
		t.Fatalf("PendingBatch = %+v, %v; want %s", got, err, newer.ID)
	}
	decide(t, db, confirm.Decide{BatchID: newer.ID, Key: "k0", Status: confirm.DecisionAllowed, By: "U"})
	if got, err := db.PendingBatch(ctx, conv.ID); err != nil || got.ID != old.ID {
		t.Fatalf("PendingBatch after deciding the newer = %v, %v; want %s", got, err, old.ID)
	}
	if ids, err := db.PendingBatches(ctx, conv.ID); err != nil || len(ids) != 1 || ids[0] != old.ID {
		t.Fatalf("PendingBatches after deciding the newer = %v, %v; want [%s]", ids, err, old.ID)
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
		if err := clockAt(db, b.CreatedAt).CreateBatch(ctx, b, confirm.Message{Role: "assistant", Body: json.RawMessage(`{}`)}); err != nil {
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
	uncarded := func() bool {
		ids, err := db.UncardedBatches(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return slices.Contains(ids, b.ID)
	}
	if !uncarded() {
		t.Fatal("a waiting batch with no card is not listed as uncarded")
	}
	if err := db.SetCardRef(ctx, b.ID, "C1/1700000000.000100"); err != nil {
		t.Fatal(err)
	}
	if uncarded() {
		t.Fatal("a batch whose card was recorded is listed as uncarded")
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
		if err := clockAt(db, b.CreatedAt).CreateBatch(ctx, b, confirm.Message{Role: "assistant", Body: json.RawMessage(`{}`)}); err != nil {
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
	if n, err := db.ExpirePending(ctx, p1.ID, "airlock", ""); err != nil || n != 1 {
		t.Fatalf("ExpirePending = %d, %v", n, err)
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
		if err := clockAt(db, b.CreatedAt).CreateBatch(ctx, b, confirm.Message{Role: "assistant", Body: json.RawMessage(`1`)}); err != nil {
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
