package bot_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/airlockhq/airlock/bot"
	cardpkg "github.com/airlockhq/airlock/card"
	"github.com/airlockhq/airlock/confirm"
	"github.com/airlockhq/airlock/model"
)

// router is a platform that routes: it records where each card, copy and
// pointer went and every update, by reference.
type router struct {
	mu       sync.Mutex
	seq      int
	where    map[string]bot.Thread // ref -> where it was posted
	cards    map[string]cardpkg.Card
	pointers map[string]cardpkg.Pointer
	updates  map[string]int
	posts    []string // "<channel>/<thread>: text"
	dms      []string // users a DM was opened with
}

func newRouter() *router {
	return &router{where: map[string]bot.Thread{}, cards: map[string]cardpkg.Card{}, pointers: map[string]cardpkg.Pointer{}, updates: map[string]int{}}
}

// place gives a new message in th its reference; r.mu is held.
func (r *router) place(th bot.Thread, kind string) string {
	r.seq++
	ref := fmt.Sprintf("%s/%s%d", th.Channel, kind, r.seq)
	r.where[ref] = th
	return ref
}

// postedIn stores v as a new message of th in m.
func postedIn[T any](r *router, m map[string]T, th bot.Thread, kind string, v T) (string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	ref := r.place(th, kind)
	m[ref] = v
	return ref, nil
}

// updated stores v as the new state of the message ref of th in m.
func updated[T any](r *router, m map[string]T, th bot.Thread, ref string, v T) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.update(th, ref); err != nil {
		return err
	}
	m[ref] = v
	return nil
}

func (r *router) PostCard(_ context.Context, th bot.Thread, c cardpkg.Card) (string, error) {
	return postedIn(r, r.cards, th, "m", c)
}
func (r *router) UpdateCard(_ context.Context, th bot.Thread, ref string, c cardpkg.Card) error {
	return updated(r, r.cards, th, ref, c)
}
func (r *router) Post(_ context.Context, th bot.Thread, s string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.posts = append(r.posts, th.Channel+"/"+th.Thread+": "+s)
	return nil
}
func (r *router) Link(_ context.Context, th bot.Thread, ref string) (string, error) {
	return "https://chat.example/" + th.Channel + "/" + th.Thread + "#" + ref, nil
}
func (r *router) OpenDM(_ context.Context, user string) (bot.Thread, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.dms = append(r.dms, user)
	return bot.Thread{Platform: "test", Channel: "D-" + user}, nil
}
func (r *router) PostPointer(_ context.Context, th bot.Thread, p cardpkg.Pointer) (string, error) {
	return postedIn(r, r.pointers, th, "p", p)
}
func (r *router) UpdatePointer(_ context.Context, th bot.Thread, ref string, p cardpkg.Pointer) error {
	return updated(r, r.pointers, th, ref, p)
}

// update counts an update of ref, which must be in th; r.mu is held.
func (r *router) update(th bot.Thread, ref string) error {
	if r.where[ref] != th {
		return fmt.Errorf("message %s updated in %+v, posted in %+v", ref, th, r.where[ref])
	}
	r.updates[ref]++
	return nil
}

// refsIn lists the card refs posted in channels starting with prefix.
func (r *router) refsIn(prefix string) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for ref, th := range r.where {
		if _, ok := r.cards[ref]; ok && strings.HasPrefix(th.Channel, prefix) {
			out = append(out, ref)
		}
	}
	return out
}

func (r *router) card(ref string) cardpkg.Card {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.cards[ref]
}

// routed is a harness whose "test" platform routes, with edit applied to
// its config.
func routed(t *testing.T, entry bot.Channel, edit func(*bot.Config)) (*harness, *router) {
	t.Helper()
	return routedAt(t, "", entry, edit)
}

func routedAt(t *testing.T, path string, entry bot.Channel, edit func(*bot.Config)) (*harness, *router) {
	t.Helper()
	h := newHarnessWith(t, path, func(c *bot.Config) {
		entry.Platform, entry.ID = "test", "C1"
		c.Channels = bot.NewChannels([]bot.Channel{entry})
		if edit != nil {
			edit(c)
		}
	})
	r := newRouter()
	h.bot.Register("test", r)
	return h, r
}

