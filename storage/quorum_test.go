package storage

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/airlockhq/airlock/confirm"
)

// quorumBatch stores a pending batch in a new conversation: one flagged
// call "q" of tool "deploy" needing approvals, and a second flagged call
// "other" needing one.
func quorumBatch(t *testing.T, db *DB, approvals int, expires time.Time) *confirm.Batch {
	t.Helper()
	b := &confirm.Batch{ConversationID: newConversation(t, db).ID, RequestedBy: "U-author", ExpiresAt: expires, Calls: []confirm.Call{
		{Key: "q", Position: 0, Tool: "deploy", Args: json.RawMessage(`{"env":"prod"}`), Flagged: true, Approvals: approvals, Grantable: true,
			Reasons: []confirm.Reason{{Kind: confirm.ReasonRule, Rule: "prod-two-person"}}},
		{Key: "other", Position: 1, Tool: "restart", Args: json.RawMessage(`{}`), Flagged: true},
	}}
	if err := db.CreateBatch(t.Context(), b, confirm.Message{Role: "assistant", Body: json.RawMessage(`{}`)}); err != nil {
		t.Fatalf("CreateBatch: %v", err)
	}
	return b
}

func voters(c confirm.Call) string {
	var by []string
	for _, v := range c.Votes {
		by = append(by, v.By)
	}
	return strings.Join(by, " ")
}

// auditOf returns the conversation's events of a kind.
func auditOf(t *testing.T, db *DB, convID int64, kind confirm.AuditKind) []confirm.AuditEvent {
	t.Helper()
	evs, err := db.AuditEvents(t.Context(), confirm.AuditFilter{ConversationID: convID})
	if err != nil {
		t.Fatalf("AuditEvents: %v", err)
	}
	var out []confirm.AuditEvent
	for _, e := range evs {
		if e.Kind == kind {
			out = append(out, e)
		}
	}
	return out
}

func testQuorum(t *testing.T, db *DB) {
	b := quorumBatch(t, db, 2, later())
	if c := callByKey(t, loadBatch(t, db, b.ID), "q"); c.Approvals != 2 || c.Votes != nil {
		t.Fatalf("fresh call = %+v", c)
	}
	t0 := time.Now()
	allow := func(by string, at time.Time) confirm.DecideResult {
		t.Helper()
		return decide(t, clockAt(db, at), confirm.Decide{BatchID: b.ID, Key: "q", Status: confirm.DecisionAllowed, By: by})
	}

	res := allow("U-alice", t0)
	if want := (confirm.DecideResult{Won: true, Votes: 1, Required: 2}); res != want {
		t.Fatalf("first vote = %+v, want %+v", res, want)
	}
	c := callByKey(t, loadBatch(t, db, b.ID), "q")
	if c.Decision != confirm.DecisionPending || c.DecidedBy != "" || c.DecidedAt != nil || voters(c) != "U-alice" {
		t.Fatalf("after one vote: %+v", c)
	}

	res = allow("U-alice", t0.Add(time.Second))
	if want := (confirm.DecideResult{Votes: 1, Required: 2, AlreadyVoted: true}); res != want {
		t.Fatalf("same person again = %+v, want %+v", res, want)
	}
	c = callByKey(t, loadBatch(t, db, b.ID), "q")
	if c.Decision != confirm.DecisionPending || len(c.Votes) != 1 || !c.Votes[0].At.Equal(utc(t0)) {
		t.Fatalf("after a repeated vote: %+v (votes %+v)", c, c.Votes)
	}
	if n := len(auditOf(t, db, b.ConversationID, confirm.AuditApproval)); n != 1 {
		t.Fatalf("%d approval events after a repeated vote, want 1", n)
	}

	res = allow("U-bob", t0.Add(2*time.Second))
	if want := (confirm.DecideResult{Won: true, Decided: true, Votes: 2, Required: 2}); res != want {
		t.Fatalf("second person = %+v, want %+v", res, want)
	}
	got := loadBatch(t, db, b.ID)
	c = callByKey(t, got, "q")
	if c.Decision != confirm.DecisionAllowed || c.DecidedBy != "U-bob" || c.DecidedAt == nil || voters(c) != "U-alice U-bob" {
		t.Fatalf("after the second vote: %+v (votes %+v)", c, c.Votes)
	}
	if got.Status != confirm.BatchPending {
		t.Fatalf("batch is %s with a call pending", got.Status)
	}
	// A vote on an allowed call changes nothing.
	if res := allow("U-carol", t0.Add(3*time.Second)); res.Won || res.Decided || res.AlreadyVoted {
		t.Fatalf("vote on an allowed call = %+v", res)
	}
	if c := callByKey(t, loadBatch(t, db, b.ID), "q"); voters(c) != "U-alice U-bob" {
		t.Fatalf("votes after a late vote: %s", voters(c))
	}

	approvals := auditOf(t, db, b.ConversationID, confirm.AuditApproval)
	if len(approvals) != 2 {
		t.Fatalf("%d approval events, want 2", len(approvals))
	}
	for i, e := range approvals {
		var d struct{ Votes, Required int }
		if err := json.Unmarshal([]byte(e.Detail), &d); err != nil || d.Votes != i+1 || d.Required != 2 || e.CallKey != "q" {
			t.Errorf("approval event %d = %+v (%v)", i, e, err)
		}
	}
	if want := []string{"U-alice", "U-bob"}; approvals[0].Actor != want[0] || approvals[1].Actor != want[1] {
		t.Errorf("approval actors %q %q, want %v", approvals[0].Actor, approvals[1].Actor, want)
	}
	decisions := auditOf(t, db, b.ConversationID, confirm.AuditDecision)
	if len(decisions) != 1 || decisions[0].Actor != "U-bob" || decisions[0].CallKey != "q" {
		t.Fatalf("decision events = %+v, want one by U-bob", decisions)
	}

	// The one-approval call: allowed by its first vote, no approval event,
	// and that decides the batch.
	res = decide(t, db, confirm.Decide{BatchID: b.ID, Key: "other", Status: confirm.DecisionAllowed, By: "U-carol"})
	decided := res.Batch
	res.Batch = nil
	if want := (confirm.DecideResult{Won: true, Decided: true, BatchDecided: true, Votes: 1, Required: 1}); res != want {
		t.Fatalf("one-approval call = %+v, want %+v", res, want)
	}
	// The decision returns the batch as it left it: what a load gives.
	if stored := loadBatch(t, db, b.ID); !reflect.DeepEqual(decided, stored) || stored.Status != confirm.BatchDecided {
		t.Fatalf("returned batch\n%+v\nstored\n%+v", decided, stored)
	}
	if n := len(auditOf(t, db, b.ConversationID, confirm.AuditApproval)); n != 2 {
		t.Errorf("%d approval events after a one-approval allow, want still 2", n)
	}
}

