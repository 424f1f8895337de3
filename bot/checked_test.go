package bot_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/airlockhq/airlock/bot"
	cardpkg "github.com/airlockhq/airlock/card"
	"github.com/airlockhq/airlock/confirm"
	"github.com/airlockhq/airlock/tools"
)

// cardOfBatch is the newest rendering of a batch's card.
func (h *harness) cardOfBatch(batchID string) cardpkg.Card {
	h.t.Helper()
	h.plat.Mu.Lock()
	defer h.plat.Mu.Unlock()
	for i := len(h.plat.Updates) - 1; i >= 0; i-- {
		if h.plat.Updates[i].BatchID == batchID {
			return h.plat.Updates[i]
		}
	}
	for i := len(h.plat.Cards) - 1; i >= 0; i-- {
		if h.plat.Cards[i].BatchID == batchID {
			return h.plat.Cards[i]
		}
	}
	h.t.Fatalf("no card of batch %s", batchID)
	return cardpkg.Card{}
}

func (h *harness) auditCount(kind confirm.AuditKind) int {
	h.t.Helper()
	evs, err := h.store.AuditEvents(context.Background(), confirm.AuditFilter{})
	if err != nil {
		h.t.Fatal(err)
	}
	n := 0
	for _, e := range evs {
		if e.Kind == kind {
			n++
		}
	}
	return n
}