func clickOn(h *harness, user, ref, message string, allow bool) error {
	return h.bot.Decide(context.Background(), bot.Click{Platform: "test", Channel: "C1", User: user, Ref: ref, Message: message, Allow: allow})
}

// wantSurface checks the decision by by was audited with its surface.
func wantSurface(t *testing.T, h *harness, by, surface string) {
	t.Helper()
	events, err := h.store.AuditEvents(context.Background(), confirm.AuditFilter{})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range events {
		if e.Kind == confirm.AuditDecision && e.Actor == by {
			if want := `"surface":"` + surface + `"`; !strings.Contains(e.Detail, want) {
				t.Fatalf("decision by %s: detail %s, want %s", by, e.Detail, want)
			}
			return
		}
	}
	t.Fatalf("no decision by %s audited", by)
}

func TestCardGoesToTheApprovalsChannelWithAPointer(t *testing.T) {
	h, r := routed(t, bot.Channel{Approvers: []string{"alice"}, ApprovalsChannel: "CAPPROVE"}, nil)
	h.push(calls(tc("a", "deploy", `{"v":1}`)), text("deployed"))
	h.turn("bob", "deploy")
	cards := r.refsIn("CAPPROVE")
	if len(cards) != 1 || len(r.refsIn("C1")) != 0 {
		t.Fatalf("cards: approvals %v, thread %v", cards, r.refsIn("C1"))
	}
	main := cards[0]
	if th := r.where[main]; th.Thread != "" {
		t.Fatalf("the card went into a thread of the approvals channel: %+v", th)
	}
	c := r.card(main)
	if c.Copy != cardpkg.CopyApprovals || !strings.Contains(c.ThreadLink, "/C1/T1") {
		t.Fatalf("card copy %q link %q", c.Copy, c.ThreadLink)
	}
	var ptr string
	for ref, p := range r.pointers {
		ptr = ref
		if r.where[ref] != (bot.Thread{Platform: "test", Channel: "C1", Thread: "T1"}) || !strings.Contains(p.CardLink, main) || p.Channel != "CAPPROVE" || p.Complete() {
			t.Fatalf("pointer %+v at %+v", p, r.where[ref])
		}
	}
	if ptr == "" {
		t.Fatal("no pointer in the thread")
	}
	// A click on the card in the approvals channel decides; the
	// approvers are still the conversation channel's.
	if err := clickOn(h, "mallory", c.Calls[0].Ref, main, true); !errors.Is(err, bot.ErrNotApprover) {
		t.Fatalf("a non-approver in the approvals channel: %v", err)
	}
	if err := clickOn(h, "alice", c.Calls[0].Ref, main, true); err != nil {
		t.Fatal(err)
	}
	if h.tools["deploy"].Runs.Load() != 1 {
		t.Fatal("the allowed call did not run")
	}
	wantSurface(t, h, "alice", confirm.SurfaceApprovals)
	r.mu.Lock()
	p := r.pointers[ptr]
	r.mu.Unlock()
	if !p.Complete() || p.Calls[0].Run != confirm.RunSucceeded {
		t.Fatalf("the pointer was not edited to the outcome: %+v", p.Calls)
	}
	if !r.card(main).Complete() {
		t.Fatal("the card was not updated")
	}
}