func testQuorumDeny(t *testing.T, db *DB) {
	b := quorumBatch(t, db, 3, later())
	decide(t, db, confirm.Decide{BatchID: b.ID, Key: "q", Status: confirm.DecisionAllowed, By: "U-alice"})
	res := decide(t, db, confirm.Decide{BatchID: b.ID, Key: "q", Status: confirm.DecisionDenied, By: "U-bob",
		Message: "Denied by U-bob: not during the freeze", Reason: "not during the freeze"})
	if want := (confirm.DecideResult{Won: true, Decided: true, Votes: 1, Required: 3}); res != want {
		t.Fatalf("deny after a vote = %+v, want %+v", res, want)
	}
	c := callByKey(t, loadBatch(t, db, b.ID), "q")
	if c.Decision != confirm.DecisionDenied || c.DecidedBy != "U-bob" || c.DenyReason != "not during the freeze" ||
		c.DenyMessage != "Denied by U-bob: not during the freeze" || voters(c) != "U-alice" {
		t.Fatalf("denied call = %+v", c)
	}
	// Further votes change nothing.
	if res := decide(t, db, confirm.Decide{BatchID: b.ID, Key: "q", Status: confirm.DecisionAllowed, By: "U-carol"}); res.Won || res.Decided {
		t.Fatalf("vote after a deny = %+v", res)
	}
	if c := callByKey(t, loadBatch(t, db, b.ID), "q"); c.Decision != confirm.DecisionDenied || voters(c) != "U-alice" {
		t.Fatalf("call after a vote on a denied call = %+v", c)
	}
	decisions := auditOf(t, db, b.ConversationID, confirm.AuditDecision)
	if len(decisions) != 1 {
		t.Fatalf("decision events = %+v", decisions)
	}
	var d struct{ Status, Message, Reason string }
	if err := json.Unmarshal([]byte(decisions[0].Detail), &d); err != nil || d.Status != "denied" || d.Reason != "not during the freeze" {
		t.Errorf("deny detail = %s (%v)", decisions[0].Detail, err)
	}
}

