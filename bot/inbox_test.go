package bot_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/airlockhq/airlock/bot"
	"github.com/airlockhq/airlock/confirm"
	"github.com/airlockhq/airlock/model"
)

// replayPlatform is the test platform recording the deliveries handed
// to it to work again.
type replayPlatform struct {
	platform
	mu       sync.Mutex
	replayed []confirm.InboxItem
	err      error
}

func (p *replayPlatform) Replay(_ context.Context, it confirm.InboxItem) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.err != nil {
		return p.err
	}
	p.replayed = append(p.replayed, it)
	return nil
}

func (p *replayPlatform) keys() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []string
	for _, it := range p.replayed {
		out = append(out, it.Key)
	}
	return out
}

func inboxJobOf(b *bot.Bot) func(context.Context) error {
	for _, j := range b.Jobs(time.Second) {
		if j.Name == bot.JobInbox {
			return j.Run
		}
	}
	return nil
}

func delivery(key string) confirm.InboxItem {
	return confirm.InboxItem{Platform: "test", Key: key, Kind: "interaction", Payload: []byte(`{"key":"` + key + `"}`)}
}

// A click worked again after the process that acknowledged it died, once
// its decision was stored, changes nothing and is no error: the clicker
// is not told their click failed or was a second one. Worked again when
// someone else decided the call meanwhile, it is answered as any late
// click.
func TestReplayedClickCountedOnce(t *testing.T) {
	onBothDatabases(t, func(t *testing.T, driver, dsn string) {
		h := newHarnessOn(t, driver, dsn, func(c *bot.Config) {
			c.Channels = bot.NewChannels([]bot.Channel{{Platform: "test", ID: "C1", Approvers: []string{"alice", "carol"}}})
		})
		ctx := context.Background()
		h.push(calls(tc("", "deploy", `{"n":1}`), tc("", "deploy", `{"n":2}`)), text("done"))
		h.turn("bob", "deploy")
		card := h.plat.LastCard()
		click := func(user string, n int, allow, replayed bool) error {
			ref := card.Calls[n-1].Ref
			return h.bot.Decide(ctx, bot.Click{Platform: "test", Channel: "C1", User: user, Ref: ref, Message: cardMsg(ref), Allow: allow, Replayed: replayed})
		}
		if err := click("alice", 1, true, false); err != nil {
			t.Fatal(err)
		}
		rejected := h.auditCount(confirm.AuditRejectedClick)
		// The process died after alice's allow was stored: worked again.
		if err := click("alice", 1, true, true); err != nil {
			t.Fatalf("alice's allow, counted and worked again: %v; want no error", err)
		}
		if n := h.auditCount(confirm.AuditRejectedClick); n != rejected {
			t.Fatalf("the replayed click was audited as rejected (%d rows, was %d)", n, rejected)
		}
		// A deny worked again after it was stored, and that deny ends
		// the batch: still nothing.
		if err := click("carol", 2, false, false); err != nil {
			t.Fatal(err)
		}
		if err := click("carol", 2, false, true); err != nil {
			t.Fatalf("carol's deny worked again: %v", err)
		}
		if got := h.ranCalls(); len(got) != 1 || h.tools["deploy"].Args[0] != `{"n":1}` {
			t.Fatalf("ran %v; want the first call once", got)
		}
		// carol's allow of call 1, acknowledged before alice's counted and
		// worked only now: the call was decided meanwhile, by someone else.
		if err := click("carol", 1, true, true); !errors.Is(err, bot.ErrAlreadyClosed) {
			t.Fatalf("a replayed click on a call decided by another: %v; want ErrAlreadyClosed", err)
		}
		// Not replayed, a repeated click is answered as before.
		if err := click("alice", 1, true, false); !errors.Is(err, bot.ErrAlreadyClosed) {
			t.Fatalf("alice's second click: %v; want ErrAlreadyClosed", err)
		}
	})
}

// A replayed allow of a call needing two approvals that was counted
// (one vote of two) changes nothing: no second vote, no error.
func TestReplayedVoteCountedOnce(t *testing.T) {
	onBothDatabases(t, func(t *testing.T, driver, dsn string) {
		h := newHarnessOn(t, driver, dsn, func(c *bot.Config) {
			c.DefaultApprovals = 2
			c.Channels = bot.NewChannels([]bot.Channel{{Platform: "test", ID: "C1", Approvers: []string{"alice", "carol"}}})
		})
		ctx := context.Background()
		h.push(calls(tc("", "deploy", `{}`)), text("done"))
		h.turn("bob", "deploy")
		ref := h.plat.LastCard().Calls[0].Ref
		c := bot.Click{Platform: "test", Channel: "C1", User: "alice", Ref: ref, Message: cardMsg(ref), Allow: true}
		if err := h.bot.Decide(ctx, c); err != nil {
			t.Fatal(err)
		}
		c.Replayed = true
		if err := h.bot.Decide(ctx, c); err != nil {
			t.Fatalf("alice's counted vote worked again: %v", err)
		}
		c.Replayed = false
		var ve *bot.VoteError
		if err := h.bot.Decide(ctx, c); !errors.As(err, &ve) {
			t.Fatalf("alice's second vote: %v; want a VoteError", err)
		}
		if len(h.ranCalls()) != 0 {
			t.Fatal("one approver's vote, worked again, ran the call")
		}
	})
}