func TestDMCopiesOneClickCountsAllCopiesUpdate(t *testing.T) {
	h, r := routed(t, bot.Channel{Approvers: []string{"alice", "carol"}, ApproverGroups: []string{"G1"}, Notify: []string{bot.NotifyDM}}, nil)
	h.bot.Channels().SetGroupResolver("test", func(_ context.Context, g string) ([]string, error) {
		if g == "G1" {
			return []string{"dave", "alice"}, nil
		}
		return nil, errors.New("no such group")
	})
	h.push(calls(tc("a", "deploy", `{}`)), text("done"))
	h.turn("bob", "deploy")
	main := r.refsIn("C1")
	dms := r.refsIn("D-")
	if len(main) != 1 || len(dms) != 3 {
		t.Fatalf("main %v, DM copies %v (DMs opened with %v)", main, dms, r.dms)
	}
	for _, ref := range dms {
		if c := r.card(ref); c.Copy != cardpkg.CopyDM || c.ThreadLink == "" {
			t.Fatalf("DM copy %s: copy %q link %q", ref, c.Copy, c.ThreadLink)
		}
	}
	ref := r.card(main[0]).Calls[0].Ref
	// A message that is not one of this batch's cards counts for nothing.
	if err := clickOn(h, "carol", ref, "D-carol/m999", true); !errors.Is(err, bot.ErrWrongChannel) {
		t.Fatalf("a click on an unknown message: %v", err)
	}
	if cd, err := h.bot.ClickedCard(context.Background(), bot.Click{Platform: "test", Ref: ref, Message: dms[0]}); err != nil || cd.Calls[0].Ref != ref {
		t.Fatalf("the card of a DM copy's button: %v", err)
	}
	if _, err := h.bot.ClickedCard(context.Background(), bot.Click{Platform: "test", Ref: ref, Message: "D-x/m1"}); !errors.Is(err, confirm.ErrNotFound) {
		t.Fatalf("the card of a button on another message: %v", err)
	}
	var carolCopy, daveCopy string
	for _, d := range dms {
		switch r.where[d].Channel {
		case "D-carol":
			carolCopy = d
		case "D-dave":
			daveCopy = d
		}
	}
	if err := clickOn(h, "carol", ref, carolCopy, true); err != nil {
		t.Fatalf("click on a DM copy: %v", err)
	}
	wantSurface(t, h, "carol", confirm.SurfaceDM)
	if err := clickOn(h, "dave", ref, daveCopy, false); !errors.Is(err, bot.ErrAlreadyClosed) {
		t.Fatalf("a second click on another copy: %v", err)
	}
	if h.tools["deploy"].Runs.Load() != 1 {
		t.Fatalf("runs: %d", h.tools["deploy"].Runs.Load())
	}
	for _, ref := range append(main, dms...) {
		if c := r.card(ref); !c.Complete() || c.Calls[0].State.By != "carol" {
			t.Fatalf("copy %s not updated: %+v", ref, c.Calls[0].State)
		}
	}
}

