package bot_test

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/airlockhq/airlock/bot"
	"github.com/airlockhq/airlock/confirm"
	"github.com/airlockhq/airlock/gateway"
)

func gatewayHarness(t *testing.T, path string, edit ...func(*gateway.Client)) (*harness, gateway.Approvals, gateway.Client) {
	t.Helper()
	cl := gateway.Client{Name: "alice-laptop", Token: strings.Repeat("a", 40), ActsFor: "carol",
		Channel: gateway.ChannelRef{Platform: "test", ID: "C1"}, Ask: []string{"Bash"}, Deny: []string{"WebFetch"}}
	for _, e := range edit {
		e(&cl)
	}
	gc := gateway.Config{Clients: []gateway.Client{cl}}
	gc.SetDefaults()
	h := newHarnessWith(t, path, func(c *bot.Config) { c.Gateway = gc })
	return h, h.bot.Gateway(), gc.Clients[0]
}

func gwRequest(tool, args string) gateway.Request {
	return gateway.Request{Tool: tool, Args: json.RawMessage(args), Session: "s1", CallID: "toolu_1", Reason: "deploying the fix"}
}

// A gateway request the client's ask list names posts the usual card in
// the client's channel; an approver's Allow makes it allowed; the
// identical retry is bound to it; it is consumed once, and its outcome
// recorded; nothing of it runs in Airlock.
func TestGatewayRequestAllowConsumeOnce(t *testing.T) {
	onBothDatabases(t, func(t *testing.T, driver, dsn string) {
		h, g, cl := gatewayHarness(t, dsn)
		ctx := context.Background()
		a, err := g.Request(ctx, cl, gwRequest("Bash", `{"command":"make deploy", "env":"prod"}`))
		if err != nil || a.Status != gateway.StatusPending {
			t.Fatalf("request: %+v %v", a, err)
		}
		card := h.plat.LastCard()
		if len(card.Calls) != 1 || card.Calls[0].Tool != "Bash" {
			t.Fatalf("card %+v", card)
		}
		if err := h.click("alice", 1, true, ""); err != nil {
			t.Fatal(err)
		}
		if a, _ = g.Get(ctx, cl, a.ID); a.Status != gateway.StatusAllowed || !strings.Contains(a.Reason, "alice") {
			t.Fatalf("after Allow: %+v", a)
		}
		// The retry, its keys in another order, binds to the same approval.
		b, err := g.Request(ctx, cl, gwRequest("Bash", `{"env":"prod","command":"make deploy"}`))
		if err != nil || b.ID != a.ID {
			t.Fatalf("retry: %+v %v, want %s", b, err, a.ID)
		}
		if _, err := g.Consume(ctx, cl, a.ID); err != nil {
			t.Fatalf("consume: %v", err)
		}
		if _, err := g.Consume(ctx, cl, a.ID); !errors.Is(err, gateway.ErrNotConsumable) {
			t.Fatalf("a second consume: %v", err)
		}
		if err := g.Result(ctx, cl, a.ID, true, "deployed"); err != nil {
			t.Fatalf("result: %v", err)
		}
		if got := h.ranCalls(); len(got) != 0 {
			t.Fatalf("Airlock ran %v", got)
		}
		// Consumed, a new identical request is a new approval.
		c, err := g.Request(ctx, cl, gwRequest("Bash", `{"command":"make deploy","env":"prod"}`))
		if err != nil || c.ID == a.ID || c.Status != gateway.StatusPending {
			t.Fatalf("after the consume: %+v %v", c, err)
		}
		if n, _ := g.Pending(ctx, cl); n != 1 {
			t.Fatalf("%d pending", n)
		}
		// Deny with a reason: the client reads the approver's words.
		h.plat.Mu.Lock()
		ref := h.plat.Cards[len(h.plat.Cards)-1].Calls[0].Ref
		h.plat.Mu.Unlock()
		if err := h.bot.Decide(ctx, bot.Click{Platform: "test", Channel: "C1", User: "alice", Ref: ref, Message: cardMsg(ref), Reason: "not on a Friday"}); err != nil {
			t.Fatal(err)
		}
		if c, _ = g.Get(ctx, cl, c.ID); c.Status != gateway.StatusDenied || !strings.Contains(c.Reason, "not on a Friday") {
			t.Fatalf("after Deny: %+v", c)
		}
		if _, err := g.Consume(ctx, cl, c.ID); !errors.Is(err, gateway.ErrNotConsumable) {
			t.Fatalf("a denied approval consumed: %v", err)
		}
	})
}

