package bot_test

import (
	"bytes"
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/airlockhq/airlock/bot"
	"github.com/airlockhq/airlock/confirm"
)

// prodOnlyLead restricts deploys to production to the lead, as a rule
// with `approvers: [lead]` does.
var prodOnlyLead = confirm.PolicyFunc(func(r confirm.Request) confirm.Verdict {
	if r.Call.Name == "deploy" && bytes.Contains(r.Call.Args, []byte("production")) {
		return confirm.Verdict{Ask: true, Restrict: []confirm.Approvers{{Users: []string{"lead"}}},
			Reasons: []confirm.Reason{{Kind: confirm.ReasonRule, Rule: "prod-lead"}}}
	}
	return confirm.Verdict{}
})

func withLead(c *bot.Config) {
	c.Channels = bot.NewChannels([]bot.Channel{{Platform: "test", ID: "C1", Approvers: []string{"alice", "carol", "lead"}}})
}

// A grant from a channel approver whom a rule does not admit for
// production never lets a production deploy run: it gets a card, and only
// the lead may decide it. The lead's own grant covers it.
func TestGrantNeverWidensWhoApproves(t *testing.T) {
	h := newHarnessWith(t, "", withPolicy(prodOnlyLead, withLead))
	h.push(calls(tc("", "deploy", `{"env":"staging"}`)), text("staged"))
	h.turn("bob", "deploy to staging")
	if err := clickAs(h, "alice", 1, true, true); err != nil {
		t.Fatalf("alice's Allow for 1h on staging: %v", err)
	}
	cards := len(h.plat.Cards)

	h.push(calls(tc("", "deploy", `{"env":"production"}`)), text("prod"))
	h.turn("bob", "now production")
	if h.tools["deploy"].Runs.Load() != 1 || len(h.plat.Cards) != cards+1 {
		t.Fatalf("production deploy under alice's staging grant: %d runs, %d new cards; want no run, a card",
			h.tools["deploy"].Runs.Load(), len(h.plat.Cards)-cards)
	}
	if err := clickPosted(h, "alice", true); !errors.Is(err, bot.ErrNotApprover) {
		t.Fatalf("alice allowed production: %v", err)
	}
	// The lead allows it for an hour: that grant may cover production.
	if err := clickPosted(h, "lead", true); err != nil {
		t.Fatalf("the lead's Allow for 1h: %v", err)
	}
	if h.tools["deploy"].Runs.Load() != 2 {
		t.Fatal("the lead's allow did not run the deploy")
	}
	cards = len(h.plat.Cards)
	h.push(calls(tc("", "deploy", `{"env":"production","v":2}`)), text("prod 2"))
	h.turn("bob", "again")
	if h.tools["deploy"].Runs.Load() != 3 || len(h.plat.Cards) != cards {
		t.Fatal("the lead's grant did not cover the next production deploy")
	}
}

// A grant made for Bob's request covers Bob's later turns and an
// approver's, not anyone else's in the thread.
func TestGrantCoversOnlyItsRequester(t *testing.T) {
	h := newHarnessWith(t, "", withPolicy(nil, withLead))
	grantFirstDeploy(t, h)
	cards := len(h.plat.Cards)

	h.push(calls(tc("", "deploy", `{"target":"mallory's choice"}`)))
	h.turn("mallory", "deploy what I say")
	if h.tools["deploy"].Runs.Load() != 1 || len(h.plat.Cards) != cards+1 {
		t.Fatalf("another member's turn used Bob's grant: %d runs, %d new cards", h.tools["deploy"].Runs.Load(), len(h.plat.Cards)-cards)
	}
	cards = len(h.plat.Cards)
	h.push(calls(tc("", "deploy", `{"n":3}`)), text("three"))
	h.turn("carol", "deploy 3") // an approver of the channel: moves on from mallory's card
	h.push(calls(tc("", "deploy", `{"n":4}`)), text("four"))
	h.turn("bob", "deploy 4")
	if h.tools["deploy"].Runs.Load() != 3 || len(h.plat.Cards) != cards {
		t.Fatalf("the grant did not cover an approver's and the requester's turns: %d runs, %d new cards", h.tools["deploy"].Runs.Load(), len(h.plat.Cards)-cards)
	}
}