// A mention whose turn stored its message and died before the model
// answered is answered when worked again, once: the message is not stored
// twice, and worked again after it was answered, the model is not asked.
func TestReplayedTurnAnsweredOnce(t *testing.T) {
	onBothDatabases(t, func(t *testing.T, driver, dsn string) {
		h := newHarnessOn(t, driver, dsn, nil)
		ctx := context.Background()
		turn := bot.Turn{Platform: "test", Channel: "C1", Thread: "T1", User: "bob", Text: "how is api?", Inbox: "Ev1"}
		if ok, err := h.bot.Record(ctx, delivery("Ev1")); err != nil || !ok {
			t.Fatalf("Record: %v %v", ok, err)
		}
		// The first attempt: the model is never reached (the process dies
		// in the request; here the request fails, leaving the same).
		h.model.PushError(errors.New("killed"))
		if err := h.bot.HandleTurn(ctx, turn); err != nil {
			t.Fatal(err)
		}
		turn.Replayed = true
		h.push(text("api is fine"))
		if err := h.bot.HandleTurn(ctx, turn); err != nil {
			t.Fatal(err)
		}
		if p := h.plat.LastPost(); p != "api is fine" {
			t.Fatalf("the replayed turn was not answered: last post %q", p)
		}
		asked := len(h.model.Requests())
		if err := h.bot.HandleTurn(ctx, turn); err != nil {
			t.Fatal(err)
		}
		if n := len(h.model.Requests()); n != asked {
			t.Fatalf("a turn answered before asked the model again (%d requests, was %d)", n, asked)
		}
		conv, err := h.store.FindConversation(ctx, "test", "C1", "T1")
		if err != nil {
			t.Fatal(err)
		}
		hist, err := h.store.Messages(ctx, conv.ID)
		if err != nil {
			t.Fatal(err)
		}
		users := 0
		for _, m := range hist {
			if m.Role == string(model.RoleUser) {
				users++
			}
		}
		if users != 1 || len(hist) != 2 {
			t.Fatalf("history after the replays: %d messages, %d from the person; want the question once and its answer", len(hist), users)
		}
		// A turn worked again that its first attempt never stored is a
		// turn like any other.
		if _, err := h.bot.Record(ctx, delivery("Ev2")); err != nil {
			t.Fatal(err)
		}
		h.push(text("web is fine"))
		if err := h.bot.HandleTurn(ctx, bot.Turn{Platform: "test", Channel: "C1", Thread: "T1", User: "bob", Text: "and web?", Inbox: "Ev2", Replayed: true}); err != nil {
			t.Fatal(err)
		}
		if p := h.plat.LastPost(); p != "web is fine" {
			t.Fatalf("a replayed turn never stored was not answered: %q", p)
		}
	})
}

