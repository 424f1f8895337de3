package bot_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/airlockhq/airlock/bot"
	"github.com/airlockhq/airlock/bot/bottest"
	cardpkg "github.com/airlockhq/airlock/card"
	"github.com/airlockhq/airlock/confirm"
	"github.com/airlockhq/airlock/web"
)

// stepUpHarness has a high-risk deploy waiting for a yes, its tier
// needing a fresh sign-in.
func stepUpHarness(t *testing.T) (*harness, string) {
	t.Helper()
	h := newHarnessWith(t, "", func(c *bot.Config) {
		c.StepUp = confirm.StepUp{confirm.RiskHigh: confirm.AssuranceSSO}
		c.ConsoleURL = "https://airlock.example.com/"
		c.GrantFor = 3600e9
	})
	h.tools["deploy"].Rating = confirm.RiskHigh
	h.push(calls(tc("a", "deploy", `{"svc":"api"}`)), text("deployed"))
	h.turn("bob", "deploy")
	return h, h.plat.LastCard().Calls[0].Ref
}

// An allow of a call whose tier needs a fresh sign-in counts in no chat
// form (Allow, Allow for…, Edit…, Allow all): each changes nothing and
// says where to allow it; Deny stays in chat.
func TestStepUpRefusesChatAllows(t *testing.T) {
	h, ref := stepUpHarness(t)
	ctx := context.Background()
	batch, _, _ := strings.Cut(ref, ".")
	c := bot.Click{Platform: "test", Channel: "C1", User: "alice", Ref: ref, Message: cardMsg(ref), Allow: true}
	var su *bot.StepUpError
	for name, try := range map[string]func() error{
		"allow":     func() error { return h.bot.Decide(ctx, c) },
		"allow for": func() error { g := c; g.Grant = true; return h.bot.Decide(ctx, g) },
		"edit":      func() error { e := c; e.Allow = false; return h.bot.Edit(ctx, e, `{"svc":"api"}`) },
	} {
		err := try()
		if !errors.As(err, &su) || su.URL != "https://airlock.example.com/ui/approvals/"+batch {
			t.Errorf("%s: %v, want a step-up naming the page", name, err)
		}
		if msg := bot.UserMessage(err); !strings.Contains(msg, "/ui/approvals/"+batch) || !strings.Contains(msg, "Nothing changed") {
			t.Errorf("%s: told %q", name, msg)
		}
	}
	// Allow all leaves the call, saying where to allow it.
	all := c
	all.Ref = confirm.AllRef(batch, 0)
	if res, err := h.bot.DecideAll(ctx, all); err != nil || res.Decided != 0 || len(res.Left) != 1 || !strings.Contains(res.Message(), "fresh sign-in") {
		t.Errorf("allow all: %+v (%q), %v", res, res.Message(), err)
	}
	if n := h.tools["deploy"].Runs.Load(); n != 0 || !h.plat.LastCard().Calls[0].Open() {
		t.Fatalf("a chat allow counted: %d runs", n)
	}
	// The page: a session without a fresh sign-in is no more than chat;
	// with one, the allow counts.
	alice := web.Who{Email: "alice@example.com", IDs: map[string]string{"test": "alice"}}
	if err := h.bot.DecideOnPage(ctx, alice, web.Decision{Ref: ref, Allow: true, Assurance: confirm.AssuranceChat}); !errors.Is(err, bot.ErrStepUp) {
		t.Fatalf("a stale session's allow: %v", err)
	}
	if err := h.bot.DecideOnPage(ctx, alice, web.Decision{Ref: ref, Allow: true, Assurance: confirm.AssuranceSSO}); err != nil {
		t.Fatal(err)
	}
	if n := h.tools["deploy"].Runs.Load(); n != 1 {
		t.Fatalf("deploy ran %d times", n)
	}
}

// Deny needs no step-up, in chat.
func TestStepUpLeavesDenyInChat(t *testing.T) {
	h, ref := stepUpHarness(t)
	if err := h.bot.Decide(context.Background(), bot.Click{Platform: "test", Channel: "C1", User: "alice", Ref: ref, Message: cardMsg(ref)}); err != nil {
		t.Fatal(err)
	}
	if h.plat.LastCard().Calls[0].Open() {
		t.Fatal("the deny did not count")
	}
}

