package bot_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/airlockhq/airlock/bot"
	"github.com/airlockhq/airlock/bot/bottest"
	"github.com/airlockhq/airlock/card"
	"github.com/airlockhq/airlock/confirm"
	"github.com/airlockhq/airlock/storage"
)

// limitedPlatform is the recording platform with run messages and grant
// notices, rate limited as a platform is: until `until` (by the bot's
// clock) every update of a run message or a grant notice is answered
// with a 429 whose Retry-After is the time left. It counts every update
// it was sent, answered or not.
type limitedPlatform struct {
	*bottest.Platform
	now func() time.Time

	mu          sync.Mutex
	until       time.Time
	runs        []card.Run // posted, then each update Slack accepted
	runTries    int
	notices     []card.GrantNotice
	noticeTries int
	runPosts    int
	noticePosts int
	runRefs     map[string]string // run id → its message's ref
	noticeRefs  map[string]string // grant id → its notice's ref
}

var (
	_ bot.RunMessenger = (*limitedPlatform)(nil)
	_ bot.GrantNoticer = (*limitedPlatform)(nil)
)

func newLimitedPlatform(now func() time.Time) *limitedPlatform {
	return &limitedPlatform{Platform: &bottest.Platform{}, now: now, runRefs: map[string]string{}, noticeRefs: map[string]string{}}
}

// limit answers updates 429 for d from now.
func (p *limitedPlatform) limit(d time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.until = p.now().Add(d)
}

// limited is the 429 an update gets now, nil when the limit has passed.
func (p *limitedPlatform) limited(method string) error {
	if left := p.until.Sub(p.now()); left > 0 {
		return &bot.RateLimitedError{Platform: "test", Method: method, RetryAfter: left, Err: fmt.Errorf("429")}
	}
	return nil
}

func (p *limitedPlatform) PostRun(_ context.Context, _ bot.Thread, r card.Run) (string, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.runPosts++
	p.runs = append(p.runs, r)
	ref := fmt.Sprintf("run-%s-%d", r.ID, p.runPosts)
	p.runRefs[r.ID] = ref
	return ref, nil
}

func (p *limitedPlatform) UpdateRun(_ context.Context, _ bot.Thread, ref string, r card.Run) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.runTries++
	if err := p.limited("update run"); err != nil {
		return err
	}
	if ref != p.runRefs[r.ID] {
		return fmt.Errorf("update of run %s under ref %q, not its message", r.ID, ref)
	}
	p.runs = append(p.runs, r)
	return nil
}

func (p *limitedPlatform) PostGrantNotice(_ context.Context, _ bot.Thread, n card.GrantNotice) (string, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.noticePosts++
	p.notices = append(p.notices, n)
	ref := "notice-" + n.GrantID
	p.noticeRefs[n.GrantID] = ref
	return ref, nil
}

func (p *limitedPlatform) UpdateGrantNotice(_ context.Context, _ bot.Thread, ref string, n card.GrantNotice) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.noticeTries++
	if err := p.limited("update grant notice"); err != nil {
		return err
	}
	if ref != p.noticeRefs[n.GrantID] {
		return fmt.Errorf("update of grant %s under ref %q, not its notice", n.GrantID, ref)
	}
	p.notices = append(p.notices, n)
	return nil
}

// counts is (posts, updates sent, the message as last shown) of runs.
func (p *limitedPlatform) runState() (posts, tries int, last card.Run) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.runs) > 0 {
		last = p.runs[len(p.runs)-1]
	}
	return p.runPosts, p.runTries, last
}

func (p *limitedPlatform) noticeState() (posts, tries int, last card.GrantNotice) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.notices) > 0 {
		last = p.notices[len(p.notices)-1]
	}
	return p.noticePosts, p.noticeTries, last
}

