package bot_test

import (
	"context"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/airlockhq/airlock/bot"
	"github.com/airlockhq/airlock/confirm"
	"github.com/airlockhq/airlock/internal/racetest"
)

// claimCounter counts the claims a runner makes after a batch was decided.
type claimCounter struct {
	confirm.Store
	claims atomic.Int64
}

func (c *claimCounter) ClaimBatch(ctx context.Context, batchID, worker string) (bool, error) {
	c.claims.Add(1)
	return c.Store.ClaimBatch(ctx, batchID, worker)
}

func (c *claimCounter) ClaimBatchStarting(ctx context.Context, batchID, worker, key string) (bool, bool, error) {
	c.claims.Add(1)
	return c.Store.ClaimBatchStarting(ctx, batchID, worker, key)
}

func countingClaims(t *testing.T) (*harness, *claimCounter) {
	var cc *claimCounter
	h := newHarnessWith(t, "", func(c *bot.Config) {
		cc = &claimCounter{Store: c.Store}
		c.Store = cc
	})
	return h, cc
}

// The click that decides a batch claims it in the same write: the batch
// runs without a claim of its own; a click that leaves a call pending
// claims nothing.
func TestTheDecidingClickClaimsTheBatch(t *testing.T) {
	h, cc := countingClaims(t)
	h.push(calls(tc("a", "deploy", `{"n":1}`), tc("b", "deploy", `{"n":2}`)), text("deployed twice"))
	h.turn("bob", "deploy twice")
	if err := h.click("alice", 1, true, ""); err != nil {
		t.Fatal(err)
	}
	batchID := h.plat.LastCard().BatchID
	if b, err := h.store.Batch(context.Background(), batchID); err != nil || b.Status != confirm.BatchPending || b.ClaimedBy != "" {
		t.Fatalf("after the first of two clicks: %+v, %v", b, err)
	}
	if err := h.click("alice", 2, true, ""); err != nil {
		t.Fatal(err)
	}
	if n := h.tools["deploy"].Runs.Load(); n != 2 || h.plat.LastPost() != "deployed twice" {
		t.Fatalf("runs %d, post %q", n, h.plat.LastPost())
	}
	if n := cc.claims.Load(); n != 0 {
		t.Fatalf("the runner claimed the batch again (%d claims)", n)
	}
	b, err := h.store.Batch(context.Background(), batchID)
	if err != nil || b.Status != confirm.BatchDone || b.Calls[0].Run != confirm.RunSucceeded || b.Calls[1].Run != confirm.RunSucceeded {
		t.Fatalf("batch after the run: %+v, %v", b, err)
	}
}