// The page shows a request only to who may decide it or asked for it,
// and says which calls need a step-up.
func TestConsoleShowsOnlyWhatIsYours(t *testing.T) {
	h, ref := stepUpHarness(t)
	ctx := context.Background()
	batch, _, _ := strings.Cut(ref, ".")
	alice := web.Who{IDs: map[string]string{"test": "alice"}}
	a, err := h.bot.Approval(ctx, batch, alice)
	if err != nil || !a.MayDecide || a.StepUp[ref] != confirm.AssuranceSSO {
		t.Fatalf("alice's page: %+v, %v", a, err)
	}
	if got := h.plat.LastCard().PageURL; got != "https://airlock.example.com/ui/approvals/"+batch {
		t.Fatalf("the card links to %q", got)
	}
	if a, err := h.bot.Approval(ctx, batch, web.Who{IDs: map[string]string{"test": "bob"}}); err != nil || a.MayDecide {
		t.Fatalf("the requester's page: %+v, %v", a, err)
	}
	for _, who := range []web.Who{{IDs: map[string]string{"test": "carol"}}, {IDs: map[string]string{"slack": "alice"}}, {}} {
		if _, err := h.bot.Approval(ctx, batch, who); !errors.Is(err, confirm.ErrNotFound) {
			t.Errorf("%v sees the page: %v", who.IDs, err)
		}
	}
	es, err := h.bot.Inbox(ctx, alice)
	if err != nil || len(es) != 1 || es[0].BatchID != batch || !es[0].MayDecide || es[0].Waiting != 1 {
		t.Fatalf("alice's inbox: %+v, %v", es, err)
	}
	if es, _ := h.bot.Inbox(ctx, web.Who{IDs: map[string]string{"test": "carol"}}); len(es) != 0 {
		t.Fatalf("carol's inbox: %+v", es)
	}
}

// A run's page is for who started it and the approvers of its channel;
// it lists the steps and each step's request.
func TestRunPageIsTheStartersAndApprovers(t *testing.T) {
	h := newRBHarness(t, nil)
	id := h.start(restartBook(), "bob")
	ctx := context.Background()
	for _, user := range []string{"alice", "bob"} {
		r, err := h.bot.RunPage(ctx, id, web.Who{IDs: map[string]string{"test": user}})
		if err != nil || r.Run.ID != id || len(r.Run.Steps) == 0 || r.Requests["restart"] == "" {
			t.Fatalf("%s's run page: %+v, %v", user, r, err)
		}
	}
	for _, who := range []web.Who{{IDs: map[string]string{"test": "dave"}}, {}} {
		if _, err := h.bot.RunPage(ctx, id, who); !errors.Is(err, confirm.ErrNotFound) {
			t.Errorf("%v sees the run: %v", who.IDs, err)
		}
	}
	if _, err := h.bot.RunPage(ctx, "nosuchrun", web.Who{IDs: map[string]string{"test": "alice"}}); !errors.Is(err, confirm.ErrNotFound) {
		t.Errorf("no such run: %v", err)
	}
}

