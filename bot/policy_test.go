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
)

// ruleFor is a policy that gives tool's calls the verdict.
func ruleFor(tool string, v confirm.Verdict) confirm.Policy {
	return confirm.PolicyFunc(func(r confirm.Request) confirm.Verdict {
		if r.Call.Name == tool {
			return v
		}
		return confirm.Verdict{}
	})
}

func withPolicy(extra confirm.Policy, edit func(*bot.Config)) func(*bot.Config) {
	return func(c *bot.Config) {
		c.Policy = confirm.NewPolicy(true, []string{"notify"}, extra)
		c.Channels = bot.NewChannels([]bot.Channel{{Platform: "test", ID: "C1", Approvers: []string{"alice", "carol", "bob"}}})
		c.GrantFor = time.Hour
		if edit != nil {
			edit(c)
		}
	}
}

func clickAs(h *harness, user string, n int, allow, grant bool) error {
	card := h.plat.LastCard()
	return h.bot.Decide(context.Background(), bot.Click{Platform: "test", Channel: "C1", User: user, Ref: card.Calls[n-1].Ref, Message: cardMsg(card.Calls[n-1].Ref), Allow: allow, Grant: grant})
}

func TestDenyRuleRefusesWithoutACard(t *testing.T) {
	drop := confirm.Verdict{Deny: true, DenyRule: "no-drops", DenyMessage: "Schema drops are not allowed from chat.", Reasons: []confirm.Reason{{Kind: confirm.ReasonRule, Rule: "no-drops"}}}
	h := newHarnessWith(t, "", withPolicy(ruleFor("deploy", drop), nil))
	h.push(calls(tc("", "status", `{}`), tc("", "deploy", `{"drop":true}`)), text("ok"))
	h.turn("bob", "drop it")
	if len(h.plat.Cards) != 0 || h.tools["deploy"].Runs.Load() != 0 {
		t.Fatal("a refused call was carded or ran")
	}
	if h.tools["status"].Runs.Load() != 1 {
		t.Fatal("the other call of the reply did not follow the normal rules")
	}
	res := lastToolResults(t, h.lastRequest())
	if res[1].Content != "Schema drops are not allowed from chat." || !res[1].IsError {
		t.Fatalf("model told %+v", res[1])
	}
	said := strings.Join(h.plat.Posts, "\n")
	if !strings.Contains(said, "refused by rule no-drops") || !strings.Contains(said, "deploy") {
		t.Fatalf("thread: %q", said)
	}
}

func TestQuorumNeedsDistinctApprovers(t *testing.T) {
	two := confirm.Verdict{Ask: true, Approvals: 2, Reasons: []confirm.Reason{{Kind: confirm.ReasonRule, Rule: "prod"}}}
	h := newHarnessWith(t, "", withPolicy(ruleFor("deploy", two), nil))
	h.push(calls(tc("", "deploy", `{"env":"production"}`)), text("deployed"))
	h.turn("dave", "deploy prod")
	c := h.plat.LastCard().Calls[0]
	if c.Approvals != 2 || !strings.Contains(c.Why(), "needs 2 approvals") || !strings.Contains(c.Why(), "rule prod") {
		t.Fatalf("card: %+v (%s)", c, c.Why())
	}
	if err := clickAs(h, "alice", 1, true, false); err != nil {
		t.Fatal(err)
	}
	if h.tools["deploy"].Runs.Load() != 0 {
		t.Fatal("ran after one of two approvals")
	}
	if got := h.plat.LastCard().Calls[0].Progress(); got != "1 of 2 approvals: alice" {
		t.Fatalf("progress %q", got)
	}
	err := clickAs(h, "alice", 1, true, false)
	if !errors.Is(err, bot.ErrAlreadyVoted) || !strings.Contains(bot.UserMessage(err), "needs one more") {
		t.Fatalf("second allow by alice: %v (%q)", err, bot.UserMessage(err))
	}
	if err := clickAs(h, "carol", 1, true, false); err != nil {
		t.Fatal(err)
	}
	if n := h.tools["deploy"].Runs.Load(); n != 1 {
		t.Fatalf("deploy ran %d times", n)
	}
	final := h.plat.LastCard().Calls[0]
	if final.State.Kind != cardpkg.Allowed || len(final.Votes) != 2 || !strings.Contains(final.Outcome(), "alice and carol") {
		t.Fatalf("final: %+v %q", final, final.Outcome())
	}
}

func TestOneDenyDecidesAQuorumCall(t *testing.T) {
	two := confirm.Verdict{Ask: true, Approvals: 2}
	h := newHarnessWith(t, "", withPolicy(ruleFor("deploy", two), nil))
	h.push(calls(tc("", "deploy", `{}`)), text("not deployed"))
	h.turn("dave", "deploy")
	if err := clickAs(h, "alice", 1, true, false); err != nil {
		t.Fatal(err)
	}
	if err := clickAs(h, "carol", 1, false, false); err != nil {
		t.Fatal(err)
	}
	if h.tools["deploy"].Runs.Load() != 0 || h.plat.LastCard().Calls[0].State.Kind != cardpkg.Denied {
		t.Fatal("a deny after one approval did not decide the call")
	}
}