func testQuorumExpiry(t *testing.T, db *DB) {
	ctx := t.Context()
	expires := time.Now().Add(time.Minute).Truncate(time.Millisecond)
	b := quorumBatch(t, db, 2, expires)
	decide(t, clockAt(db, expires.Add(-time.Second)), confirm.Decide{BatchID: b.ID, Key: "q", Status: confirm.DecisionAllowed, By: "U-alice"})
	// A vote at or after the expiry changes nothing.
	for _, now := range []time.Time{expires, expires.Add(time.Second)} {
		res := decide(t, clockAt(db, now), confirm.Decide{BatchID: b.ID, Key: "q", Status: confirm.DecisionAllowed, By: "U-bob"})
		if res != (confirm.DecideResult{}) {
			t.Fatalf("vote at %v (expiry %v) = %+v", now, expires, res)
		}
	}
	if c := callByKey(t, loadBatch(t, db, b.ID), "q"); c.Decision != confirm.DecisionPending || voters(c) != "U-alice" {
		t.Fatalf("call after late votes = %+v", c)
	}
	// Expiry resolves the call with one of two votes as expired.
	ids, err := clockAt(db, expires).ExpiredBatches(ctx)
	if err != nil || len(ids) != 1 || ids[0] != b.ID {
		t.Fatalf("ExpiredBatches = %v, %v", ids, err)
	}
	n, err := clockAt(db, expires).ExpirePending(ctx, b.ID, auditSystemActor, confirm.ExpiredMessage)
	if err != nil || n != 2 {
		t.Fatalf("ExpirePending = %d, %v; want 2", n, err)
	}
	got := loadBatch(t, db, b.ID)
	if c := callByKey(t, got, "q"); c.Decision != confirm.DecisionExpired || voters(c) != "U-alice" {
		t.Fatalf("expired call = %+v", c)
	}
	if got.Status != confirm.BatchDecided {
		t.Fatalf("batch is %s", got.Status)
	}
}

// testRaceQuorum: two approvers click Allow on a two-approval call at the
// same moment; the call is allowed exactly once, every time.
func testRaceQuorum(t *testing.T, db *DB) {
	const rounds = 50
	for round := range rounds {
		b := quorumBatch(t, db, 2, later())
		results, errs := race(2, func(i int) (confirm.DecideResult, error) {
			return db.Decide(t.Context(), confirm.Decide{
				BatchID: b.ID, Key: "q", Status: confirm.DecisionAllowed, By: fmt.Sprintf("U%d", i),
			})
		})
		decided := 0
		for i := range 2 {
			if errs[i] != nil {
				t.Fatalf("round %d: Decide %d: %v", round, i, errs[i])
			}
			if !results[i].Won {
				t.Errorf("round %d: vote %d not counted: %+v", round, i, results[i])
			}
			if results[i].Decided {
				decided++
			}
		}
		if decided != 1 {
			t.Fatalf("round %d: %d of 2 concurrent votes decided the call, want exactly 1 (%+v)", round, decided, results)
		}
		c := callByKey(t, loadBatch(t, db, b.ID), "q")
		if c.Decision != confirm.DecisionAllowed || len(c.Votes) != 2 {
			t.Fatalf("round %d: call = %+v", round, c)
		}
		if n := len(auditOf(t, db, b.ConversationID, confirm.AuditDecision)); n != 1 {
			t.Fatalf("round %d: %d decision events, want 1", round, n)
		}
	}
}

// testRaceSameApprover: one approver's click storm counts one vote.
func testRaceSameApprover(t *testing.T, db *DB) {
	b := quorumBatch(t, db, 2, later())
	const n = 10
	results, errs := race(n, func(int) (confirm.DecideResult, error) {
		return db.Decide(t.Context(), confirm.Decide{BatchID: b.ID, Key: "q", Status: confirm.DecisionAllowed, By: "U-alice"})
	})
	won := 0
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("Decide %d: %v", i, errs[i])
		}
		if results[i].Decided {
			t.Fatalf("Decide %d decided a two-approval call with one approver", i)
		}
		if results[i].Won {
			won++
		} else if !results[i].AlreadyVoted || results[i].Votes != 1 {
			t.Errorf("Decide %d = %+v, want AlreadyVoted with 1 vote", i, results[i])
		}
	}
	if won != 1 {
		t.Fatalf("%d of %d clicks counted, want 1", won, n)
	}
	if c := callByKey(t, loadBatch(t, db, b.ID), "q"); c.Decision != confirm.DecisionPending || voters(c) != "U-alice" {
		t.Fatalf("call = %+v", c)
	}
	if got := len(auditOf(t, db, b.ConversationID, confirm.AuditApproval)); got != 1 {
		t.Fatalf("%d approval events, want 1", got)
	}
}