func TestExtendOncePushesTheDeadline(t *testing.T) {
	h, r := routed(t, bot.Channel{Approvers: []string{"alice"}}, nil)
	h.push(calls(tc("a", "deploy", `{}`)), text("done"))
	h.turn("bob", "deploy")
	main := r.refsIn("C1")[0]
	c := r.card(main)
	if c.ExtendRef == "" || c.ExtendBy != 10*time.Minute {
		t.Fatalf("no Extend offered: %q %v", c.ExtendRef, c.ExtendBy)
	}
	before, extendRef := c.ExpiresAt, c.ExtendRef
	ext := func(user string) error {
		return h.bot.Extend(context.Background(), bot.Click{Platform: "test", Channel: "C1", User: user, Ref: extendRef, Message: main})
	}
	if err := ext("mallory"); !errors.Is(err, bot.ErrNotApprover) {
		t.Fatalf("a non-approver extended: %v", err)
	}
	h.now.Add(int64(8 * time.Minute))
	if err := ext("alice"); err != nil {
		t.Fatal(err)
	}
	c = r.card(main)
	if !c.ExpiresAt.Equal(before.Add(10*time.Minute)) || c.Extended == nil || c.Extended.By != "alice" || c.ExtendRef != "" {
		t.Fatalf("after extend: expires %v (was %v), extended %+v, ref %q", c.ExpiresAt, before, c.Extended, c.ExtendRef)
	}
	if err := ext("alice"); !errors.Is(err, bot.ErrAlreadyExtended) {
		t.Fatalf("a second extend: %v", err)
	}
	// Past the old deadline the card still waits, and a click counts.
	h.now.Add(int64(5 * time.Minute))
	if err := h.bot.Sweep(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := clickOn(h, "alice", c.Calls[0].Ref, main, true); err != nil {
		t.Fatalf("a click before the new deadline: %v", err)
	}
	if h.tools["deploy"].Runs.Load() != 1 {
		t.Fatal("did not run")
	}
	events, _ := h.store.AuditEvents(context.Background(), confirm.AuditFilter{})
	n := 0
	for _, e := range events {
		if e.Kind == confirm.AuditExtended {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("%d extended audit events", n)
	}
}

func TestEditIsValidatedRecheckedAndRunsWithTheNewArguments(t *testing.T) {
	scaleTooBig := confirm.PolicyFunc(func(rq confirm.Request) confirm.Verdict {
		if rq.Call.Name == "deploy" && strings.Contains(string(rq.Call.Args), `"replicas":500`) {
			return confirm.Verdict{Deny: true, DenyRule: "max-replicas", DenyMessage: "at most 200 replicas"}
		}
		return confirm.Verdict{}
	})
	h, r := routed(t, bot.Channel{Approvers: []string{"alice", "bob"}}, func(c *bot.Config) {
		c.Policy = confirm.NewPolicy(true, nil, scaleTooBig)
	})
	h.push(calls(tc("a", "deploy", `{"service":"web","replicas":120}`)), text("scaled"))
	h.turn("carol", "scale web")
	main := r.refsIn("C1")[0]
	call := r.card(main).Calls[0]
	if !call.Editable {
		t.Fatal("a waiting call offers no Edit…")
	}
	click := bot.Click{Platform: "test", Channel: "C1", User: "alice", Ref: call.Ref, Message: main}
	form, err := h.bot.EditForm(context.Background(), click)
	if err != nil || !strings.Contains(form.Args, `"replicas": 120`) || form.Tool != "deploy" || form.Number != 1 {
		t.Fatalf("form %+v, %v", form, err)
	}
	mallory := click
	mallory.User = "mallory"
	if _, err := h.bot.EditForm(context.Background(), mallory); !errors.Is(err, bot.ErrNotApprover) {
		t.Fatalf("a non-approver got the form: %v", err)
	}
	for _, bad := range []string{`not json`, `[1]`, `{"a":1} {"b":2}`, `{"bad":1}`, `{"a":1,"a":2}`, `{"service":"web","replicas":500}`} {
		err := h.bot.Edit(context.Background(), click, bad)
		var ee *bot.EditError
		if !errors.As(err, &ee) || ee.Message == "" {
			t.Fatalf("edit %q: %v", bad, err)
		}
	}
	if h.tools["deploy"].Runs.Load() != 0 || !r.card(main).Calls[0].Open() || r.card(main).Calls[0].Edited != nil {
		t.Fatal("a refused edit changed something")
	}
	if err := h.bot.Edit(context.Background(), mallory, `{"service":"web","replicas":12}`); !errors.Is(err, bot.ErrNotApprover) {
		t.Fatalf("a non-approver edited: %v", err)
	}
	if err := h.bot.Edit(context.Background(), click, "{\"service\": \"web\",\n \"replicas\": 12}"); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the edited call ran and the model answered", func() bool {
		return h.tools["deploy"].Runs.Load() == 1 && len(h.model.Requests()) == 2
	})
	h.tools["deploy"].Mu.Lock()
	got := append([]string(nil), h.tools["deploy"].Args...)
	h.tools["deploy"].Mu.Unlock()
	if len(got) != 1 || got[0] != `{"service":"web","replicas":12}` {
		t.Fatalf("ran with %q", got)
	}
	res := lastToolResults(t, h.lastRequest())
	if !strings.HasPrefix(res[0].Content, bot.EditedPrefix+`{"service":"web","replicas":12}`) {
		t.Fatalf("model told %q", res[0].Content)
	}
	// The model's own call is kept as it asked it.
	for _, m := range h.lastRequest().Messages {
		if m.Role == model.RoleAssistant && len(m.ToolCalls) > 0 && string(m.ToolCalls[0].Args) != `{"service":"web","replicas":120}` {
			t.Fatalf("the model's call was rewritten: %s", m.ToolCalls[0].Args)
		}
	}
	c := r.card(main).Calls[0]
	if c.Edited == nil || c.Edited.By != "alice" || len(c.Edited.Changes) != 1 || c.Edited.Changes[0] != (cardpkg.Change{Key: "replicas", Before: "120", After: "12"}) {
		t.Fatalf("card edit %+v", c.Edited)
	}
	if c.State.Kind != cardpkg.Allowed || c.State.By != "alice" || !strings.Contains(c.Summary, `"replicas": 12`) && !strings.Contains(c.Summary, `"replicas":12`) {
		t.Fatalf("card call %+v summary %q", c.State, c.Summary)
	}
}