// The requester is the client's acts_for: with self-approval off, acts_for
// cannot approve its own agent's call; a deny's reason reaches the client;
// a tool on the deny list is denied without a card; a tool on no list is
// allowed by policy; another client's id is not found.
func TestGatewayRequesterDenyAndLists(t *testing.T) {
	h, g, cl := gatewayHarness(t, "", func(c *gateway.Client) { c.ActsFor = "alice" })
	ctx := context.Background()
	a, err := g.Request(ctx, cl, gwRequest("Bash", `{"command":"rm -rf /"}`))
	if err != nil {
		t.Fatal(err)
	}
	_ = h.click("alice", 1, true, "") // refused: alice is the requester
	if a, _ = g.Get(ctx, cl, a.ID); a.Status != gateway.StatusPending {
		t.Fatalf("the client's own person decided its agent's call with self-approval off: %+v", a)
	}
	if err := h.click("bob", 1, false, "not on prod"); err == nil {
		t.Fatal("bob, no approver of the channel, decided")
	}
	cards := func() int { h.plat.Mu.Lock(); defer h.plat.Mu.Unlock(); return len(h.plat.Cards) }
	posts := cards()
	d, err := g.Request(ctx, cl, gwRequest("WebFetch", `{"url":"https://evil.example"}`))
	if err != nil || d.Status != gateway.StatusDenied || !strings.Contains(d.Reason, "deny list") || cards() != posts {
		t.Fatalf("a denied tool: %+v %v (cards %d → %d)", d, err, posts, cards())
	}
	f, err := g.Request(ctx, cl, gwRequest("Read", `{"path":"README.md"}`))
	if err != nil || f.Status != gateway.StatusAllowed || f.Reason != "no rule asks" {
		t.Fatalf("a free tool: %+v %v", f, err)
	}
	other := cl
	other.Name = "bob-ci"
	if _, err := g.Get(ctx, other, a.ID); !errors.Is(err, gateway.ErrNotFound) {
		t.Fatalf("another client's approval: %v", err)
	}
}

// An approver's Edit… allows the call with other arguments: the client
// is given them, and consumes what was approved.
func TestGatewayEditedArguments(t *testing.T) {
	h, g, cl := gatewayHarness(t, "")
	ctx := context.Background()
	a, err := g.Request(ctx, cl, gwRequest("Bash", `{"command":"make deploy ENV=prod"}`))
	if err != nil {
		t.Fatal(err)
	}
	if err := h.bot.Edit(ctx, onCard(t, h, "alice", a.ID), `{"command":"make deploy ENV=staging"}`); err != nil {
		t.Fatal(err)
	}
	a, _ = g.Get(ctx, cl, a.ID)
	if a.Status != gateway.StatusAllowed || string(a.Args) != `{"command":"make deploy ENV=staging"}` {
		t.Fatalf("after the edit: %+v (args %s)", a, a.Args)
	}
	if c, err := g.Consume(ctx, cl, a.ID); err != nil || string(c.Args) != `{"command":"make deploy ENV=staging"}` {
		t.Fatalf("consume: %s %v", c.Args, err)
	}
}