// A quorum counts only the votes of the assurance the call's tier needs
// now: a chat vote cast before step_up asked for a fresh sign-in is not
// counted (nor shown on the card) after the restart that changed it, so
// two page votes are still needed; its voter votes again on the page.
func TestQuorumCountsOnlyVotesOfTheNeededAssurance(t *testing.T) {
	path := filepath.Join(t.TempDir(), "airlock.db")
	quorum := func(c *bot.Config) {
		c.DefaultApprovals = 2
		c.Channels = bot.NewChannels([]bot.Channel{{Platform: "test", ID: "C1", Approvers: []string{"alice", "carol"}}})
		c.ConsoleURL = "https://airlock.example.com/"
	}
	h := newHarnessWith(t, path, quorum)
	h.tools["deploy"].Rating = confirm.RiskHigh
	h.push(calls(tc("a", "deploy", `{"svc":"api"}`)))
	h.turn("bob", "deploy")
	ref := h.plat.LastCard().Calls[0].Ref
	batch, _, _ := strings.Cut(ref, ".")
	ctx := context.Background()
	if err := h.bot.Decide(ctx, bot.Click{Platform: "test", Channel: "C1", User: "alice", Ref: ref, Message: cardMsg(ref), Allow: true}); err != nil {
		t.Fatal(err)
	}
	if v := h.plat.LastCard().Calls[0].Votes; len(v) != 1 {
		t.Fatalf("alice's chat vote: %+v", v)
	}
	h.store.Close()

	// Restarted with step_up asking high calls for a fresh sign-in.
	h2 := newHarnessWith(t, path, func(c *bot.Config) {
		quorum(c)
		c.StepUp = confirm.StepUp{confirm.RiskHigh: confirm.AssuranceSSO}
	})
	h2.tools["deploy"].Rating = confirm.RiskHigh
	h2.push(text("deployed"))
	page := func(user string) error {
		return h2.bot.DecideOnPage(ctx, web.Who{IDs: map[string]string{"test": user}}, web.Decision{Ref: ref, Allow: true, Assurance: confirm.AssuranceSSO})
	}
	if err := page("carol"); err != nil {
		t.Fatal(err)
	}
	a, err := h2.bot.Approval(ctx, batch, web.Who{IDs: map[string]string{"test": "carol"}})
	if err != nil {
		t.Fatal(err)
	}
	if c := a.Card.Calls[0]; !c.Open() || len(c.Votes) != 1 || c.Votes[0].By != "carol" {
		t.Fatalf("after carol's page vote: open %v, votes %+v", c.Open(), c.Votes)
	}
	if n := h2.tools["deploy"].Runs.Load(); n != 0 {
		t.Fatalf("a chat vote from before step_up counted: deploy ran %d times", n)
	}
	// Alice's chat vote does not stand for her: she votes on the page.
	if err := page("alice"); err != nil {
		t.Fatalf("alice's page vote after her chat vote: %v", err)
	}
	if n := h2.tools["deploy"].Runs.Load(); n != 1 {
		t.Fatalf("deploy ran %d times after two page votes", n)
	}
	if err := page("alice"); err == nil {
		t.Fatal("a vote on an allowed call counted")
	}
}

// An Edit… in chat that raises the call to a tier needing step-up is
// stored, but it is not the editor's allow: the call waits for an allow
// with the needed assurance, on the page.
func TestChatEditRaisingTheTierWaitsForTheStepUp(t *testing.T) {
	byEnv := confirm.PolicyFunc(func(r confirm.Request) confirm.Verdict {
		if r.Call.Name != "deploy" {
			return confirm.Verdict{}
		}
		if strings.Contains(string(r.Call.Args), "prod") {
			return confirm.Verdict{Ask: true, Risk: confirm.RiskHigh}
		}
		return confirm.Verdict{Ask: true}
	})
	h := newHarnessWith(t, "", withPolicy(byEnv, func(c *bot.Config) {
		c.StepUp = confirm.StepUp{confirm.RiskHigh: confirm.AssuranceSSO}
		c.ConsoleURL = "https://airlock.example.com/"
	}))
	h.push(calls(tc("a", "deploy", `{"env":"dev"}`)), text("deployed"))
	h.turn("dave", "deploy")
	ref := h.plat.LastCard().Calls[0].Ref
	ctx := context.Background()
	if err := h.bot.Edit(ctx, bot.Click{Platform: "test", Channel: "C1", User: "alice", Ref: ref, Message: cardMsg(ref)}, `{"env":"prod"}`); err != nil {
		t.Fatalf("the edit: %v", err)
	}
	c := h.plat.LastCard().Calls[0]
	if !c.Open() || c.Risk != confirm.RiskHigh || !strings.Contains(c.Args, "prod") {
		t.Fatalf("after the edit: open %v, risk %s, args %s", c.Open(), c.Risk, c.Args)
	}
	if n := h.tools["deploy"].Runs.Load(); n != 0 {
		t.Fatalf("a chat edit to a step-up tier ran the call (%d runs)", n)
	}
	if err := h.bot.DecideOnPage(ctx, web.Who{IDs: map[string]string{"test": "carol"}}, web.Decision{Ref: c.Ref, Allow: true, Assurance: confirm.AssuranceSSO}); err != nil {
		t.Fatal(err)
	}
	if n := h.tools["deploy"].Runs.Load(); n != 1 {
		t.Fatalf("deploy ran %d times", n)
	}
}