// An edit that decides its call is audited as decided from the edit form.
func TestEditThatDecidesIsAuditedFromTheEditForm(t *testing.T) {
	h, r := routed(t, bot.Channel{Approvers: []string{"alice"}}, nil)
	h.push(calls(tc("a", "deploy", `{"v":1}`)), text("ok"))
	h.turn("bob", "go")
	main := r.refsIn("C1")[0]
	ref := r.card(main).Calls[0].Ref
	if err := h.bot.Edit(context.Background(), bot.Click{Platform: "test", Channel: "C1", User: "alice", Ref: ref, Message: main}, `{"v":2}`); err != nil {
		t.Fatal(err)
	}
	wantSurface(t, h, "alice", confirm.SurfaceEdit)
}

func TestEditVoidsEarlierApprovalsAndHonoursSelfApproval(t *testing.T) {
	two := confirm.PolicyFunc(func(rq confirm.Request) confirm.Verdict {
		if rq.Call.Name == "deploy" {
			return confirm.Verdict{Ask: true, Approvals: 2}
		}
		return confirm.Verdict{}
	})
	h, r := routed(t, bot.Channel{Approvers: []string{"alice", "bob", "carol"}}, func(c *bot.Config) {
		c.Policy = confirm.NewPolicy(true, nil, two)
	})
	h.push(calls(tc("a", "deploy", `{"v":1}`)), text("ok"))
	h.turn("carol", "go")
	main := r.refsIn("C1")[0]
	ref := r.card(main).Calls[0].Ref
	if err := h.bot.Edit(context.Background(), bot.Click{Platform: "test", Channel: "C1", User: "carol", Ref: ref, Message: main}, `{"v":2}`); !errors.Is(err, bot.ErrSelfApproval) {
		t.Fatalf("the requester edited (self-approval off): %v", err)
	}
	if err := clickOn(h, "alice", ref, main, true); err != nil {
		t.Fatal(err)
	}
	if err := h.bot.Edit(context.Background(), bot.Click{Platform: "test", Channel: "C1", User: "bob", Ref: ref, Message: main}, `{"v":2}`); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the card shows the edit", func() bool { return r.card(main).Calls[0].Edited != nil })
	c := r.card(main).Calls[0]
	if !c.Open() || len(c.Votes) != 1 || c.Votes[0].By != "bob" {
		t.Fatalf("after the edit: open %v votes %+v (alice approved other arguments)", c.Open(), c.Votes)
	}
	// Alice's card still showed the old arguments: her click there counts
	// for nothing; on the updated card it does.
	if err := clickOn(h, "alice", ref, main, true); !errors.Is(err, bot.ErrStaleRevision) {
		t.Fatalf("alice's allow from before the edit: %v, want ErrStaleRevision", err)
	}
	if c.Ref == ref {
		t.Fatalf("the edited call's buttons carry the same reference %q as before the edit", ref)
	}
	if err := clickOn(h, "alice", c.Ref, main, true); err != nil {
		t.Fatalf("alice approves the edited call: %v", err)
	}
	wantSurface(t, h, "alice", confirm.SurfaceThread)
	if err := h.bot.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if h.tools["deploy"].Runs.Load() != 1 {
		t.Fatal("the edited call did not run after its second approval")
	}
}