func testGrants(t *testing.T, db *DB) {
	ctx := t.Context()
	b := quorumBatch(t, db, 2, later())
	now := time.Now()
	until := now.Add(30 * time.Minute)

	// A vote that does not decide the call stores no grant.
	g1 := &confirm.Grant{ID: "g-early", Tool: "deploy", CreatedBy: "U-alice", ExpiresAt: until}
	res := decide(t, clockAt(db, now), confirm.Decide{BatchID: b.ID, Key: "q", Status: confirm.DecisionAllowed, By: "U-alice", Grant: g1})
	if res.Decided {
		t.Fatalf("first vote decided: %+v", res)
	}
	if _, err := db.Grant(ctx, "g-early"); !errors.Is(err, confirm.ErrNotFound) {
		t.Fatalf("grant of a non-deciding vote: %v, want ErrNotFound", err)
	}
	if _, err := firstActiveGrant(ctx, db, b.ConversationID, "deploy", now); !errors.Is(err, confirm.ErrNotFound) {
		t.Fatalf("ActiveGrant before the deciding allow: %v, want ErrNotFound", err)
	}

	// The deciding allow stores it, in the same transaction.
	g := &confirm.Grant{ID: "g1", Tool: "deploy", CreatedBy: "U-bob", ExpiresAt: until, ToolDef: "def-of-deploy"}
	res = decide(t, clockAt(db, now.Add(time.Second)), confirm.Decide{BatchID: b.ID, Key: "q", Status: confirm.DecisionAllowed, By: "U-bob", Grant: g})
	if !res.Decided {
		t.Fatalf("second vote = %+v", res)
	}
	if g.ConversationID != b.ConversationID || g.BatchID != b.ID || g.CallKey != "q" || g.CreatedAt.IsZero() {
		t.Errorf("grant filled in = %+v", g)
	}
	stored, err := db.Grant(ctx, "g1")
	if err != nil {
		t.Fatal(err)
	}
	if stored.ConversationID != b.ConversationID || stored.Tool != "deploy" || stored.CreatedBy != "U-bob" || stored.BatchID != b.ID ||
		stored.CallKey != "q" || !stored.ExpiresAt.Equal(utc(until)) || stored.RevokedAt != nil || stored.RevokedBy != "" || !stored.Active(now) ||
		stored.ToolDef != "def-of-deploy" {
		t.Fatalf("stored grant = %+v", stored)
	}

	// ActiveGrant: only that conversation and tool, before expiry.
	if a, err := firstActiveGrant(ctx, db, b.ConversationID, "deploy", now.Add(time.Minute)); err != nil || a.ID != "g1" {
		t.Fatalf("ActiveGrant = %+v, %v", a, err)
	}
	other := newConversation(t, db)
	for _, q := range []struct {
		conv int64
		tool string
		at   time.Time
	}{
		{other.ID, "deploy", now},
		{b.ConversationID, "restart", now},
		{b.ConversationID, "deploy", until},
		{b.ConversationID, "deploy", until.Add(time.Second)},
	} {
		if a, err := firstActiveGrant(ctx, db, q.conv, q.tool, q.at); !errors.Is(err, confirm.ErrNotFound) {
			t.Errorf("ActiveGrant(%d, %s, %v) = %+v, %v; want ErrNotFound", q.conv, q.tool, q.at, a, err)
		}
	}
	// The newest active grant wins.
	b3 := batchIn(t, db, b.ConversationID, later(), confirm.DecisionPending)
	newer := &confirm.Grant{ID: "g2", Tool: "deploy", ExpiresAt: until.Add(-time.Minute)}
	decide(t, clockAt(db, now.Add(time.Minute)), confirm.Decide{BatchID: b3.ID, Key: "k0", Status: confirm.DecisionAllowed, By: "U-carol", Grant: newer})
	if newer.CreatedBy != "U-carol" {
		t.Errorf("CreatedBy defaulted to %q, want the decider", newer.CreatedBy)
	}
	if a, err := firstActiveGrant(ctx, db, b.ConversationID, "deploy", now.Add(2*time.Minute)); err != nil || a.ID != "g2" {
		t.Fatalf("ActiveGrant with two = %+v, %v; want the newest g2", a, err)
	}
	all, err := db.Grants(ctx, confirm.GrantFilter{ConversationID: b.ConversationID})
	if err != nil || len(all) != 2 || all[0].ID != "g2" || all[1].ID != "g1" {
		t.Fatalf("Grants = %+v, %v; want g2, g1", all, err)
	}
	if other, err := db.Grants(ctx, confirm.GrantFilter{ConversationID: other.ID}); err != nil || len(other) != 0 {
		t.Fatalf("Grants of another conversation = %+v, %v", other, err)
	}

	if err := db.SetGrantNoticeRef(ctx, "g1", "C1/1234.5"); err != nil {
		t.Fatal(err)
	}
	if g, _ := db.Grant(ctx, "g1"); g.NoticeRef != "C1/1234.5" {
		t.Errorf("notice ref = %q", g.NoticeRef)
	}
	if err := db.SetGrantNoticeRef(ctx, "nope", "x"); !errors.Is(err, confirm.ErrNotFound) {
		t.Errorf("SetGrantNoticeRef(missing) = %v, want ErrNotFound", err)
	}

	// Revoke: once.
	revokedAt := now.Add(3 * time.Minute)
	if ok, err := clockAt(db, revokedAt).RevokeGrant(ctx, "g2", "U-dave"); err != nil || !ok {
		t.Fatalf("RevokeGrant = %v, %v", ok, err)
	}
	if ok, err := clockAt(db, revokedAt.Add(time.Second)).RevokeGrant(ctx, "g2", "U-erin"); err != nil || ok {
		t.Fatalf("second RevokeGrant = %v, %v; want false", ok, err)
	}
	if ok, err := clockAt(db, revokedAt).RevokeGrant(ctx, "nope", "U-erin"); err != nil || ok {
		t.Fatalf("RevokeGrant(missing) = %v, %v; want false", ok, err)
	}
	g2, err := db.Grant(ctx, "g2")
	if err != nil || g2.RevokedBy != "U-dave" || g2.RevokedAt == nil || !g2.RevokedAt.Equal(utc(revokedAt)) || g2.Active(revokedAt) {
		t.Fatalf("revoked grant = %+v, %v", g2, err)
	}
	if a, err := firstActiveGrant(ctx, db, b.ConversationID, "deploy", revokedAt.Add(time.Second)); err != nil || a.ID != "g1" {
		t.Fatalf("ActiveGrant after revoking g2 = %+v, %v; want g1", a, err)
	}
	active, err := db.Grants(ctx, confirm.GrantFilter{ConversationID: b.ConversationID, ActiveAt: revokedAt.Add(time.Second)})
	if err != nil || len(active) != 1 || active[0].ID != "g1" {
		t.Fatalf("active Grants = %+v, %v; want g1", active, err)
	}

	created := auditOf(t, db, b.ConversationID, confirm.AuditGrantCreated)
	if len(created) != 2 || created[0].Actor != "U-bob" || created[0].CallKey != "q" || created[0].BatchID != b.ID {
		t.Fatalf("grant_created events = %+v", created)
	}
	var d struct {
		GrantID   string    `json:"grant_id"`
		Tool      string    `json:"tool"`
		ExpiresAt time.Time `json:"expires_at"`
	}
	if err := json.Unmarshal([]byte(created[0].Detail), &d); err != nil || d.GrantID != "g1" || d.Tool != "deploy" || !d.ExpiresAt.Equal(utc(until)) {
		t.Errorf("grant_created detail = %s (%v)", created[0].Detail, err)
	}
	revoked := auditOf(t, db, b.ConversationID, confirm.AuditGrantRevoked)
	if len(revoked) != 1 || revoked[0].Actor != "U-dave" || !strings.Contains(revoked[0].Detail, `"g2"`) {
		t.Fatalf("grant_revoked events = %+v", revoked)
	}

	// A grant needs an expiry; a deny never stores one.
	if _, err := clockAt(db, now).Decide(ctx, confirm.Decide{BatchID: b3.ID, Key: "k0", Status: confirm.DecisionAllowed, By: "U", Grant: &confirm.Grant{}}); err == nil {
		t.Error("Decide with a grant without expiry succeeded")
	}
	b4 := batchIn(t, db, b.ConversationID, later(), confirm.DecisionPending)
	decide(t, db, confirm.Decide{BatchID: b4.ID, Key: "k0", Status: confirm.DecisionDenied, By: "U", Grant: &confirm.Grant{ID: "g-deny", ExpiresAt: until}})
	if _, err := db.Grant(ctx, "g-deny"); !errors.Is(err, confirm.ErrNotFound) {
		t.Errorf("a deny stored a grant: %v", err)
	}
}

