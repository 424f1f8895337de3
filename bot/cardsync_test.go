package bot_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/airlockhq/airlock/bot"
	"github.com/airlockhq/airlock/bot/bottest"
	"github.com/airlockhq/airlock/card"
	"github.com/airlockhq/airlock/confirm"
)

// faultyPlatform is the recording platform whose card updates first get
// the scripted answers (a rate limit, a failure, a message gone).
type faultyPlatform struct {
	*bottest.Platform
	mu    sync.Mutex
	errs  []error
	tries int // UpdateCard calls, failed ones too
}

func (p *faultyPlatform) UpdateCard(ctx context.Context, th bot.Thread, ref string, c card.Card) error {
	p.mu.Lock()
	p.tries++
	var err error
	if len(p.errs) > 0 {
		err, p.errs = p.errs[0], p.errs[1:]
	}
	p.mu.Unlock()
	if err != nil {
		return fmt.Errorf("test: update: %w", err)
	}
	return p.Platform.UpdateCard(ctx, th, ref, c)
}

func (p *faultyPlatform) script(errs ...error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.errs = append(p.errs, errs...)
}

func (p *faultyPlatform) attempts() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.tries
}

func (p *faultyPlatform) updates() int {
	p.Mu.Lock()
	defer p.Mu.Unlock()
	return len(p.Updates)
}

// newFaultyHarness is a harness whose platform's card updates can fail,
// with a card waiting for alice.
func newFaultyHarness(t *testing.T) (*harness, *faultyPlatform, func()) {
	h := newHarness(t, "")
	fp := &faultyPlatform{Platform: &bottest.Platform{}}
	h.bot.Register("test", fp)
	h.plat = fp.Platform
	h.push(calls(tc("c1", "deploy", `{}`)), text("Deployed."))
	h.turn("bob", "deploy")
	var job func(context.Context) error
	for _, j := range h.bot.Jobs(time.Second) {
		if j.Name == bot.JobCardSync {
			job = j.Run
		}
	}
	sync := func() {
		t.Helper()
		if err := job(context.Background()); err != nil {
			t.Fatalf("card-sync: %v", err)
		}
	}
	return h, fp, sync
}

func (h *harness) advance(d time.Duration) { h.now.Add(int64(d)) }