func TestRequesterCannotAllowTheirOwnCall(t *testing.T) {
	h := newHarnessWith(t, "", withPolicy(nil, nil))
	h.push(calls(tc("", "deploy", `{}`), tc("", "deploy", `{"n":2}`)), text("ok"))
	h.turn("bob", "deploy twice") // bob is an approver of C1
	err := clickAs(h, "bob", 1, true, false)
	if !errors.Is(err, bot.ErrSelfApproval) || !strings.Contains(bot.UserMessage(err), "can't allow it yourself") {
		t.Fatalf("self-approval: %v", err)
	}
	evs, _ := h.store.AuditEvents(context.Background(), confirm.AuditFilter{})
	audited := false
	for _, e := range evs {
		audited = audited || (e.Kind == confirm.AuditRejectedClick && e.Actor == "bob" && strings.Contains(e.Detail, "self-approval"))
	}
	if !audited {
		t.Fatal("the refused self-approval was not audited")
	}
	// Withdrawing stays possible.
	if err := clickAs(h, "bob", 1, false, false); err != nil {
		t.Fatal(err)
	}
	if k := h.plat.LastCard().Calls[0].State.Kind; k != cardpkg.Withdrawn {
		t.Fatalf("state %s", k)
	}

	// With self_approval on, the requester may allow.
	h2 := newHarnessWith(t, "", withPolicy(nil, func(c *bot.Config) { c.SelfApproval = true }))
	h2.push(calls(tc("", "deploy", `{}`)), text("ok"))
	h2.turn("bob", "deploy")
	if err := clickAs(h2, "bob", 1, true, false); err != nil {
		t.Fatal(err)
	}
	if h2.tools["deploy"].Runs.Load() != 1 {
		t.Fatal("self-approval on: the call did not run")
	}
}

func TestRuleApproversNarrowWhoDecides(t *testing.T) {
	dba := confirm.Verdict{Ask: true, Restrict: []confirm.Approvers{{Users: []string{"dave"}}}}
	h := newHarnessWith(t, "", withPolicy(ruleFor("deploy", dba), nil))
	h.push(calls(tc("", "deploy", `{}`)), text("ok"))
	h.turn("bob", "migrate")
	if err := clickAs(h, "alice", 1, true, false); !errors.Is(err, bot.ErrNotApprover) {
		t.Fatalf("a channel approver outside the rule's approvers allowed: %v", err)
	}
	if err := clickAs(h, "dave", 1, true, false); err != nil {
		t.Fatal(err)
	}
	if h.tools["deploy"].Runs.Load() != 1 {
		t.Fatal("the rule's approver could not allow")
	}
}

// grantFirstDeploy has bob ask for a deploy and alice allow it for 1h.
func grantFirstDeploy(t *testing.T, h *harness) {
	t.Helper()
	h.push(calls(tc("", "deploy", `{"n":1}`)), text("one"))
	h.turn("bob", "deploy 1")
	if err := clickAs(h, "alice", 1, true, true); err != nil {
		t.Fatal(err)
	}
}

func TestGrantCoversTheNextCallOfThatToolInThatThreadOnly(t *testing.T) {
	h := newHarnessWith(t, "", withPolicy(nil, nil))
	grantFirstDeploy(t, h)
	if h.tools["deploy"].Runs.Load() != 1 {
		t.Fatal("Allow for 1h did not allow the call")
	}
	grants, err := h.store.Grants(context.Background(), confirm.GrantFilter{})
	if err != nil || len(grants) != 1 || grants[0].Tool != "deploy" || grants[0].CreatedBy != "alice" {
		t.Fatalf("grants %+v %v", grants, err)
	}
	cards := len(h.plat.Cards)

	// The next deploy in this thread runs without a card, with a line.
	h.push(calls(tc("", "deploy", `{"n":2}`)), text("two"))
	h.turn("bob", "deploy 2")
	if len(h.plat.Cards) != cards || h.tools["deploy"].Runs.Load() != 2 {
		t.Fatalf("a granted call was carded (%d cards) or did not run", len(h.plat.Cards))
	}
	said := strings.Join(h.plat.Posts, "\n")
	if !strings.Contains(said, "allowed by alice's grant for bob's requests until") {
		t.Fatalf("thread: %q", said)
	}
	// Another tool, another thread: cards.
	h.push(calls(tc("", "notify", `{}`)))
	h.turn("bob", "notify")
	if len(h.plat.Cards) != cards+1 {
		t.Fatal("a grant for deploy covered notify")
	}
	h.turn("bob", "never mind")
	h.push(calls(tc("", "deploy", `{"n":3}`)))
	turnIn(t, h, bot.Turn{Channel: "C1", Thread: "T2", User: "bob", Text: "deploy 3"})
	if len(h.plat.Cards) != cards+2 {
		t.Fatal("a grant covered a call in another thread")
	}
	// Expired: cards again.
	h.now.Add(int64(time.Hour + time.Second))
	h.push(calls(tc("", "deploy", `{"n":4}`)))
	h.turn("bob", "deploy 4")
	if len(h.plat.Cards) != cards+3 {
		t.Fatal("an expired grant still covered a call")
	}
}