// testPauseDecisions: calls decided when the reply pauses, by a rule or a
// grant, with every new call field round-tripped.
func testPauseDecisions(t *testing.T, db *DB) {
	ctx := t.Context()
	conv := newConversation(t, db)
	restrict := []confirm.Approvers{{Users: []string{"U-ops"}, Groups: []string{"S-sre"}}, {Roles: []string{"R-admin"}}}
	reasons := []confirm.Reason{{Kind: confirm.ReasonRule, Rule: "two-person"}, {Kind: confirm.ReasonToolFlag}}
	b := &confirm.Batch{ConversationID: conv.ID, RequestedBy: "U-author", ExpiresAt: later(), Calls: []confirm.Call{
		{Key: "ask", Position: 0, Tool: "deploy", Args: json.RawMessage(`{}`), Flagged: true, Approvals: 2, Restrict: restrict,
			Grantable: true, Reasons: reasons},
		{Key: "refused", Position: 1, Tool: "drop_db", Args: json.RawMessage(`{}`), Decision: confirm.DecisionDeniedByRule,
			DecidedBy: "rule:no-drops", DenyMessage: confirm.DefaultRuleDenyMessage("no-drops"),
			Reasons: []confirm.Reason{{Kind: confirm.ReasonRule, Rule: "no-drops"}}},
		{Key: "granted", Position: 2, Tool: "restart", Args: json.RawMessage(`{}`), Decision: confirm.DecisionAllowedByGrant,
			DecidedBy: "grant:g-7", GrantID: "g-7"},
		{Key: "flagged0", Position: 3, Tool: "deploy", Args: json.RawMessage(`{}`), Flagged: true}, // approvals 0: stored 1
		{Key: "plain", Position: 4, Tool: "status", Args: json.RawMessage(`{}`), Decision: confirm.DecisionAllowedByPolicy},
	}}
	seedGrant(t, db, conv.ID, "g-7", "restart")
	if err := db.CreateBatch(ctx, b, confirm.Message{Role: "assistant", Body: json.RawMessage(`1`)}); err != nil {
		t.Fatal(err)
	}
	if b.Calls[3].Approvals != 1 {
		t.Errorf("CreateBatch left approvals %d on a flagged call, want 1", b.Calls[3].Approvals)
	}
	got := loadBatch(t, db, b.ID)
	ask := callByKey(t, got, "ask")
	if ask.Approvals != 2 || !ask.Grantable || fmt.Sprint(ask.Restrict) != fmt.Sprint(restrict) || fmt.Sprint(ask.Reasons) != fmt.Sprint(reasons) ||
		ask.Decision != confirm.DecisionPending {
		t.Errorf("ask = %+v", ask)
	}
	refused := callByKey(t, got, "refused")
	if refused.Decision != confirm.DecisionDeniedByRule || refused.DecidedBy != "rule:no-drops" || refused.Approvals != 0 || refused.Grantable ||
		refused.DenyMessage != confirm.DefaultRuleDenyMessage("no-drops") || refused.Decision.Allowed() {
		t.Errorf("refused = %+v", refused)
	}
	granted := callByKey(t, got, "granted")
	if granted.Decision != confirm.DecisionAllowedByGrant || granted.GrantID != "g-7" || granted.DecidedBy != "grant:g-7" || !granted.Decision.Allowed() {
		t.Errorf("granted = %+v", granted)
	}
	if c := callByKey(t, got, "flagged0"); c.Approvals != 1 {
		t.Errorf("flagged call stored with approvals %d, want 1", c.Approvals)
	}
	if c := callByKey(t, got, "plain"); c.Approvals != 0 || c.Restrict != nil || c.Reasons != nil {
		t.Errorf("plain = %+v", c)
	}

	kinds := strings.Join(auditKinds(t, db, conv.ID), " ")
	want := "tool_call:ask tool_call:refused tool_call:granted tool_call:flagged0 tool_call:plain decision:refused grant_used:granted approval_request:"
	if kinds != want {
		t.Fatalf("audit = %s\nwant    %s", kinds, want)
	}
	dec := auditOf(t, db, conv.ID, confirm.AuditDecision)[0]
	var d struct{ Status, Message, Rule string }
	if err := json.Unmarshal([]byte(dec.Detail), &d); err != nil || d.Status != "denied_by_rule" || d.Rule != "no-drops" ||
		d.Message != confirm.DefaultRuleDenyMessage("no-drops") || dec.Actor != "rule:no-drops" || dec.Tool != "drop_db" {
		t.Errorf("rule decision event = %+v (%v)", dec, err)
	}
	used := auditOf(t, db, conv.ID, confirm.AuditGrantUsed)[0]
	if !strings.Contains(used.Detail, `"grant_id":"g-7"`) || used.Tool != "restart" {
		t.Errorf("grant_used event = %+v", used)
	}
	var tc map[string]json.RawMessage
	if err := json.Unmarshal([]byte(auditOf(t, db, conv.ID, confirm.AuditToolCall)[0].Detail), &tc); err != nil ||
		string(tc["approvals"]) != "2" || !strings.Contains(string(tc["reasons"]), `"two-person"`) {
		t.Errorf("tool_call detail of ask = %v (%v)", tc, err)
	}

	// A call a grant allowed runs; a refused one never does. Deciding the
	// rest lets the batch be claimed.
	decide(t, db, confirm.Decide{BatchID: b.ID, Key: "flagged0", Status: confirm.DecisionDenied, By: "U"})
	decide(t, db, confirm.Decide{BatchID: b.ID, Key: "ask", Status: confirm.DecisionDenied, By: "U", Reason: "no"})
	if ok, err := db.ClaimBatch(ctx, b.ID, "w"); err != nil || !ok {
		t.Fatalf("ClaimBatch = %v, %v", ok, err)
	}
	if ok, err := db.StartRun(ctx, b.ID, "granted"); err != nil || !ok {
		t.Errorf("StartRun(granted) = %v, %v", ok, err)
	}
	if ok, err := db.StartRun(ctx, b.ID, "refused"); err != nil || ok {
		t.Errorf("StartRun(refused) = %v, %v", ok, err)
	}
	if c := callByKey(t, loadBatch(t, db, b.ID), "ask"); c.DenyReason != "no" {
		t.Errorf("deny reason = %q", c.DenyReason)
	}
}