// A grant for a tool does not cover its calls while a run of it has an
// unknown outcome nobody checked: the next call gets a card that offers
// no grant. Only an approver's "I checked — go on" on the card counts
// (not a stranger's, the requester's, a bot's, a forged or garbled
// reference, nor a click on another message), a second click changes
// nothing and is audited once; after it the grant covers the tool again.
func TestUncheckedUnknownOutcomeGatesTheToolDespiteAGrant(t *testing.T) {
	restart := &scriptedTool{fakeTool: fakeTool{Name: "restart", Confirms: true}, outcomes: []func() (string, error){unknownErr}}
	h := newHarnessExtra(t, map[string]tools.Tool{"restart": restart}, func(c *bot.Config) { c.GrantFor = time.Hour })
	ctx := context.Background()

	h.push(calls(tc("", "restart", `{"svc": "api"}`)), text("unsure"))
	h.turn("bob", "restart api")
	first := h.plat.LastCard()
	if err := h.bot.Decide(ctx, bot.Click{Platform: "test", Channel: "C1", User: "alice", Ref: first.Calls[0].Ref, Message: cardMsg(first.Calls[0].Ref), Allow: true, Grant: true}); err != nil {
		t.Fatal(err)
	}
	if restart.n.Load() != 1 {
		t.Fatalf("restart ran %d times", restart.n.Load())
	}
	done := h.cardOfBatch(first.BatchID).Calls[0]
	if done.Run != confirm.RunUnknown || done.Check == nil || done.Check.Done() || !strings.HasPrefix(done.Check.Ref, "checked-") {
		t.Fatalf("the unknown run's card = %+v (check %+v); want an unchecked check with a checked- reference", done, done.Check)
	}
	checkRef := done.Check.Ref

	// A retry with other arguments, which the grant would cover: a card, no grant offered.
	h.push(calls(tc("", "restart", `{"svc": "api", "note": "retry"}`)), text("again"))
	h.turn("bob", "try again")
	if len(h.plat.Cards) != 2 || restart.n.Load() != 1 {
		t.Fatalf("cards %d, runs %d: the grant covered a call of a tool with an unchecked unknown run", len(h.plat.Cards), restart.n.Load())
	}
	second := h.plat.Cards[1]
	if c := second.Calls[0]; c.Grantable || !hasReason(c.Reasons, confirm.ReasonUnknownOutcome) {
		t.Fatalf("retry card call %+v: want not grantable, reason unknown_outcome", c)
	}

	click := func(user, ref, msg string) bot.Click {
		return bot.Click{Platform: "test", Channel: "C1", User: user, Ref: ref, Message: msg}
	}
	onFirst := "card-" + first.BatchID
	rejected := h.auditCount(confirm.AuditRejectedClick)
	for _, tc := range []struct {
		name string
		c    bot.Click
		want error
	}{
		{"a stranger", click("mallory", checkRef, onFirst), bot.ErrNotApprover},
		{"the requester, not an approver", click("bob", checkRef, onFirst), bot.ErrNotApprover},
		{"a bot", func() bot.Click { c := click("alice", checkRef, onFirst); c.IsBot = true; return c }(), bot.ErrNotApprover},
		{"another message", click("alice", checkRef, "card-"+second.BatchID), bot.ErrWrongChannel},
		{"another platform", func() bot.Click { c := click("alice", checkRef, onFirst); c.Platform = "other"; return c }(), bot.ErrWrongChannel},
		{"a call reference", click("alice", first.Calls[0].Ref, onFirst), confirm.ErrBadRef},
		{"a position past the batch", click("alice", confirm.CheckedRef(first.BatchID, 7), onFirst), confirm.ErrBadRef},
		{"garbled", click("alice", "checked-"+strings.ToUpper(first.BatchID)+".0", onFirst), confirm.ErrBadRef},
		{"cut", click("alice", checkRef[:len(checkRef)-2], onFirst), confirm.ErrBadRef},
		{"an unknown batch", click("alice", confirm.CheckedRef("zzzzzzzz", 0), onFirst), confirm.ErrNotFound},
	} {
		// A minute apart: rejected clicks of one person, batch and reason
		// within a minute are coalesced into one audit row.
		h.now.Add(int64(61 * time.Second))
		err := h.bot.MarkChecked(ctx, tc.c)
		if !errors.Is(err, tc.want) || !bot.IsRefusal(err) {
			t.Errorf("%s: MarkChecked = %v, want %v (a refusal)", tc.name, err, tc.want)
		}
		rejected++
		if n := h.auditCount(confirm.AuditRejectedClick); n != rejected {
			t.Errorf("%s: %d rejected clicks audited, want %d", tc.name, n, rejected)
			rejected = n
		}
	}
	if n := h.auditCount(confirm.AuditUnknownChecked); n != 0 {
		t.Fatalf("%d unknown_checked events after refused clicks", n)
	}
	if unknown, err := h.store.UnknownCalls(ctx, conversationOf(t, h).ID); err != nil || len(unknown) != 1 {
		t.Fatalf("refused clicks changed the unknown runs: %+v, %v", unknown, err)
	}
	// An approver's "I checked" on a call whose run is not unknown: nothing.
	if err := h.bot.MarkChecked(ctx, click("alice", confirm.CheckedRef(second.BatchID, 0), "card-"+second.BatchID)); !errors.Is(err, bot.ErrAlreadyChecked) {
		t.Fatalf("checking a call that never ran = %v, want ErrAlreadyChecked", err)
	}

	// Alice checked: the card says so, once; a second click changes nothing.
	if err := h.bot.MarkChecked(ctx, click("alice", checkRef, onFirst)); err != nil {
		t.Fatalf("approver's check: %v", err)
	}
	if k := h.cardOfBatch(first.BatchID).Calls[0].Check; k == nil || !k.Done() || k.By != "alice" ||
		!strings.Contains(h.cardOfBatch(first.BatchID).Calls[0].Outcome(), "Checked by alice at 12:10:10 UTC") {
		t.Fatalf("card after the check: %+v", k)
	}
	if err := h.bot.MarkChecked(ctx, click("alice", checkRef, onFirst)); !errors.Is(err, bot.ErrAlreadyChecked) {
		t.Fatalf("second check = %v, want ErrAlreadyChecked", err)
	}
	if n := h.auditCount(confirm.AuditUnknownChecked); n != 1 {
		t.Fatalf("%d unknown_checked events after a double click, want 1", n)
	}

	// The policy judges restart as usual again: the grant covers it.
	h.turn("bob", "never mind")
	h.push(calls(tc("", "restart", `{"svc": "web"}`)), text("restarted"))
	h.turn("bob", "restart web")
	if len(h.plat.Cards) != 2 || restart.n.Load() != 2 {
		t.Fatalf("after the check: cards %d, runs %d; want the grant to cover the call", len(h.plat.Cards), restart.n.Load())
	}
}

func hasReason(rs []confirm.Reason, kind confirm.ReasonKind) bool {
	for _, r := range rs {
		if r.Kind == kind {
			return true
		}
	}
	return false
}
