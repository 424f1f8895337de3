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

// Clicks racing on every call of a batch at once, each call clicked many
// times: whichever click decides the batch, each call is decided once,
// each runs once, in the model's order, and the model is asked once for
// the results.
func TestRacingClicksOnEveryCallRunEachOnce(t *testing.T) {
	for round := range 5 {
		h := newHarness(t, "")
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

// A panic after the deciding click (recovered, as the adapters recover a
// worker's) does not keep the conversation: the next turn in the thread
// goes ahead, and the sweep for dead work runs the decided batch, once.
func TestAPanicAfterTheDecidingClickReleasesTheConversation(t *testing.T) {
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
		t.Fatal("the next turn waited on the conversation of the panicked click")
	}
	h.push(text("I could not confirm the deploy"))
	if err := h.bot.RecoverBatches(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := h.tools["deploy"].Runs.Load(); n != 1 {
		t.Fatalf("the allowed call ran %d times after the panic, want once", n)
	}
	b, err := h.store.Batch(context.Background(), h.plat.Cards[0].BatchID)
	if err != nil || b.Status != confirm.BatchDone || b.Calls[0].Run != confirm.RunSucceeded {
		t.Fatalf("batch after recovery: %+v, %v; want done, its call run", b, err)
	}
}