// testAbandonGranted: an abandoned reply runs nothing, a grant's call
// included.
func testAbandonGranted(t *testing.T, db *DB) {
	ctx := t.Context()
	conv := newConversation(t, db)
	b := &confirm.Batch{ConversationID: conv.ID, ExpiresAt: later(), Calls: []confirm.Call{
		{Key: "g", Position: 0, Tool: "restart", Args: json.RawMessage(`{}`), Decision: confirm.DecisionAllowedByGrant, GrantID: "x"},
		{Key: "p", Position: 1, Tool: "deploy", Args: json.RawMessage(`{}`), Flagged: true},
	}}
	seedGrant(t, db, conv.ID, "x", "restart")
	if err := db.CreateBatch(ctx, b, confirm.Message{Role: "assistant", Body: json.RawMessage(`1`)}); err != nil {
		t.Fatal(err)
	}
	if n, err := db.AbandonPending(ctx, b.ID, "U", confirm.MovedOnMessage); err != nil || n != 2 {
		t.Fatalf("AbandonPending = %d, %v; want 2", n, err)
	}
	if c := callByKey(t, loadBatch(t, db, b.ID), "g"); c.Decision != confirm.DecisionDenied {
		t.Fatalf("granted call of an abandoned reply = %+v", c)
	}
}

