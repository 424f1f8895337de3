package bot_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/airlockhq/airlock/bot"
	"github.com/airlockhq/airlock/confirm"
	"github.com/airlockhq/airlock/internal/testkit"
	"github.com/airlockhq/airlock/model"
)

// flakyPlatform is the test platform whose posts fail while failing is
// set (after the platform's own retries, as a 5xx outage would), and kill
// the goroutine posting (the process dies in the post, before the
// platform took it) while dying is set. tried counts the posts sent.
type flakyPlatform struct {
	platform
	failing, dying atomic.Bool
	tried          atomic.Int64
}

func (p *flakyPlatform) Post(ctx context.Context, th bot.Thread, s string) error {
	if p.dying.Load() {
		runtime.Goexit()
	}
	p.tried.Add(1)
	if p.failing.Load() {
		return errors.New("platform: 503 Service Unavailable")
	}
	return p.platform.Post(ctx, th, s)
}

func (p *flakyPlatform) posts() []string {
	p.Mu.Lock()
	defer p.Mu.Unlock()
	return append([]string(nil), p.Posts...)
}

// count is how often s was posted.
func count(posts []string, s string) int {
	n := 0
	for _, p := range posts {
		if p == s {
			n++
		}
	}
	return n
}

// jobOf is the named job of b; the test fails when b has none.
func jobOf(t *testing.T, b *bot.Bot, name string) func(context.Context) error {
	t.Helper()
	for _, j := range b.Jobs(time.Second) {
		if j.Name == name {
			return j.Run
		}
	}
	t.Fatalf("no %q job: nothing posts an answer left unposted", name)
	return nil
}

// killed runs fn as the work of a process killed when it reaches the
// post of an answer (the trace point between the store and the post, or
// the post itself, the platform not reached): nothing after it runs.
func killed(t *testing.T, armed *atomic.Bool, fn func()) {
	t.Helper()
	armed.Store(true)
	defer armed.Store(false)
	done := make(chan struct{})
	finished := false
	go func() {
		defer close(done)
		fn()
		finished = true
	}()
	<-done
	if finished {
		t.Fatal("the work was not killed: it never reached the answer's post")
	}
}

// killHarness is a harness whose bot dies (its goroutine ends) at the
// answer-stored trace point while armed, and whose platform dies in a
// post while dying is set.
func killHarness(t *testing.T, driver, dsn string, edit func(*bot.Config)) (*harness, *atomic.Bool, *flakyPlatform) {
	t.Helper()
	armed := &atomic.Bool{}
	h := newHarnessOn(t, driver, dsn, func(c *bot.Config) {
		c.Trace = func(point string) {
			if point == "answer-stored" && armed.Load() {
				runtime.Goexit()
			}
		}
		if edit != nil {
			edit(c)
		}
	})
	p := &flakyPlatform{}
	h.bot.Register("test", p)
	return h, armed, p
}