// The inbox job works off what a dead process left, through the
// platform, once; not what a live process holds; gives a delivery back
// when the platform is not ready; and gives up on one that never
// finishes.
func TestInboxJob(t *testing.T) {
	onBothDatabases(t, func(t *testing.T, driver, dsn string) {
		h := newHarnessOn(t, driver, dsn, nil)
		p := &replayPlatform{}
		h.bot.Register("test", p)
		ctx := context.Background()
		run := inboxJobOf(h.bot)
		for _, k := range []string{"dead-1", "dead-2"} {
			if _, err := h.store.RecordInbox(ctx, delivery(k), "dead", time.Minute); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := h.bot.Record(ctx, delivery("mine")); err != nil {
			t.Fatal(err)
		}
		other := delivery("elsewhere")
		other.Platform = "discord" // no such platform here
		if _, err := h.store.RecordInbox(ctx, other, "dead", time.Minute); err != nil {
			t.Fatal(err)
		}
		if err := run(ctx); err != nil {
			t.Fatal(err)
		}
		if got := p.keys(); len(got) != 0 {
			t.Fatalf("worked %v while their holder's claim lived", got)
		}
		h.advance(2 * time.Minute) // the dead holder's claims lapse; this process renews its own
		if err := run(ctx); err != nil {
			t.Fatal(err)
		}
		if got := p.keys(); !slices.Equal(got, []string{"dead-1", "dead-2"}) {
			t.Fatalf("worked %v; want the dead process's two, not this one's or another platform's", got)
		}
		h.bot.Finished(ctx, "test", "dead-1")
		h.advance(2 * time.Minute)
		if err := run(ctx); err != nil {
			t.Fatal(err)
		}
		if got := p.keys(); len(got) != 2 {
			t.Fatalf("worked %v: this process took what it holds", got)
		}
		// A second process: dead-2, held by the first, which renews it, is
		// not taken; once the first dies (stops renewing), it is, once.
		b2 := newBotOn(t, h, p)
		if err := inboxJobOf(b2)(ctx); err != nil {
			t.Fatal(err)
		}
		if got := p.keys(); len(got) != 2 {
			t.Fatalf("the second process took %v from a live one", got)
		}
		h.advance(2 * time.Minute)
		p.err = bot.ErrNotReady
		if err := inboxJobOf(b2)(ctx); err != nil {
			t.Fatal(err)
		}
		p.err = nil
		if err := inboxJobOf(b2)(ctx); err != nil { // given back: taken again at once
			t.Fatal(err)
		}
		if got := p.keys(); !slices.Equal(got, []string{"dead-1", "dead-2", "dead-2", "mine"}) {
			t.Fatalf("worked %v; want the first process's after it died, again after the platform was not ready", got)
		}
		// A delivery never finished is worked at most 5 times, then given
		// up: no replica is killed by it forever.
		for range 10 {
			h.advance(2 * time.Minute)
			if err := inboxJobOf(b2)(ctx); err != nil {
				t.Fatal(err)
			}
			h.advance(2 * time.Minute)
			if err := run(ctx); err != nil {
				t.Fatal(err)
			}
		}
		n := 0
		for _, k := range p.keys() {
			if k == "mine" {
				n++
			}
		}
		if n != 5 {
			t.Fatalf("a delivery never finished was worked %d times; want 5", n)
		}
	})
}

// newBotOn is a second process on h's database and clock, with platform p.
func newBotOn(t *testing.T, h *harness, p bot.Platform) *bot.Bot {
	t.Helper()
	b, err := bot.New(bot.Config{Store: h.store, Model: h.model, Tools: h.tools, Now: func() time.Time { return time.Unix(0, h.now.Load()).UTC() },
		Channels: bot.NewChannels([]bot.Channel{{Platform: "test", ID: "C1", Approvers: []string{"alice"}}}), WorkerID: fmt.Sprintf("worker-%d", workerSeq.Add(1))})
	if err != nil {
		t.Fatal(err)
	}
	b.Register("test", p)
	return b
}

// Replicas' inbox jobs, run at once, work each delivery a dead process
// left exactly once.
func TestInboxReplicasWorkOnce(t *testing.T) {
	onBothDatabases(t, func(t *testing.T, driver, dsn string) {
		h := newHarnessOn(t, driver, dsn, nil)
		ctx := context.Background()
		const n = 30
		for i := range n {
			if _, err := h.store.RecordInbox(ctx, delivery(fmt.Sprintf("left-%02d", i)), "dead", time.Minute); err != nil {
				t.Fatal(err)
			}
		}
		h.advance(2 * time.Minute)
		p := &replayPlatform{}
		var wg sync.WaitGroup
		for range 3 {
			b := newBotOn(t, h, p)
			wg.Go(func() {
				if err := inboxJobOf(b)(ctx); err != nil {
					t.Error(err)
				}
			})
		}
		wg.Wait()
		got := p.keys()
		slices.Sort(got)
		if len(got) != n || len(slices.Compact(got)) != n {
			t.Fatalf("%d deliveries worked (%d distinct); want each of %d once", len(got), len(slices.Compact(got)), n)
		}
	})
}

// A `run` command's delivery is done before its run starts: the inbox
// job never starts that run a second time.
func TestRunCommandDeliveryDoneBeforeTheRun(t *testing.T) {
	h := newRBHarness(t, func(c *bot.Config) { c.Runbooks = compiledBooks(t) })
	ctx := context.Background()
	if _, err := h.bot.Record(ctx, delivery("Ev-run")); err != nil {
		t.Fatal(err)
	}
	if err := h.bot.HandleTurn(ctx, bot.Turn{Platform: "test", Channel: "C1", Thread: "T1", User: "bob", Text: `run restart service="api"`, Inbox: "Ev-run"}); err != nil {
		t.Fatal(err)
	}
	h.settle()
	if len(h.liveRuns()) != 1 {
		t.Fatalf("runs %v", h.liveRuns())
	}
	h.advance(2 * time.Minute)
	got, err := h.store.ClaimInbox(ctx, "another", []string{"test"}, time.Minute, 10)
	if err != nil || len(got) != 0 {
		t.Fatalf("the run command's delivery is left to work again: %v %v", got, err)
	}
}