// firstActiveGrant is ActiveGrants' newest grant, or ErrNotFound.
func firstActiveGrant(ctx context.Context, db *DB, conv int64, tool string, at time.Time) (*confirm.Grant, error) {
	gs, err := clockAt(db, at).ActiveGrants(ctx, conv, tool)
	if err != nil {
		return nil, err
	}
	if len(gs) == 0 {
		return nil, confirm.ErrNotFound
	}
	return &gs[0], nil
}

// seedGrant stores an active grant as an earlier "Allow for" would have,
// for batches planned with it.
func seedGrant(t *testing.T, db *DB, convID int64, id, tool string) {
	t.Helper()
	now := time.Now().UTC()
	if _, err := db.x.ExecContext(t.Context(), db.q(`INSERT INTO grants (`+grantColumns+`) VALUES (?, ?, ?, 'U-granter', ?, ?, '', NULL, '', '', '', 'U-author', '[]', '')`),
		id, convID, tool, db.ts(now), db.ts(now.Add(time.Hour))); err != nil {
		t.Fatalf("seed grant: %v", err)
	}
}

// testQuorumAssurance: votes are stored with how they were made, and a
// quorum counts only the votes of the assurance the call needs now. A vote
// made in chat before step_up asked for sso does not count: its voter
// votes again on the page, which counts once; a vote made with less than
// is needed is refused by the store and changes nothing.
func testQuorumAssurance(t *testing.T, db *DB) {
	b := quorumBatch(t, db, 2, later())
	vote := func(by string, via, need confirm.Assurance) (confirm.DecideResult, error) {
		return db.Decide(t.Context(), confirm.Decide{BatchID: b.ID, Key: "q", Status: confirm.DecisionAllowed, By: by, Assurance: via, Need: need})
	}
	// Alice votes in chat while the tier needs a chat click.
	if res, err := vote("U-alice", "", confirm.AssuranceChat); err != nil || !res.Won || res.Votes != 1 {
		t.Fatalf("a chat vote = %+v, %v", res, err)
	}
	// step_up now asks for sso: a chat vote is refused, nothing changes.
	if _, err := vote("U-bob", "", confirm.AssuranceSSO); err == nil {
		t.Fatal("a chat vote where sso is needed was stored")
	}
	if c := callByKey(t, loadBatch(t, db, b.ID), "q"); voters(c) != "U-alice" || c.Votes[0].Via != "" {
		t.Fatalf("votes after a refused vote: %+v", c.Votes)
	}
	// Bob's sso vote is the only one that counts: the call still waits.
	res, err := vote("U-bob", confirm.AssuranceSSO, confirm.AssuranceSSO)
	if want := (confirm.DecideResult{Won: true, Votes: 1, Required: 2}); err != nil || res != want {
		t.Fatalf("an sso vote after a chat vote = %+v, %v; want %+v", res, err, want)
	}
	// Bob again: already voted, and nothing changes.
	if res, err := vote("U-bob", confirm.AssurancePasskey, confirm.AssuranceSSO); err != nil || !res.AlreadyVoted || res.Votes != 1 {
		t.Fatalf("bob again = %+v, %v", res, err)
	}
	// Alice again, with a passkey: her vote now counts, and decides.
	res, err = db.Decide(t.Context(), confirm.Decide{BatchID: b.ID, Key: "q", Status: confirm.DecisionAllowed, By: "U-alice",
		Assurance: confirm.AssurancePasskey, Credential: "cred-1", Need: confirm.AssuranceSSO})
	if want := (confirm.DecideResult{Won: true, Decided: true, Votes: 2, Required: 2}); err != nil || res != want {
		t.Fatalf("alice's vote again with a passkey = %+v, %v; want %+v", res, err, want)
	}
	c := callByKey(t, loadBatch(t, db, b.ID), "q")
	if c.Decision != confirm.DecisionAllowed || c.DecidedBy != "U-alice" || c.DecidedVia != confirm.AssurancePasskey || len(c.Votes) != 2 {
		t.Fatalf("the call = %+v (votes %+v)", c, c.Votes)
	}
	via := map[string]confirm.Assurance{}
	for _, v := range c.Votes {
		via[v.By] = v.Via
	}
	if via["U-alice"] != confirm.AssurancePasskey || via["U-bob"] != confirm.AssuranceSSO {
		t.Fatalf("the votes' assurances = %v", via)
	}
	approvals := auditOf(t, db, b.ConversationID, confirm.AuditApproval)
	var got []string
	for _, e := range approvals {
		var d struct {
			Votes      int
			Assurance  string
			Credential string
		}
		_ = json.Unmarshal([]byte(e.Detail), &d)
		got = append(got, fmt.Sprintf("%s:%d:%s%s", e.Actor, d.Votes, d.Assurance, d.Credential))
	}
	if want := "U-alice:1: U-bob:1:sso U-alice:2:passkeycred-1"; strings.Join(got, " ") != want {
		t.Fatalf("approval events %q, want %q", strings.Join(got, " "), want)
	}
	// The one-approval call: an allow made with less than needed is refused.
	if _, err := db.Decide(t.Context(), confirm.Decide{BatchID: b.ID, Key: "other", Status: confirm.DecisionAllowed, By: "U-carol",
		Assurance: confirm.AssuranceSSO, Need: confirm.AssurancePasskey}); err == nil {
		t.Fatal("an sso allow where a passkey is needed decided the call")
	}
	if _, err := db.DecideAll(t.Context(), []confirm.Decide{{BatchID: b.ID, Key: "other", Status: confirm.DecisionAllowed, By: "U-carol",
		Need: confirm.AssurancePasskey}}); err == nil {
		t.Fatal("a chat Allow all where a passkey is needed decided the call")
	}
	if c := callByKey(t, loadBatch(t, db, b.ID), "other"); c.Decision != confirm.DecisionPending {
		t.Fatalf("the call after refused allows: %+v", c)
	}
}