// newLimitedRBHarness is a runbook harness on a database (see
// onBothDatabases) whose platform is a limitedPlatform, and the card-sync
// job.
func newLimitedRBHarness(t *testing.T, driver, dsn string, edit func(*bot.Config)) (*rbHarness, *limitedPlatform, func()) {
	t.Helper()
	extra := map[string]*scriptTool{
		"svc_status": {name: "svc_status"},
		"restart":    {name: "restart", confirm: true},
		"page":       {name: "page"},
	}
	h := newHarnessOn(t, driver, dsn, func(c *bot.Config) {
		c.Tools = rbTools{base: c.Tools, extra: extra}
		c.Channels = bot.NewChannels([]bot.Channel{{Platform: "test", ID: "C1", Approvers: []string{"alice", "carol"}}})
		if edit != nil {
			edit(c)
		}
	})
	p := newLimitedPlatform(func() time.Time { return time.Unix(0, h.now.Load()).UTC() })
	h.bot.Register("test", p)
	h.plat = p.Platform
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
	return &rbHarness{harness: h, extra: extra}, p, sync
}

// Under a platform's rate limit, a run's message is not hammered: the
// run goes on through every step (nothing waits for the message), one
// update is tried and answered 429, nothing more is sent before its
// Retry-After, and then one update shows the run's final state.
func TestRunMessageUnderRateLimit(t *testing.T) {
	onBothDatabases(t, func(t *testing.T, driver, dsn string) {
		h, p, sync := newLimitedRBHarness(t, driver, dsn, nil)
		p.limit(30 * time.Second)
		id := h.start(restartBook(), "bob")
		if err := h.click("alice", 1, true, ""); err != nil {
			t.Fatal(err)
		}
		h.settle()
		run, _ := h.run(id)
		if run.Status != confirm.RunbookSucceeded {
			t.Fatalf("run %s: the run was held up by its message's rate limit", run.Status)
		}
		posts, tries, _ := p.runState()
		if posts != 1 || tries != 1 {
			t.Fatalf("during the limit: %d posts and %d updates sent, want 1 and 1 (the rest held until Retry-After)", posts, tries)
		}
		if n := behindCount(t, h.harness); n == 0 {
			t.Fatal("the run's message is stale and nothing says it is behind")
		}
		h.advance(10 * time.Second)
		sync()
		if _, tries, _ := p.runState(); tries != 1 {
			t.Fatalf("an update was sent before Retry-After passed (%d)", tries)
		}
		h.advance(21 * time.Second)
		sync()
		posts, tries, last := p.runState()
		if posts != 1 || tries != 2 {
			t.Fatalf("after the limit: %d posts, %d updates, want 1 post and one more update", posts, tries)
		}
		if last.Status != confirm.RunbookSucceeded || last.ID != id {
			t.Fatalf("the run message shows %s, want the run's final state", last.Status)
		}
		if n := behindCount(t, h.harness); n != 0 {
			t.Fatalf("%d messages behind after the sync", n)
		}
		sync()
		if _, tries, _ := p.runState(); tries != 2 {
			t.Fatal("a run message in sync was sent again")
		}
	})
}

// Without a limit, each change of a run shows at once (rendered from
// storage) and the message ends in the run's final state.
func TestRunMessageFollowsTheRun(t *testing.T) {
	onBothDatabases(t, func(t *testing.T, driver, dsn string) {
		h, p, _ := newLimitedRBHarness(t, driver, dsn, nil)
		id := h.start(restartBook(), "bob")
		if _, _, last := p.runState(); last.Status != confirm.RunbookRunning || last.Steps[1].State != "needs approval, or running once allowed" {
			t.Fatalf("while the card waits the message shows %s, %+v", last.Status, last.Steps)
		}
		if err := h.click("alice", 1, true, ""); err != nil {
			t.Fatal(err)
		}
		h.settle()
		posts, _, last := p.runState()
		if posts != 1 || last.Status != confirm.RunbookSucceeded || last.ID != id {
			t.Fatalf("%d posts, message shows %s", posts, last.Status)
		}
		if n := behindCount(t, h.harness); n != 0 {
			t.Fatalf("%d messages behind", n)
		}
	})
}