func TestEscalationFiresOnceAndWidensApprovers(t *testing.T) {
	step := bot.EscalationStep{After: 5 * time.Minute, Mention: confirm.Approvers{Users: []string{"lead"}}, Approvers: confirm.Approvers{Users: []string{"lead"}}}
	path := filepath.Join(t.TempDir(), "airlock.db")
	h, r := routedAt(t, path, bot.Channel{Approvers: []string{"alice"}, ApprovalsChannel: "CAPPROVE"}, func(c *bot.Config) {
		c.Escalation = []bot.EscalationStep{step}
	})
	h.push(calls(tc("a", "deploy", `{}`)), text("done"))
	h.turn("bob", "deploy")
	main := r.refsIn("CAPPROVE")[0]
	c := r.card(main)
	if len(c.Escalations) != 1 || c.Escalations[0].Fired || !c.Escalations[0].At.Equal(c.CreatedAt.Add(5*time.Minute)) {
		t.Fatalf("card escalations %+v", c.Escalations)
	}
	ref := c.Calls[0].Ref
	if err := clickOn(h, "lead", ref, main, true); !errors.Is(err, bot.ErrNotApprover) {
		t.Fatalf("the lead decided before the escalation: %v", err)
	}
	ctx := context.Background()
	h.now.Add(int64(4 * time.Minute))
	_ = h.bot.Sweep(ctx)
	if n := escalationPosts(r); n != 0 {
		t.Fatal("escalated early")
	}
	h.now.Add(int64(61 * time.Second))
	_ = h.bot.Sweep(ctx)
	_ = h.bot.Sweep(ctx)
	// A replica on the same database sweeps too: the step fires once.
	h2 := newHarnessWith(t, path, func(c *bot.Config) {
		c.Channels = bot.NewChannels([]bot.Channel{{Platform: "test", ID: "C1", Approvers: []string{"alice"}, ApprovalsChannel: "CAPPROVE"}})
		c.Escalation = []bot.EscalationStep{step}
		c.Now = func() time.Time { return time.Unix(0, h.now.Load()).UTC() }
	})
	h2.bot.Register("test", r)
	_ = h2.bot.Sweep(ctx)
	if n := escalationPosts(r); n != 1 {
		t.Fatalf("%d escalation messages: %q", n, r.posts)
	}
	r.mu.Lock()
	post := r.posts[len(r.posts)-1]
	r.mu.Unlock()
	if !strings.HasPrefix(post, "CAPPROVE/: ") || !strings.Contains(post, "lead") {
		t.Fatalf("escalation posted as %q", post)
	}
	if c := r.card(main); !c.Escalations[0].Fired {
		t.Fatal("the card does not show the step fired")
	}
	if err := clickOn(h, "lead", ref, main, true); err != nil {
		t.Fatalf("the lead after the escalation: %v", err)
	}
	if h.tools["deploy"].Runs.Load() != 1 {
		t.Fatal("did not run")
	}
}

func escalationPosts(r *router) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, p := range r.posts {
		if strings.Contains(p, "escalated") {
			n++
		}
	}
	return n
}