func behindCount(t *testing.T, h *harness) int {
	t.Helper()
	n, err := h.store.CardsBehind(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// A rate-limited card update leaves the decision and the run as they are
// and the card queued: nothing is sent to the platform before the wait
// has passed, then one update shows the final state (the intermediate
// ones are skipped).
func TestCardSyncRateLimited(t *testing.T) {
	h, fp, sync := newFaultyHarness(t)
	fp.script(&bot.RateLimitedError{Platform: "test", Method: "update", RetryAfter: 30 * time.Second, Err: errors.New("429")})
	if err := h.click("alice", 1, true, ""); err != nil {
		t.Fatalf("the click failed because the card could not be updated: %v", err)
	}
	if got := h.ranCalls(); len(got) != 1 {
		t.Fatalf("ran %v: the decision must stand whatever the card", got)
	}
	if fp.updates() != 0 || fp.attempts() != 1 {
		t.Fatalf("%d updates in %d attempts during the limit, want 0 in 1", fp.updates(), fp.attempts())
	}
	if n := behindCount(t, h); n != 1 {
		t.Fatalf("%d messages behind, want the card", n)
	}
	h.advance(10 * time.Second)
	sync()
	if fp.attempts() != 1 {
		t.Fatalf("the job sent an update before Retry-After passed (%d attempts)", fp.attempts())
	}
	h.advance(21 * time.Second)
	sync()
	if fp.updates() != 1 || fp.attempts() != 2 {
		t.Fatalf("after the wait: %d updates in %d attempts, want 1 in 2", fp.updates(), fp.attempts())
	}
	if c := h.plat.LastCard(); !c.Complete() || c.Calls[0].Run != confirm.RunSucceeded || c.Calls[0].State.By != "alice" {
		t.Fatalf("the card does not show the final state: %+v", c.Calls[0])
	}
	if n := behindCount(t, h); n != 0 {
		t.Fatalf("%d messages behind after the sync", n)
	}
	sync()
	if fp.attempts() != 2 {
		t.Fatal("a card in sync was sent again")
	}
}

// Failures (5xx, the network) back off, doubling up to five minutes; the
// card converges once the platform answers.
func TestCardSyncBacksOff(t *testing.T) {
	h, fp, sync := newFaultyHarness(t)
	down := errors.New("502 bad gateway")
	fp.script(down, down)
	if err := h.click("alice", 1, true, ""); err != nil {
		t.Fatal(err)
	}
	if fp.attempts() != 1 || fp.updates() != 0 {
		t.Fatalf("%d attempts, %d updates", fp.attempts(), fp.updates())
	}
	h.advance(500 * time.Millisecond)
	sync()
	if fp.attempts() != 1 {
		t.Fatal("retried before the backoff")
	}
	h.advance(600 * time.Millisecond) // 1 s after the first failure
	sync()
	if fp.attempts() != 2 || fp.updates() != 0 {
		t.Fatalf("second try: %d attempts, %d updates", fp.attempts(), fp.updates())
	}
	h.advance(1500 * time.Millisecond)
	sync()
	if fp.attempts() != 2 {
		t.Fatal("retried before the doubled backoff")
	}
	h.advance(time.Second)
	sync()
	if fp.updates() != 1 || !h.plat.LastCard().Complete() {
		t.Fatalf("not converged: %d updates", fp.updates())
	}
	for n, want := range map[int]time.Duration{1: time.Second, 2: 2 * time.Second, 4: 8 * time.Second, 9: 256 * time.Second, 10: 5 * time.Minute, 100: 5 * time.Minute} {
		if got := bot.CardBackoff(n); got != want {
			t.Errorf("backoff after %d failures = %v, want %v", n, got, want)
		}
	}
}

// A message the platform no longer has is marked gone and never tried
// again, by later changes or the job.
func TestCardSyncGone(t *testing.T) {
	h, fp, sync := newFaultyHarness(t)
	fp.script(fmt.Errorf("message_not_found: %w", bot.ErrMessageGone))
	if err := h.click("alice", 1, true, ""); err != nil {
		t.Fatal(err)
	}
	if got := h.ranCalls(); len(got) != 1 {
		t.Fatalf("ran %v", got)
	}
	tries := fp.attempts()
	if tries != 1 {
		t.Fatalf("%d attempts, want 1", tries)
	}
	h.advance(time.Hour)
	sync()
	if fp.attempts() != tries {
		t.Fatalf("a gone message was tried again (%d attempts)", fp.attempts())
	}
	if n := behindCount(t, h); n != 0 {
		t.Fatalf("a gone message counts as behind (%d)", n)
	}
}

// awayOnce is a store whose first SetCardRef finds the database away.
type awayOnce struct {
	bot.Store
	failed atomic.Bool
}

func (s *awayOnce) SetCardRef(ctx context.Context, batchID, ref string) error {
	if s.failed.CompareAndSwap(false, true) {
		return fmt.Errorf("set card ref: %w", confirm.ErrUnavailable)
	}
	return s.Store.SetCardRef(ctx, batchID, ref)
}

// A card posted in the moment the database went away, before its message
// was stored, is stored once the database answers: recovery does not
// post it again, and its buttons count.
func TestCardPostedWhileTheDatabaseWasAwayIsKept(t *testing.T) {
	h := newHarnessWith(t, "", func(c *bot.Config) { c.Store = &awayOnce{Store: c.Store} })
	h.push(calls(tc("c1", "deploy", `{}`)), text("Deployed."))
	err := h.bot.HandleTurn(context.Background(), bot.Turn{Platform: "test", Channel: "C1", Thread: "T1", User: "bob", Text: "deploy"})
	if !errors.Is(err, confirm.ErrUnavailable) {
		t.Fatalf("turn: %v, want the database away", err)
	}
	if n := len(h.plat.Cards); n != 1 {
		t.Fatalf("%d cards posted, want 1", n)
	}
	if err := h.bot.RecoverBatches(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := len(h.plat.Cards); n != 1 {
		t.Fatalf("recovery posted the card again: %d cards", n)
	}
	if err := h.click("alice", 1, true, ""); err != nil {
		t.Fatalf("a click on the card posted while the database was away: %v", err)
	}
	if got := h.ranCalls(); len(got) != 1 {
		t.Fatalf("ran %v, want deploy once", got)
	}
}

// findingPlatform finds the cards its Platform posted, as Slack's
// conversations.replies would.
type findingPlatform struct{ *bottest.Platform }

func (p findingPlatform) FindCard(_ context.Context, _ bot.Thread, batchID string, _ time.Time) (string, bool, error) {
	p.Mu.Lock()
	defer p.Mu.Unlock()
	for _, c := range p.Cards {
		if c.BatchID == batchID {
			return "card-" + batchID, true, nil
		}
	}
	return "", false, nil
}

// A card posted by a process killed before it recorded it is found in
// its thread by the next process's recovery and adopted: not posted
// again, and its buttons count.
func TestCardPostedByAKilledProcessIsAdopted(t *testing.T) {
	path := filepath.Join(t.TempDir(), "airlock.db")
	first := newHarnessWith(t, path, func(c *bot.Config) { c.Store = &awayOnce{Store: c.Store} })
	first.push(calls(tc("c1", "deploy", `{}`)), text("Deployed."))
	_ = first.bot.HandleTurn(context.Background(), bot.Turn{Platform: "test", Channel: "C1", Thread: "T1", User: "bob", Text: "deploy"})
	// The process dies: what it kept in memory is gone.
	second := newHarness(t, path)
	second.bot.Register("test", findingPlatform{first.plat})
	second.plat = first.plat
	second.push(text("Deployed."))
	if err := second.bot.RecoverBatches(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := len(first.plat.Cards); n != 1 {
		t.Fatalf("%d cards posted, want the first adopted", n)
	}
	if err := second.click("alice", 1, true, ""); err != nil {
		t.Fatalf("a click on the adopted card: %v", err)
	}
	if got := second.ranCalls(); len(got) != 1 {
		t.Fatalf("ran %v, want deploy once", got)
	}
}