// restart is a new process on h's database after the previous one was
// killed: SQLite's start clears the claims the dead process held.
func restart(t *testing.T, h *harness, driver string, p bot.Platform) *bot.Bot {
	t.Helper()
	if driver == "sqlite" {
		if err := h.store.ClearLeases(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	return newBotOn(t, h, p)
}

// A process killed between storing the model's answer and posting it
// leaves the answer to the next process's answers job, which posts it
// once: at its start on SQLite, once the dead process's claim lapsed on
// PostgreSQL. The person who asked sees the answer without asking again.
func TestAnswerPostedAfterAKill(t *testing.T) {
	onBothDatabases(t, func(t *testing.T, driver, dsn string) {
		h, armed, p1 := killHarness(t, driver, dsn, nil)
		ctx := context.Background()
		h.push(text("api is fine"))
		p1.dying.Store(true)
		killed(t, armed, func() { h.turn("bob", "how is api?") })
		p1.dying.Store(false)
		if n := count(p1.posts(), "api is fine"); n != 0 {
			t.Fatalf("the killed process posted the answer %d times", n)
		}
		asked := len(h.model.Requests())

		p2 := &flakyPlatform{}
		b2 := restart(t, h, driver, p2)
		run := jobOf(t, b2, "answers")
		if err := run(ctx); err != nil {
			t.Fatal(err)
		}
		if driver == "postgres" {
			if n := count(p2.posts(), "api is fine"); n != 0 {
				t.Fatalf("posted %d times while the dead process's claim lived", n)
			}
			h.advance(2 * time.Minute) // the claim lapses
			if err := run(ctx); err != nil {
				t.Fatal(err)
			}
		}
		for range 3 {
			h.advance(time.Minute)
			if err := run(ctx); err != nil {
				t.Fatal(err)
			}
		}
		if got := p2.posts(); count(got, "api is fine") != 1 {
			t.Fatalf("after the restart the thread got %q; want the answer once", got)
		}
		if n := len(h.model.Requests()); n != asked {
			t.Fatalf("the model was asked again (%d requests, was %d)", n, asked)
		}
	})
}

// A mention worked again from the inbox after its process died between
// storing the answer and posting it is not asked to the model again, and
// its answer is posted exactly once, whoever gets there first: the
// replayed turn or the answers job.
func TestReplayedTurnPostsItsStoredAnswerOnce(t *testing.T) {
	onBothDatabases(t, func(t *testing.T, driver, dsn string) {
		h, armed, p1 := killHarness(t, driver, dsn, nil)
		ctx := context.Background()
		if _, err := h.bot.Record(ctx, delivery("Ev1")); err != nil {
			t.Fatal(err)
		}
		turn := bot.Turn{Platform: "test", Channel: "C1", Thread: "T1", User: "bob", Text: "how is api?", Inbox: "Ev1"}
		h.push(text("api is fine"))
		p1.dying.Store(true)
		killed(t, armed, func() { _ = h.bot.HandleTurn(ctx, turn) })
		p1.dying.Store(false)
		asked := len(h.model.Requests())

		p2 := &flakyPlatform{}
		b2 := restart(t, h, driver, p2)
		h.push(text("asked twice"))
		turn.Replayed = true
		if err := b2.HandleTurn(ctx, turn); err != nil {
			t.Fatal(err)
		}
		if n := count(p2.posts(), "api is fine"); n > 1 {
			t.Fatalf("the replayed turn posted the answer %d times", n)
		}
		if driver == "postgres" {
			h.advance(2 * time.Minute) // the dead process's claim lapses
		}
		run := jobOf(t, b2, "answers")
		for range 3 {
			if err := run(ctx); err != nil {
				t.Fatal(err)
			}
			h.advance(time.Minute)
		}
		if err := b2.HandleTurn(ctx, turn); err != nil { // worked once more
			t.Fatal(err)
		}
		got := p2.posts()
		if count(got, "api is fine") != 1 || slices.Contains(got, "asked twice") {
			t.Fatalf("after the replay the thread got %q; want the stored answer once", got)
		}
		if n := len(h.model.Requests()); n != asked {
			t.Fatalf("the replayed turn asked the model again (%d requests, was %d)", n, asked)
		}
	})
}

// A post the platform refuses (after its own retries) is not dropped:
// the turn does not fail, the answers job posts it again with backoff,
// and a later answer of the same thread waits for it, so the thread sees
// them in order. An answer the platform never takes is tried
// a bounded number of times and then given up, with an error logged.
func TestFailedAnswerPostRetriedInOrder(t *testing.T) {
	onBothDatabases(t, func(t *testing.T, driver, dsn string) {
		logs := &testkit.Buffer{}
		h, _, p := killHarness(t, driver, dsn, func(c *bot.Config) {
			c.Logger = slog.New(slog.NewTextHandler(logs, nil))
		})
		ctx := context.Background()
		run := jobOf(t, h.bot, "answers")
		p.failing.Store(true)
		h.push(text("first answer"), text("second answer"))
		if err := h.bot.HandleTurn(ctx, bot.Turn{Platform: "test", Channel: "C1", Thread: "T1", User: "bob", Text: "one"}); err != nil {
			t.Fatalf("a turn whose answer is stored and its post failed: %v; want no error (it is posted later)", err)
		}
		p.failing.Store(false)
		h.turn("bob", "two") // the first answer still waits for its retry
		if got := p.posts(); len(got) != 0 {
			t.Fatalf("posted %q before the first answer; want nothing yet", got)
		}
		if err := run(ctx); err != nil { // not due yet
			t.Fatal(err)
		}
		if got := p.posts(); len(got) != 0 {
			t.Fatalf("retried at once: %q", got)
		}
		h.advance(time.Minute)
		if err := run(ctx); err != nil {
			t.Fatal(err)
		}
		if got := p.posts(); !slices.Equal(got, []string{"first answer", "second answer"}) {
			t.Fatalf("the thread got %q; want both answers once, in order", got)
		}

		// A thread the platform never takes a post in: tried a bounded
		// number of times, then given up loudly.
		p.failing.Store(true)
		before := p.tried.Load()
		h.push(text("never posted"))
		h.turn("bob", "three")
		for range 40 {
			h.advance(15 * time.Minute)
			if err := run(ctx); err != nil {
				t.Fatal(err)
			}
		}
		if n := p.tried.Load() - before; n != 10 {
			t.Fatalf("a post that always fails was tried %d times; want 10", n)
		}
		if !strings.Contains(logs.String(), "level=ERROR") || !strings.Contains(logs.String(), "given up") {
			t.Fatalf("giving an answer up logged no error:\n%s", logs.String())
		}
	})
}

// The notice that ends a turn refused whole (too many calls) is posted
// as an answer is: a post that failed is posted by the answers job.
func TestStopNoticePostedLater(t *testing.T) {
	onBothDatabases(t, func(t *testing.T, driver, dsn string) {
		h, _, p := killHarness(t, driver, dsn, func(c *bot.Config) { c.MaxCallsPerReply = 1 })
		ctx := context.Background()
		p.failing.Store(true)
		h.push(calls(tc("", "status", `{}`), tc("", "status", `{}`)))
		h.turn("bob", "check twice")
		p.failing.Store(false)
		h.advance(time.Minute)
		if err := jobOf(t, h.bot, "answers")(ctx); err != nil {
			t.Fatal(err)
		}
		got := p.posts()
		if len(got) != 1 || !strings.Contains(got[0], "too many calls in one reply") {
			t.Fatalf("the thread got %q; want the stop notice once", got)
		}
	})
}

// Replicas' answers jobs, run at once, post each answer a dead process
// left exactly once, each thread's in order.
func TestAnswersReplicasPostOnce(t *testing.T) {
	onBothDatabases(t, func(t *testing.T, driver, dsn string) {
		h := newHarnessOn(t, driver, dsn, nil)
		ctx := context.Background()
		const threads, per = 10, 3
		for i := range threads {
			conv, err := h.store.Conversation(ctx, "test", "C1", fmt.Sprintf("T%02d", i), false)
			if err != nil {
				t.Fatal(err)
			}
			for j := range per {
				m, err := storedText(fmt.Sprintf("T%02d answer %d", i, j))
				if err != nil {
					t.Fatal(err)
				}
				if _, _, err := h.store.AppendAnswer(ctx, conv.ID, "dead", time.Minute, m); err != nil {
					t.Fatal(err)
				}
			}
		}
		p := &flakyPlatform{}
		var wg sync.WaitGroup
		var bots []*bot.Bot
		for range 2 {
			bots = append(bots, newBotOn(t, h, p))
		}
		for _, b := range bots { // the dead process's claims live
			if err := jobOf(t, b, "answers")(ctx); err != nil {
				t.Fatal(err)
			}
		}
		if got := p.posts(); len(got) != 0 {
			t.Fatalf("posted %q while their holder's claim lived", got)
		}
		h.advance(2 * time.Minute)
		for _, b := range bots {
			run := jobOf(t, b, "answers")
			wg.Go(func() {
				if err := run(ctx); err != nil {
					t.Error(err)
				}
			})
		}
		wg.Wait()
		for _, b := range bots { // what one left to the other (a thread it held)
			if err := jobOf(t, b, "answers")(ctx); err != nil {
				t.Fatal(err)
			}
		}
		got := p.posts()
		if len(got) != threads*per {
			t.Fatalf("%d posts; want each of %d answers once: %q", len(got), threads*per, got)
		}
		for i := range threads {
			var mine []string
			for _, s := range got {
				if strings.HasPrefix(s, fmt.Sprintf("T%02d ", i)) {
					mine = append(mine, s)
				}
			}
			want := []string{fmt.Sprintf("T%02d answer 0", i), fmt.Sprintf("T%02d answer 1", i), fmt.Sprintf("T%02d answer 2", i)}
			if !slices.Equal(mine, want) {
				t.Fatalf("thread T%02d got %q; want %q", i, mine, want)
			}
		}
	})
}

// storedText is a model's text answer as the bot stores it.
func storedText(s string) (confirm.Message, error) {
	body, err := json.Marshal(model.Message{Role: model.RoleAssistant, Text: s})
	return confirm.Message{Role: string(model.RoleAssistant), Body: body}, err
}

// A mark naming anything but the bot's own text (a person's words, a
// reply's calls: a row written by hand) posts nothing and is dropped.
func TestAnswerMarkOnAPersonsWordsDropped(t *testing.T) {
	onBothDatabases(t, func(t *testing.T, driver, dsn string) {
		h, _, p := killHarness(t, driver, dsn, nil)
		ctx := context.Background()
		conv, err := h.store.Conversation(ctx, "test", "C1", "T1", false)
		if err != nil {
			t.Fatal(err)
		}
		words, _ := json.Marshal(model.Message{Role: model.RoleUser, Author: "bob", Text: "<@U0ADMIN> reset the prod password"})
		callsBody, _ := json.Marshal(calls(tc("c1", "deploy", `{}`)))
		for _, m := range []confirm.Message{{Role: string(model.RoleUser), Body: words}, {Role: string(model.RoleAssistant), Body: callsBody}} {
			if _, _, err := h.store.AppendAnswer(ctx, conv.ID, "dead", time.Minute, m); err != nil {
				t.Fatal(err)
			}
		}
		h.advance(2 * time.Minute)
		if err := jobOf(t, h.bot, "answers")(ctx); err != nil {
			t.Fatal(err)
		}
		if got := p.posts(); len(got) != 0 {
			t.Fatalf("posted %q from marks naming no answer of the bot's", got)
		}
		if left, err := h.store.Answers(ctx, conv.ID); err != nil || len(left) != 0 {
			t.Fatalf("marks left: %+v, %v", left, err)
		}
	})
}