// Edit… on the page: made without the step-up the call's tier needs (a
// sign-in older than 5 minutes), it is stored and says so on its form,
// and the call waits; with it, the edit is the editor's allow and the
// edited call runs, once.
func TestEditOnThePage(t *testing.T) {
	h, ref := stepUpHarness(t)
	ctx := context.Background()
	batch, _, _ := strings.Cut(ref, ".")
	alice := web.Who{IDs: map[string]string{"test": "alice"}}
	f, err := h.bot.EditPage(ctx, alice, ref, confirm.AssuranceChat)
	if err != nil || f.Form.Submit != "Save edit" || !strings.Contains(cardpkg.PlainText(f.Form.Note.Parts), "Allowing this call needs a fresh sign-in") {
		t.Fatalf("a stale session's edit form: %+v, %v", f, err)
	}
	if err := h.bot.EditOnPage(ctx, alice, web.Edit{Ref: ref, Args: `{"svc":"web"}`, Assurance: confirm.AssuranceChat}); err != nil {
		t.Fatal(err)
	}
	c := h.plat.LastCard().Calls[0]
	if !c.Open() || !strings.Contains(c.Args, "web") || h.tools["deploy"].Runs.Load() != 0 {
		t.Fatalf("after a stale session's edit: open %v, args %s, %d runs", c.Open(), c.Args, h.tools["deploy"].Runs.Load())
	}
	// The old reference is stale now; bob (the requester, no approver) may
	// not edit.
	if err := h.bot.EditOnPage(ctx, alice, web.Edit{Ref: ref, Args: `{"svc":"db"}`, Assurance: confirm.AssuranceSSO}); err == nil {
		t.Fatal("an edit of the call's earlier revision counted")
	}
	if _, err := h.bot.EditPage(ctx, web.Who{IDs: map[string]string{"test": "bob"}}, c.Ref, confirm.AssuranceSSO); !errors.Is(err, bot.ErrNotApprover) {
		t.Fatalf("the requester's edit form: %v", err)
	}
	if err := h.bot.EditOnPage(ctx, alice, web.Edit{Ref: c.Ref, Args: `{"svc": 1, `, Assurance: confirm.AssuranceSSO}); !errors.As(err, new(*bot.EditError)) {
		t.Fatalf("arguments that are not JSON: %v", err)
	}
	// Fresh: the edit allows the call.
	f, err = h.bot.EditPage(ctx, alice, c.Ref, confirm.AssuranceSSO)
	if err != nil || f.Form.Submit != "Allow edited" {
		t.Fatalf("a fresh session's edit form: %+v, %v", f, err)
	}
	if err := h.bot.EditOnPage(ctx, alice, web.Edit{Ref: c.Ref, Args: `{"svc":"api2"}`, Assurance: confirm.AssuranceSSO}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the deploy", func() bool { return h.tools["deploy"].Runs.Load() == 1 })
	a, err := h.bot.Approval(ctx, batch, alice)
	if err != nil || a.Card.Calls[0].Open() || !strings.Contains(a.Card.Calls[0].Args, "api2") {
		t.Fatalf("the page after the edit: %+v, %v", a.Card.Calls[0], err)
	}
}

// With the console, a run's message links to the run's page.
func TestRunMessageLinksToItsPage(t *testing.T) {
	h := newRBHarness(t, func(c *bot.Config) { c.ConsoleURL = "https://airlock.example.com/" })
	id := h.start(restartBook(), "bob")
	r, err := h.bot.RunPage(context.Background(), id, web.Who{IDs: map[string]string{"test": "alice"}})
	if err != nil || r.Run.PageURL != "https://airlock.example.com/ui/runs/"+id {
		t.Fatalf("the run's message: %+v, %v", r.Run, err)
	}
}

// rolePlatform is the test platform whose people hold roles, as Discord's
// do; its lookups are counted.
type rolePlatform struct {
	*bottest.Platform
	roles  map[string][]string
	asked  atomic.Int64
	broken bool
}

var _ bot.RoleLookup = (*rolePlatform)(nil)

func (p *rolePlatform) MemberRoles(_ context.Context, _, user string) ([]string, error) {
	p.asked.Add(1)
	if p.broken {
		return nil, errors.New("the platform could not say")
	}
	return p.roles[user], nil
}

// On a platform of roles, a person who approves by role sees and decides
// on the page what they would in chat: their roles are asked of the
// platform (once per page), never taken from the request. Without the
// role, or when the platform cannot say, they see nothing (404) and their
// allow changes nothing.
func TestConsoleAsksThePlatformForRoles(t *testing.T) {
	h := newHarnessWith(t, "", func(c *bot.Config) {
		c.Channels = bot.NewChannels([]bot.Channel{{Platform: "test", ID: "C1", ApproverRoles: []string{"R-mod"}}})
	})
	rp := &rolePlatform{Platform: h.plat, roles: map[string][]string{"mia": {"R-mod"}, "otto": {"R-other"}}}
	h.bot.Register("test", rp)
	h.push(calls(tc("a", "deploy", `{}`)))
	h.turn("bob", "deploy")
	ref := h.plat.LastCard().Calls[0].Ref
	batch, _, _ := strings.Cut(ref, ".")
	ctx := context.Background()
	mia, otto := web.Who{IDs: map[string]string{"test": "mia"}}, web.Who{IDs: map[string]string{"test": "otto"}}
	h.push(calls(tc("b", "deploy", `{"again":true}`)))
	if err := h.bot.HandleTurn(ctx, bot.Turn{Platform: "test", Channel: "C1", Thread: "T2", User: "bob", Text: "deploy again"}); err != nil {
		t.Fatal(err)
	}
	rp.asked.Store(0)
	es, err := h.bot.Inbox(ctx, mia)
	if err != nil || len(es) != 2 || !es[0].MayDecide || !es[1].MayDecide || rp.asked.Load() != 1 {
		t.Fatalf("mia's inbox: %+v, %v (roles asked %d times)", es, err, rp.asked.Load())
	}
	if es, _ := h.bot.Inbox(ctx, otto); len(es) != 0 {
		t.Fatalf("otto's inbox: %+v", es)
	}
	if _, err := h.bot.Approval(ctx, batch, otto); !errors.Is(err, confirm.ErrNotFound) {
		t.Fatalf("otto's page: %v", err)
	}
	if err := h.bot.DecideOnPage(ctx, otto, web.Decision{Ref: ref, Allow: true, Assurance: confirm.AssuranceSSO}); err == nil {
		t.Fatal("otto's allow counted")
	}
	rp.broken = true
	if _, err := h.bot.Approval(ctx, batch, mia); !errors.Is(err, confirm.ErrNotFound) {
		t.Fatalf("mia's page while the platform cannot say her roles: %v", err)
	}
	if err := h.bot.DecideOnPage(ctx, mia, web.Decision{Ref: ref, Allow: true, Assurance: confirm.AssuranceSSO}); err == nil {
		t.Fatal("an allow counted while the platform could not say the roles")
	}
	if n := h.tools["deploy"].Runs.Load(); n != 0 {
		t.Fatalf("deploy ran %d times", n)
	}
	rp.broken = false
	h.push(text("deployed"))
	if err := h.bot.DecideOnPage(ctx, mia, web.Decision{Ref: ref, Allow: true, Assurance: confirm.AssuranceSSO}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the deploy", func() bool { return h.tools["deploy"].Runs.Load() == 1 })
}

// The page tells the request's history from the audit, in card's words:
// the agent's call, the card, a click that changed nothing and why, the
// allow and how it was made, the run.
func TestApprovalPageHistory(t *testing.T) {
	h, ref := stepUpHarness(t)
	ctx := context.Background()
	batch, _, _ := strings.Cut(ref, ".")
	alice := web.Who{IDs: map[string]string{"test": "alice"}}
	_ = h.bot.Decide(ctx, bot.Click{Platform: "test", Channel: "C1", User: "alice", Ref: ref, Message: cardMsg(ref), Allow: true})
	if err := h.bot.DecideOnPage(ctx, alice, web.Decision{Ref: ref, Allow: true, Assurance: confirm.AssuranceSSO}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the deploy", func() bool { return h.tools["deploy"].Runs.Load() == 1 })
	var got []string
	eventually(t, "the run in the history", func() bool {
		a, err := h.bot.Approval(ctx, batch, alice)
		if err != nil {
			t.Fatal(err)
		}
		got = got[:0]
		for _, l := range a.History {
			got = append(got, cardpkg.PlainText(l.Parts))
		}
		return strings.Contains(strings.Join(got, "\n"), "ran: succeeded")
	})
	all := strings.Join(got, "\n")
	for _, want := range []string{
		"bob asked for call 1, deploy",
		"the card asked for a decision",
		"alice's click on call 1, deploy changed nothing: step-up needed",
		"alice allowed call 1, deploy after a fresh sign-in",
		"call 1, deploy ran: succeeded",
	} {
		if !strings.Contains(all, want) {
			t.Errorf("the history lacks %q:\n%s", want, all)
		}
	}
}