// eventually waits (up to 10 s) until cond holds.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// A run faster than Config.RunningCardDelay updates the card once, with
// its outcome; a slower one first shows the decision and "running", then
// the outcome.
func TestCardUpdatesOnceForAFastRunTwiceForASlowOne(t *testing.T) {
	h := newHarnessWith(t, "", func(c *bot.Config) { c.RunningCardDelay = 5 * time.Second })
	h.push(calls(tc("a", "deploy", `{}`)), text("done"))
	h.turn("bob", "deploy")
	if err := h.click("alice", 1, true, ""); err != nil {
		t.Fatal(err)
	}
	h.plat.Mu.Lock()
	n, last := len(h.plat.Updates), h.plat.Updates[len(h.plat.Updates)-1]
	h.plat.Mu.Unlock()
	if n != 1 || last.Calls[0].Run != confirm.RunSucceeded {
		t.Fatalf("a fast run: %d updates, the last %+v", n, last.Calls[0].Run)
	}

	// A slow run (the delay made short here): the decision first.
	h = newHarnessWith(t, "", func(c *bot.Config) { c.RunningCardDelay = 20 * time.Millisecond })
	block := make(chan struct{})
	h.tools["deploy"].Block = block
	h.push(calls(tc("b", "deploy", `{}`)), text("done"))
	h.turn("bob", "deploy again")
	h.plat.Mu.Lock()
	card := h.plat.Cards[len(h.plat.Cards)-1]
	h.plat.Mu.Unlock()
	decided := make(chan error, 1)
	go func() {
		decided <- h.bot.Decide(context.Background(), bot.Click{Platform: "test", Channel: "C1", User: "alice", Ref: card.Calls[0].Ref, Message: cardMsg(card.Calls[0].Ref), Allow: true})
	}()
	eventually(t, "the card shows the decision while the tool runs", func() bool {
		c := h.plat.LastCard()
		return c.BatchID == card.BatchID && c.Calls[0].State.Kind == cardpkg.Allowed && c.Calls[0].Run != confirm.RunSucceeded
	})
	close(block)
	if err := <-decided; err != nil {
		t.Fatal(err)
	}
	if c := h.plat.LastCard(); c.Calls[0].Run != confirm.RunSucceeded {
		t.Fatalf("after the run the card shows %q", c.Calls[0].Run)
	}
}

// A process that does not serve a conversation's platform leaves its
// reminder, escalation and expiry to one that does, instead of using them
// up (and continuing a conversation it cannot post in).
func TestSweepLeavesOtherPlatformsRemindersAndEscalations(t *testing.T) {
	step := bot.EscalationStep{After: time.Minute, Mention: confirm.Approvers{Users: []string{"lead"}}}
	h, r := routed(t, bot.Channel{Approvers: []string{"alice"}}, func(c *bot.Config) {
		c.RemindBefore = 2 * time.Minute
		c.Escalation = []bot.EscalationStep{step}
	})
	h.push(calls(tc("a", "deploy", `{}`)))
	h.turn("bob", "deploy")
	other, err := bot.New(bot.Config{Store: h.store, Model: h.model, Tools: h.tools, Timeout: 10 * time.Minute,
		RemindBefore: 2 * time.Minute, Escalation: []bot.EscalationStep{step},
		Now: func() time.Time { return time.Unix(0, h.now.Load()).UTC() }})
	if err != nil {
		t.Fatal(err)
	}
	h.now.Add(int64(9 * time.Minute))
	if err := other.Sweep(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := h.bot.Sweep(context.Background()); err != nil {
		t.Fatal(err)
	}
	r.mu.Lock()
	said := strings.Join(r.posts, "\n")
	r.mu.Unlock()
	if !strings.Contains(said, "still needs a decision") || !strings.Contains(said, "escalated") {
		t.Fatalf("the serving process did not remind and escalate: %q", said)
	}
	// Past the deadline, the other process leaves the expiry too: the
	// serving one expires the card and continues the conversation there.
	h.push(text("it expired, so I did nothing"))
	h.now.Add(int64(2 * time.Minute))
	if err := other.Sweep(context.Background()); err != nil {
		t.Fatal(err)
	}
	conv, err := h.store.FindConversation(context.Background(), "test", "C1", "T1")
	if err != nil {
		t.Fatal(err)
	}
	if c, _ := h.store.PendingBatch(context.Background(), conv.ID); c == nil {
		t.Fatal("a process not serving the platform expired the card")
	}
	if err := h.bot.Sweep(context.Background()); err != nil {
		t.Fatal(err)
	}
	r.mu.Lock()
	said = strings.Join(r.posts, "\n")
	r.mu.Unlock()
	if !strings.Contains(said, "it expired, so I did nothing") {
		t.Fatalf("the conversation was not continued after the expiry: %q", said)
	}
}