// A click on a batch whose conversation is busy (a turn or another
// batch's run holds it) decides without claiming; the batch then runs,
// once, when the conversation is free, claimed by its runner.
func TestAClickOnABusyConversationLeavesTheClaimToItsRunner(t *testing.T) {
	h, cc := countingClaims(t)
	h.push(calls(tc("a", "deploy", `{}`)), text("deployed"))
	h.turn("bob", "deploy")
	batchID := h.plat.LastCard().BatchID
	b, err := h.store.Batch(context.Background(), batchID)
	if err != nil {
		t.Fatal(err)
	}
	release := h.bot.HoldConversation(b.ConversationID)
	done := make(chan error, 1)
	go func() { done <- h.click("alice", 1, true, "") }()
	deadline := time.Now().Add(5 * time.Second)
	for {
		b, err = h.store.Batch(context.Background(), batchID)
		if err != nil {
			t.Fatal(err)
		}
		if b.Status != confirm.BatchPending {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the click was not recorded while the conversation was busy")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if b.Status != confirm.BatchDecided || b.ClaimedBy != "" || h.tools["deploy"].Runs.Load() != 0 {
		t.Fatalf("while the conversation is busy: batch %s claimed by %q, runs %d; want decided, unclaimed, none",
			b.Status, b.ClaimedBy, h.tools["deploy"].Runs.Load())
	}
	release()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if n := h.tools["deploy"].Runs.Load(); n != 1 || h.plat.LastPost() != "deployed" {
		t.Fatalf("runs %d, post %q", n, h.plat.LastPost())
	}
	if n := cc.claims.Load(); n != 1 {
		t.Fatalf("%d claims by the runner, want 1", n)
	}
}

// Clicks racing on every call of a batch at once, each call clicked many
// times: whichever click decides the batch, and whether it claims it or
// leaves it to its runner, each call is decided once, each runs once, in
// the model's order, and the model is asked once for the results.
func TestRacingClicksOnEveryCallRunEachOnce(t *testing.T) {
	for round := range 5 {
		h, _ := countingClaims(t)
		h.push(calls(tc("a", "deploy", `{"n":1}`), tc("b", "deploy", `{"n":2}`), tc("c", "deploy", `{"n":3}`)), text("all three done"))
		h.turn("bob", "deploy thrice")
		card := h.plat.LastCard()
		asked := len(h.model.Requests())
		var won atomic.Int64
		racetest.AtOnce(30, func(i int) {
			ref := card.Calls[i%3].Ref
			if err := h.bot.Decide(context.Background(), bot.Click{Platform: "test", Channel: "C1", User: "alice", Ref: ref, Message: cardMsg(ref), Allow: true}); err == nil {
				won.Add(1)
			}
		})
		if won.Load() != 3 || h.tools["deploy"].Runs.Load() != 3 {
			t.Fatalf("round %d: %d clicks counted, %d runs; want 3 and 3", round, won.Load(), h.tools["deploy"].Runs.Load())
		}
		h.tools["deploy"].Mu.Lock()
		args := slices.Clone(h.tools["deploy"].Args)
		h.tools["deploy"].Mu.Unlock()
		if !slices.Equal(args, []string{`{"n":1}`, `{"n":2}`, `{"n":3}`}) {
			t.Fatalf("round %d: ran %v, want the model's order", round, args)
		}
		if n := len(h.model.Requests()) - asked; n != 1 || h.plat.LastPost() != "all three done" {
			t.Fatalf("round %d: the model was asked %d times after the clicks, last post %q", round, n, h.plat.LastPost())
		}
	}
}

// A panic after the deciding click's claim (recovered, as the adapters
// recover a worker's) does not keep the conversation: the next turn in
// the thread goes ahead, and the sweep for dead work finishes the batch,
// its started call unknown, never run.
func TestAPanicAfterTheClaimReleasesTheConversation(t *testing.T) {
	var crashed atomic.Bool
	h := newHarnessWith(t, "", func(c *bot.Config) {
		c.SingleProcess = true // the in-process lock alone, as on SQLite
		c.Trace = func(point string) {
			if point == "decided" && crashed.CompareAndSwap(false, true) {
				panic("boom")
			}
		}
	})
	h.push(calls(tc("a", "deploy", `{}`)))
	h.turn("bob", "deploy")
	func() {
		defer func() {
			if r := recover(); r != "boom" {
				t.Fatalf("recovered %v", r)
			}
		}()
		_ = h.click("alice", 1, true, "")
	}()
	h.push(text("the status is fine"))
	done := make(chan struct{})
	go func() {
		defer close(done)
		h.turn("bob", "and the status?")
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("the next turn waited on the conversation the panicked click had claimed")
	}
	h.push(text("I could not confirm the deploy"))
	if err := h.bot.RecoverBatches(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := h.tools["deploy"].Runs.Load(); n != 0 {
		t.Fatalf("the started call ran %d times after the panic", n)
	}
	b, err := h.store.Batch(context.Background(), h.plat.Cards[0].BatchID)
	if err != nil || b.Status != confirm.BatchDone || b.Calls[0].Run != confirm.RunUnknown {
		t.Fatalf("batch after recovery: %+v, %v; want done, its call unknown", b, err)
	}
}