// Under a platform's rate limit, a revoked grant's notice is updated once
// the limit has passed, showing it revoked, with one update tried during
// the limit and one after.
func TestGrantNoticeUnderRateLimit(t *testing.T) {
	onBothDatabases(t, func(t *testing.T, driver, dsn string) {
		h, p, sync := newLimitedRBHarness(t, driver, dsn, func(c *bot.Config) { c.GrantFor = time.Hour })
		h.push(calls(tc("c1", "deploy", `{}`)), text("Deployed."))
		h.turn("bob", "deploy")
		if err := clickAs(h.harness, "alice", 1, true, true); err != nil {
			t.Fatal(err)
		}
		grants, err := h.store.Grants(context.Background(), confirm.GrantFilter{})
		if err != nil || len(grants) != 1 {
			t.Fatalf("grants %v, %v", grants, err)
		}
		if posts, _, n := p.noticeState(); posts != 1 || n.GrantID != grants[0].ID || n.RevokedBy != "" {
			t.Fatalf("%d notices posted, %+v", posts, n)
		}
		p.limit(30 * time.Second)
		if err := h.bot.Revoke(context.Background(), bot.Click{Platform: "test", Channel: "C1", User: "carol", Ref: confirm.GrantRef(grants[0].ID)}); err != nil {
			t.Fatal(err)
		}
		if _, tries, _ := p.noticeState(); tries != 1 {
			t.Fatalf("%d updates of the notice during the limit, want 1", tries)
		}
		h.advance(10 * time.Second)
		sync()
		if _, tries, _ := p.noticeState(); tries != 1 {
			t.Fatalf("an update was sent before Retry-After passed (%d)", tries)
		}
		h.advance(21 * time.Second)
		sync()
		posts, tries, last := p.noticeState()
		if posts != 1 || tries != 2 || last.RevokedBy != "carol" {
			t.Fatalf("after the limit: %d posts, %d updates, notice revoked by %q; want one more update showing carol's revoke", posts, tries, last.RevokedBy)
		}
		if n := behindCount(t, h.harness); n != 0 {
			t.Fatalf("%d messages behind", n)
		}
	})
}

// awayForRuns is a store whose run-message changes find the database
// away while away is set.
type awayForRuns struct {
	*storage.DB // with its runbook store
	away        atomic.Bool
}

func (s *awayForRuns) ChangeAndClaim(ctx context.Context, subject confirm.Subject, c confirm.CardClaim) ([]confirm.CardSync, bool, error) {
	if subject.Kind == confirm.SubjectRun && s.away.Load() {
		return nil, false, fmt.Errorf("change: %w", confirm.ErrUnavailable)
	}
	return s.DB.ChangeAndClaim(ctx, subject, c)
}

// A change of a run that could not be recorded (the database away) is
// recorded by the card-sync job once it answers, and the run's message
// then shows the run's final state.
func TestRunMessageChangeWhileTheDatabaseWasAway(t *testing.T) {
	onBothDatabases(t, func(t *testing.T, driver, dsn string) {
		var store *awayForRuns
		h, p, sync := newLimitedRBHarness(t, driver, dsn, func(c *bot.Config) {
			store = &awayForRuns{DB: c.Store.(*storage.DB)}
			c.Store = store
		})
		store.away.Store(true)
		id := h.start(restartBook(), "bob")
		if err := h.click("alice", 1, true, ""); err != nil {
			t.Fatal(err)
		}
		h.settle()
		if run, _ := h.run(id); run.Status != confirm.RunbookSucceeded {
			t.Fatalf("run %s", run.Status)
		}
		if _, _, last := p.runState(); last.Status == confirm.RunbookSucceeded {
			t.Fatal("the message shows the end though no change of the run was recorded")
		}
		store.away.Store(false)
		sync()
		if _, _, last := p.runState(); last.Status != confirm.RunbookSucceeded {
			t.Fatalf("after the database came back the message shows %s", last.Status)
		}
	})
}