// A restart while a request waits loses nothing: the new process finds
// the approval, the card's Allow counts, and it is consumed once.
func TestGatewayRequestSurvivesARestart(t *testing.T) {
	path := filepath.Join(t.TempDir(), "airlock.db")
	_, g1, cl := gatewayHarness(t, path)
	ctx := context.Background()
	a, err := g1.Request(ctx, cl, gwRequest("Bash", `{"command":"make deploy"}`))
	if err != nil {
		t.Fatal(err)
	}
	h2, g2, _ := gatewayHarness(t, path)
	if err := h2.bot.Recover(ctx); err != nil {
		t.Fatal(err)
	}
	if b, err := g2.Request(ctx, cl, gwRequest("Bash", `{"command":"make deploy"}`)); err != nil || b.ID != a.ID {
		t.Fatalf("the retry after the restart: %+v %v", b, err)
	}
	if err := h2.bot.Decide(ctx, allowOn(t, h2, "alice", a.ID)); err != nil {
		t.Fatal(err)
	}
	if _, err := g2.Consume(ctx, cl, a.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := g1.Consume(ctx, cl, a.ID); !errors.Is(err, gateway.ErrNotConsumable) {
		t.Fatalf("the old process consumed it again: %v", err)
	}
}

// A gateway batch is done once decided; a consumed call whose client never
// reports its outcome stays running on it, and the card says the client
// carried it out and has not reported; a worker that died while
// completing a batch leaves no "unknown" behind; the late result is
// recorded.
func TestGatewayConsumedAndNotReported(t *testing.T) {
	h, g, cl := gatewayHarness(t, "")
	ctx := context.Background()
	a, err := g.Request(ctx, cl, gwRequest("Bash", `{"command":"make deploy"}`))
	if err != nil {
		t.Fatal(err)
	}
	if err := h.click("alice", 1, true, ""); err != nil {
		t.Fatal(err)
	}
	if batch, _ := h.store.Batch(ctx, a.ID); batch.Status != "done" || batch.Calls[0].Run != "not_started" {
		t.Fatalf("allowed, not consumed: %s, run %s", batch.Status, batch.Calls[0].Run)
	}
	if _, err := g.Consume(ctx, cl, a.ID); err != nil {
		t.Fatal(err)
	}
	batch, err := h.store.Batch(ctx, a.ID)
	if err != nil || batch.Status != "done" || batch.Calls[0].Run != "running" {
		t.Fatalf("after the consume: %+v %v", batch, err)
	}
	if open, _ := h.store.OpenBatches(ctx, batch.ConversationID); len(open) != 0 {
		t.Fatalf("open batches after the consume: %v", open)
	}
	c := h.plat.LastCard().Calls[0]
	if c.CarriedBy != "alice-laptop" || c.Run != "running" {
		t.Fatalf("the card's call: %+v", c)
	}

	// The same, but the worker that decided it died after claiming it to
	// complete, and the client had consumed it meanwhile (the decision is
	// stored as a worker would, which then dies before finishing).
	b, err := g.Request(ctx, cl, gwRequest("Bash", `{"command":"make migrate"}`))
	if err != nil {
		t.Fatal(err)
	}
	key := "toolu_1"
	if _, err := h.store.Decide(ctx, confirm.Decide{BatchID: b.ID, Key: key, Status: confirm.DecisionAllowed, By: "alice"}); err != nil {
		t.Fatal(err)
	}
	if won, err := h.store.StartRun(ctx, b.ID, key); err != nil || !won {
		t.Fatalf("start run: %v %v", won, err)
	}
	if won, err := h.store.ClaimBatch(ctx, b.ID, "a-dead-worker"); err != nil || !won {
		t.Fatalf("claim: %v %v", won, err)
	}
	if err := h.bot.RecoverBatches(ctx); err != nil {
		t.Fatal(err)
	}
	batch, _ = h.store.Batch(ctx, b.ID)
	if batch.Status != "done" || batch.Calls[0].Run != "running" {
		t.Fatalf("after recovery: %s, run %s; want done, the client's run still running", batch.Status, batch.Calls[0].Run)
	}
	if err := g.Result(ctx, cl, b.ID, false, "migration failed"); err != nil {
		t.Fatalf("the late result: %v", err)
	}
	if batch, _ = h.store.Batch(ctx, b.ID); batch.Calls[0].Run != "failed" {
		t.Fatalf("after the result: %s", batch.Calls[0].Run)
	}
	if got := h.ranCalls(); len(got) != 0 {
		t.Fatalf("Airlock ran %v", got)
	}
}
