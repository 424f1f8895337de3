package storage

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/airlockhq/airlock/confirm"
)

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
	if _, err := db.Decide(ctx, confirm.Decide{BatchID: "nope", Key: "k0", Status: confirm.DecisionAllowed}); !errors.Is(err, confirm.ErrNotFound) {
		t.Errorf("Decide(missing batch) error = %v, want ErrNotFound", err)
	}
	if _, err := db.Decide(ctx, confirm.Decide{BatchID: b.ID, Key: "nope", Status: confirm.DecisionAllowed}); !errors.Is(err, confirm.ErrNotFound) {
		t.Errorf("Decide(missing call) error = %v, want ErrNotFound", err)
	}
	if _, err := db.Decide(ctx, confirm.Decide{BatchID: b.ID, Key: "k1", Status: confirm.DecisionPending}); err == nil {
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
	if _, err := db.Decide(ctx, confirm.Decide{BatchID: b.ID, Key: "nope", Status: confirm.DecisionAllowed}); !errors.Is(err, confirm.ErrNotFound) {
		t.Errorf("Decide(missing call of decided batch) error = %v, want ErrNotFound", err)
	}
}

func testDecideAfterExpiry(t *testing.T, db *DB) {
	expires := time.Now().Add(time.Minute).Truncate(time.Millisecond)
	b := newBatch(t, db, expires, confirm.DecisionPending, confirm.DecisionPending)
	for _, now := range []time.Time{expires, expires.Add(time.Millisecond), expires.Add(time.Hour)} {
		if res := decide(t, clockAt(db, now), confirm.Decide{BatchID: b.ID, Key: "k0", Status: confirm.DecisionAllowed, By: "U"}); res.Won {
			t.Fatalf("Decide at %v (expiry %v) won", now, expires)
		}
	}
	got := loadBatch(t, db, b.ID)
	if c := callByKey(t, got, "k0"); c.Decision != confirm.DecisionPending || c.DecidedBy != "" {
		t.Fatalf("expired call changed: %+v", c)
	}
	if res := decide(t, clockAt(db, expires.Add(-time.Millisecond)), confirm.Decide{BatchID: b.ID, Key: "k1", Status: confirm.DecisionAllowed, By: "U"}); !res.Won {
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

	if ids, err := clockAt(db, expires.Add(-time.Second)).ExpiredBatches(ctx); err != nil || len(ids) != 0 {
		t.Fatalf("ExpiredBatches before expiry = %v, %v", ids, err)
	}
	after := expires.Add(time.Second)
	ids, err := clockAt(db, after).ExpiredBatches(ctx)
	if err != nil || len(ids) != 1 || ids[0] != b.ID {
		t.Fatalf("ExpiredBatches after expiry = %v, %v; want [%s]", ids, err, b.ID)
	}
	n, err := clockAt(db, after).ExpirePending(ctx, b.ID, "airlock", confirm.ExpiredMessage)
	if err != nil || n != 1 {
		t.Fatalf("ExpirePending = %d, %v; want 1", n, err)
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
	if n, err := clockAt(db, after).ExpirePending(ctx, b.ID, "airlock", confirm.ExpiredMessage); err != nil || n != 0 {
		t.Errorf("second ExpirePending = %d, %v; want 0", n, err)
	}
	if ids, err := clockAt(db, after.Add(time.Hour)).ExpiredBatches(ctx); err != nil || len(ids) != 0 {
		t.Errorf("ExpiredBatches after resolving = %v, %v", ids, err)
	}
	if n, err := clockAt(db, after).ExpirePending(ctx, "missing", "airlock", ""); err != nil || n != 0 {
		t.Errorf("ExpirePending(missing) = %d, %v; want 0, nil", n, err)
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
	n, err := clockAt(db, now).AbandonPending(ctx, b.ID, "U-author", confirm.MovedOnMessage)
	if err != nil || n != 3 {
		t.Fatalf("AbandonPending = %d, %v; want 3", n, err)
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

// The races below start every goroutine at once on a barrier.

func testRaceDecideSameCall(t *testing.T, db *DB) {
	b := newBatch(t, db, later(), confirm.DecisionPending, confirm.DecisionPending)
	const n = 50
	results, errs := race(n, func(i int) (confirm.DecideResult, error) {
		return db.Decide(t.Context(), confirm.Decide{
			BatchID: b.ID, Key: "k0", Status: confirm.DecisionAllowed, By: fmt.Sprintf("U%d", i),
		})
	})
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
		results, errs := race(n, func(i int) (confirm.DecideResult, error) {
			return db.Decide(t.Context(), confirm.Decide{
				BatchID: b.ID, Key: fmt.Sprintf("k%d", i), Status: confirm.DecisionAllowed, By: "U",
			})
		})
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