// revokingStore revokes a grant right after the bot looked it up, before
// the batch planned with it is stored.
type revokingStore struct {
	bot.Store
	once sync.Once
	on   bool
}

func (s *revokingStore) ActiveGrants(ctx context.Context, conv int64, tool string) ([]confirm.Grant, error) {
	gs, err := s.Store.ActiveGrants(ctx, conv, tool)
	if err == nil && len(gs) > 0 && s.on {
		s.once.Do(func() {
			if _, err := s.Store.RevokeGrant(ctx, gs[0].ID, "carol"); err != nil {
				panic(err)
			}
		})
	}
	return gs, err
}

// A grant revoked between its lookup and the batch's insert is not used:
// the call gets a card.
func TestGrantRevokedWhilePlanningIsNotUsed(t *testing.T) {
	var rs *revokingStore
	h := newHarnessWith(t, "", withPolicy(nil, func(c *bot.Config) {
		rs = &revokingStore{Store: c.Store}
		c.Store = rs
	}))
	grantFirstDeploy(t, h)
	cards := len(h.plat.Cards)
	rs.on = true
	h.push(calls(tc("", "deploy", `{"n":2}`)), text("two"))
	h.turn("bob", "deploy 2")
	if h.tools["deploy"].Runs.Load() != 1 || len(h.plat.Cards) != cards+1 {
		t.Fatalf("a grant revoked before the batch was stored was used: %d runs, %d new cards", h.tools["deploy"].Runs.Load(), len(h.plat.Cards)-cards)
	}
}

// Someone an escalation step let decide a card may allow it, but not
// grant later calls with it.
func TestEscalationDeciderMayNotGrant(t *testing.T) {
	step := bot.EscalationStep{After: 5 * time.Minute, Approvers: confirm.Approvers{Users: []string{"lead"}}}
	h, r := routed(t, bot.Channel{Approvers: []string{"alice"}}, func(c *bot.Config) {
		c.Escalation = []bot.EscalationStep{step}
		c.GrantFor = time.Hour
	})
	h.push(calls(tc("a", "deploy", `{}`)), text("done"))
	h.turn("bob", "deploy")
	main := r.refsIn("C1")[0]
	ref := r.card(main).Calls[0].Ref
	h.now.Add(int64(6 * time.Minute))
	_ = h.bot.Sweep(context.Background())
	grant := bot.Click{Platform: "test", Channel: "C1", User: "lead", Ref: ref, Message: main, Allow: true, Grant: true}
	if err := h.bot.Decide(context.Background(), grant); !errors.Is(err, bot.ErrEscalationGrant) {
		t.Fatalf("the escalation's approver granted: %v", err)
	}
	if gs, _ := h.store.Grants(context.Background(), confirm.GrantFilter{}); len(gs) != 0 {
		t.Fatalf("grants %+v", gs)
	}
	if err := clickOn(h, "lead", ref, main, true); err != nil {
		t.Fatalf("the escalation's approver may still allow: %v", err)
	}
	if h.tools["deploy"].Runs.Load() != 1 {
		t.Fatal("did not run")
	}
}

// clickPosted decides the first call of the card posted last (not an
// update of an earlier one) as user, with "Allow for" when grant.
func clickPosted(h *harness, user string, grant bool) error {
	h.plat.Mu.Lock()
	c := h.plat.Cards[len(h.plat.Cards)-1]
	h.plat.Mu.Unlock()
	ref := c.Calls[0].Ref
	return h.bot.Decide(context.Background(), bot.Click{Platform: "test", Channel: "C1", User: user, Ref: ref, Message: cardMsg(ref), Allow: true, Grant: grant})
}