func TestRevokedGrantCoversNothing(t *testing.T) {
	h := newHarnessWith(t, "", withPolicy(nil, nil))
	grantFirstDeploy(t, h)
	grants, _ := h.store.Grants(context.Background(), confirm.GrantFilter{})
	ref := confirm.GrantRef(grants[0].ID)
	if err := h.bot.Revoke(context.Background(), bot.Click{Platform: "test", Channel: "C1", User: "mallory", Ref: ref}); !errors.Is(err, bot.ErrNotApprover) {
		t.Fatalf("a non-approver revoked: %v", err)
	}
	if err := h.bot.Revoke(context.Background(), bot.Click{Platform: "test", Channel: "C1", User: "carol", Ref: ref}); err != nil {
		t.Fatal(err)
	}
	if err := h.bot.Revoke(context.Background(), bot.Click{Platform: "test", Channel: "C1", User: "carol", Ref: ref}); !errors.Is(err, bot.ErrGrantNotActive) {
		t.Fatalf("second revoke: %v", err)
	}
	cards := len(h.plat.Cards)
	h.push(calls(tc("", "deploy", `{"n":2}`)))
	h.turn("bob", "deploy 2")
	if len(h.plat.Cards) != cards+1 {
		t.Fatal("a revoked grant still covered a call")
	}
}

func TestGrantsNeverCoverQuorumOrUngrantableCalls(t *testing.T) {
	two := confirm.Verdict{Ask: true, Approvals: 2}
	h := newHarnessWith(t, "", withPolicy(confirm.All(ruleFor("deploy", two), ruleFor("notify", confirm.Verdict{Ask: true, NotGrantable: true})), nil))
	h.push(calls(tc("", "deploy", `{}`), tc("", "notify", `{}`)))
	h.turn("bob", "both")
	card := h.plat.LastCard()
	if card.Calls[0].Grantable || card.Calls[1].Grantable {
		t.Fatalf("grantable offered: %+v", card.Calls)
	}
	if err := clickAs(h, "alice", 1, true, true); !errors.Is(err, bot.ErrNotGrantable) {
		t.Fatalf("Allow-for on a 2-approval call: %v", err)
	}
	if err := clickAs(h, "alice", 2, true, true); !errors.Is(err, bot.ErrNotGrantable) {
		t.Fatalf("Allow-for on an ungrantable call: %v", err)
	}
}

// slowPoster clicks Allow on the card it is posting before its reference
// is stored, as an approver can on a fast platform.
type slowPoster struct {
	*platform
	click func(ref string)
	done  chan struct{}
}

func (s *slowPoster) PostCard(ctx context.Context, th bot.Thread, c cardpkg.Card) (string, error) {
	ref, err := s.platform.PostCard(ctx, th, c)
	go func() { s.click(c.Calls[0].Ref); close(s.done) }()
	time.Sleep(50 * time.Millisecond) // the click lands before this returns
	return ref, err
}

func TestAClickRightAfterThePostUpdatesTheCard(t *testing.T) {
	two := confirm.Verdict{Ask: true, Approvals: 2}
	h := newHarnessWith(t, "", withPolicy(ruleFor("deploy", two), nil))
	sp := &slowPoster{platform: h.plat, done: make(chan struct{})}
	sp.click = func(ref string) {
		if err := h.bot.Decide(context.Background(), bot.Click{Platform: "test", Channel: "C1", User: "alice", Ref: ref, Message: cardMsg(ref), Allow: true}); err != nil {
			t.Error(err)
		}
	}
	h.bot.Register("test", sp)
	h.push(calls(tc("", "deploy", `{}`)))
	h.turn("dave", "deploy")
	<-sp.done
	if got := h.plat.LastCard().Calls[0].Progress(); got != "1 of 2 approvals: alice" {
		t.Fatalf("the card was not updated after an early click: %q", got)
	}
}

// A grant covers later calls of its tool only while the tool is what it
// was when the grant was made: once its definition changed (an MCP
// server's new schema, a config tool's new URL), the next call gets a card.
func TestGrantNotUsedAfterItsToolChanged(t *testing.T) {
	h := newHarnessWith(t, "", withPolicy(nil, nil))
	grantFirstDeploy(t, h)
	cards := len(h.plat.Cards)
	h.push(calls(tc("", "deploy", `{"n":2}`)), text("two"))
	h.turn("bob", "deploy 2")
	if len(h.plat.Cards) != cards || h.tools["deploy"].Runs.Load() != 2 {
		t.Fatal("the grant did not cover the tool as it was")
	}
	h.tools["deploy"].Description = "Deploy, now to every region at once."
	h.push(calls(tc("", "deploy", `{"n":3}`)), text("three"))
	h.turn("bob", "deploy 3")
	if len(h.plat.Cards) != cards+1 || h.tools["deploy"].Runs.Load() != 2 {
		t.Fatalf("a grant made for the tool before it changed covered it (%d new cards, %d runs)", len(h.plat.Cards)-cards, h.tools["deploy"].Runs.Load())
	}
}
