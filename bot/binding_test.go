package bot_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/airlockhq/airlock/bot"
	cardpkg "github.com/airlockhq/airlock/card"
	"github.com/airlockhq/airlock/confirm"
	"github.com/airlockhq/airlock/internal/pgtest"
	"github.com/airlockhq/airlock/model"
	"github.com/airlockhq/airlock/redact"
	"github.com/airlockhq/airlock/runbook"
	"github.com/airlockhq/airlock/storage"
	"github.com/airlockhq/airlock/tools"
)

// onStores runs body on SQLite, and on PostgreSQL when
// AIRLOCK_TEST_POSTGRES_DSN is set; body passes the driver to useStore.
func onStores(t *testing.T, body func(t *testing.T, driver string)) {
	t.Run("sqlite", func(t *testing.T) { body(t, "sqlite") })
	t.Run("postgres", func(t *testing.T) {
		if os.Getenv("AIRLOCK_TEST_POSTGRES_DSN") == "" {
			t.Skip("set AIRLOCK_TEST_POSTGRES_DSN (CI does) to run on PostgreSQL")
		}
		body(t, "postgres")
	})
}

// openStore opens a fresh store of driver whose clock is clock.
func openStore(t *testing.T, driver string, clock func() time.Time, opts ...storage.Option) *storage.DB {
	t.Helper()
	db, _ := openStoreAt(t, driver, clock, opts...)
	return db
}

// openStoreAt is openStore, with the store's DSN (SQLite: its file).
func openStoreAt(t *testing.T, driver string, clock func() time.Time, opts ...storage.Option) (*storage.DB, string) {
	t.Helper()
	dsn := filepath.Join(t.TempDir(), "airlock.db")
	if driver == "postgres" {
		dsn = pgtest.FreshSchema(t, os.Getenv("AIRLOCK_TEST_POSTGRES_DSN"), "bot")
	}
	db, err := storage.Open(context.Background(), driver, dsn, append(opts, storage.WithClock(clock))...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db, dsn
}

// useStore has a harness's bot use a fresh store of driver that reads
// the bot's clock, as the harness's own does; then edit, when not nil.
func useStore(t *testing.T, driver string, edit func(*bot.Config), opts ...storage.Option) func(*bot.Config) {
	return func(c *bot.Config) {
		c.Store = openStore(t, driver, c.Now, opts...)
		if edit != nil {
			edit(c)
		}
	}
}

// Item 6: a critical call's Allow never counts without its phrase, even
// when the bot's clock reads past the card's deadline and the store's
// does not (the store, not the bot, refuses expiry).
func TestCriticalPhraseCheckedWhateverTheBotsClock(t *testing.T) {
	onStores(t, func(t *testing.T, driver string) {
		var skew time.Duration
		h := newHarnessWith(t, "", withPolicy(nil, func(c *bot.Config) {
			storeClock := c.Now
			c.Store = openStore(t, driver, storeClock)
			c.Now = func() time.Time { return storeClock().Add(skew) }
		}))
		h.tools["deploy"].Rating = confirm.RiskCritical
		h.tools["deploy"].PhraseOf = envService
		h.push(calls(tc("", "deploy", `{"env":"prod","service":"api"}`)), text("done"))
		h.turn("bob", "deploy api to prod")
		c := h.plat.LastCard().Calls[0]
		skew = 11 * time.Minute // the card expires after 10; the store's clock says it has not
		for _, phrase := range []string{"", "wrong"} {
			err := allowWith(h, "alice", c, phrase)
			if err == nil {
				t.Fatalf("Allow with phrase %q counted", phrase)
			}
			if !errors.Is(err, bot.ErrPhraseRequired) && !errors.Is(err, bot.ErrWrongPhrase) && !errors.Is(err, bot.ErrAlreadyClosed) {
				t.Fatalf("Allow with phrase %q: %v", phrase, err)
			}
		}
		if n := h.tools["deploy"].Runs.Load(); n != 0 {
			t.Fatalf("a critical call ran %d times without its phrase", n)
		}
		skew = 0
		if err := allowWith(h, "alice", c, "prod/api"); err != nil {
			t.Fatalf("Allow with the phrase, in time: %v", err)
		}
		if n := h.tools["deploy"].Runs.Load(); n != 1 {
			t.Fatalf("runs after the phrase: %d", n)
		}
	})
}

// Item 7: a secret in a run's parameters reaches no runbook audit row and
// no webhook body (scrubbed as a tool_call's arguments are); the steps
// still run with it.
func TestRunbookParamsSecretScrubbed(t *testing.T) {
	onStores(t, func(t *testing.T, driver string) {
		r := redact.New([]string{botSecret})
		h := newRBHarness(t, useStore(t, driver, func(c *bot.Config) { c.Redact = r.String }, storage.WithScrub(r.String)))
		if err := h.store.SetWebhooks([]storage.WebhookTarget{{ID: "siem"}}); err != nil {
			t.Fatal(err)
		}
		id, err := h.bot.StartRunbook(context.Background(), bot.Thread{Platform: "test", Channel: "C1", Thread: "T1"}, "bob",
			restartBook(), map[string]any{"service": botSecret}, "", "")
		if err != nil {
			t.Fatal(err)
		}
		h.settle()
		if err := h.clickLast("alice", true); err != nil {
			t.Fatal(err)
		}
		if run, _ := h.run(id); run.Status != confirm.RunbookSucceeded {
			t.Fatalf("run %s", run.Status)
		}
		evs, err := h.store.AuditEvents(context.Background(), confirm.AuditFilter{})
		if err != nil {
			t.Fatal(err)
		}
		kinds := map[confirm.AuditKind]bool{}
		for _, e := range evs {
			kinds[e.Kind] = true
			if strings.Contains(e.Detail, botSecret) {
				t.Errorf("%s audit detail holds the secret: %s", e.Kind, e.Detail)
			}
		}
		if !kinds[confirm.AuditRunbookStarted] || !kinds[confirm.AuditRunbookStep] || !kinds[confirm.AuditRunbookFinished] {
			t.Fatalf("audit kinds %v", kinds)
		}
		ds, err := h.store.Deliveries(context.Background(), storage.DeliveryFilter{})
		if err != nil || len(ds) == 0 {
			t.Fatalf("deliveries %d, %v", len(ds), err)
		}
		for _, d := range ds {
			if strings.Contains(string(d.Body), botSecret) {
				t.Errorf("webhook %s holds the secret: %s", d.Type, d.Body)
			}
		}
		if got := h.extra["restart"].runs(); len(got) != 1 {
			t.Fatalf("restart ran %v", got)
		}
	})
}

// argTool is a gated tool that records the exact arguments of each run
// and answers from a script (text, or an error; the last repeats). Its
// confirmation phrase is the arguments' "mode".
type argTool struct {
	name string
	risk confirm.Risk
	mu   sync.Mutex
	outs []any
	args []string
}

func (a *argTool) Spec() model.ToolSpec { return model.ToolSpec{Name: a.name} }
func (a *argTool) Confirm() bool        { return true }
func (a *argTool) Risk() confirm.Risk   { return a.risk }
func (a *argTool) Validate(args json.RawMessage) error {
	return json.Unmarshal(args, new(map[string]any))
}
func (a *argTool) Summary(args json.RawMessage) (string, error) {
	return a.name + " " + string(args), nil
}
func (a *argTool) ConfirmPhrase(args json.RawMessage) (string, error) {
	var m struct{ Mode string }
	err := json.Unmarshal(args, &m)
	return m.Mode, err
}
func (a *argTool) Run(_ context.Context, args json.RawMessage, _ string) (string, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.args = append(a.args, string(args))
	out := any(a.name + " done")
	if len(a.outs) > 0 {
		out = a.outs[0]
		if len(a.outs) > 1 {
			a.outs = a.outs[1:]
		}
	}
	if err, ok := out.(error); ok {
		return "", err
	}
	return out.(string), nil
}
func (a *argTool) ran() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]string(nil), a.args...)
}

// overTools is a tool set with some tools replaced.
type overTools struct {
	base bot.Tools
	over map[string]tools.Tool
}

func (o overTools) Get(name string) (tools.Tool, bool) {
	if t, ok := o.over[name]; ok {
		return t, true
	}
	return o.base.Get(name)
}
func (o overTools) Specs() []model.ToolSpec { return o.base.Specs() }

// withTool replaces a tool of the harness's set, then applies edit.
func withTool(t tools.Tool, name string, edit func(*bot.Config)) func(*bot.Config) {
	return func(c *bot.Config) {
		c.Tools = overTools{base: c.Tools, over: map[string]tools.Tool{name: t}}
		if edit != nil {
			edit(c)
		}
	}
}

// onCard is a click by user on the call as stored now (its revision's
// reference), on its batch's card.
func onCard(t *testing.T, h *harness, user, batchID string) bot.Click {
	t.Helper()
	b, err := h.store.Batch(context.Background(), batchID)
	if err != nil {
		t.Fatal(err)
	}
	ref := confirm.RefAt(batchID, 0, b.Calls[0].Revision)
	return bot.Click{Platform: "test", Channel: "C1", User: user, Ref: ref, Message: cardMsg(ref)}
}

// allowOn is onCard's click as an Allow.
func allowOn(t *testing.T, h *harness, user, batchID string) bot.Click {
	c := onCard(t, h, user, batchID)
	c.Allow = true
	return c
}

// lastPosted is the card posted last (LastCard is the last update).
func lastPosted(h *harness) cardpkg.Card {
	h.plat.Mu.Lock()
	defer h.plat.Mu.Unlock()
	return h.plat.Cards[len(h.plat.Cards)-1]
}

// storedCall is the one call of a batch as stored.
func storedCall(t *testing.T, h *harness, batchID string) confirm.Call {
	t.Helper()
	b, err := h.store.Batch(context.Background(), batchID)
	if err != nil {
		t.Fatal(err)
	}
	return b.Calls[0]
}

// Item 1: a step with approvals: 2 runs on nobody's single word. Carol
// approves; Alice opens Edit… and saves the arguments unchanged: the edit
// voids Carol's vote (she approved before it) and is Alice's, one of the
// two the step needs, not a decision; Carol's allow of the edited call is
// the second, and it runs once.
func TestEditKeepsTheStepsQuorum(t *testing.T) {
	onStores(t, func(t *testing.T, driver string) {
		ctx := context.Background()
		h := newRBHarness(t, useStore(t, driver, nil))
		rb := restartBook()
		rb.Steps[1].Approvals = 2
		id := h.start(rb, "bob")
		batchID := h.plat.LastCard().BatchID
		if err := h.bot.Decide(ctx, allowOn(t, h.harness, "carol", batchID)); err != nil {
			t.Fatal(err)
		}
		click := onCard(t, h.harness, "alice", batchID)
		form, err := h.bot.EditForm(ctx, click)
		if err != nil {
			t.Fatal(err)
		}
		if err := h.bot.Edit(ctx, click, form.Args); err != nil {
			t.Fatalf("edit: %v", err)
		}
		c := storedCall(t, h.harness, batchID)
		if c.Decision != confirm.DecisionPending || c.Approvals != 2 || len(c.Votes) != 1 || c.Votes[0].By != "alice" {
			t.Fatalf("after the edit: %s, approvals %d, votes %+v; want pending, 2, alice's only", c.Decision, c.Approvals, c.Votes)
		}
		if got := h.extra["restart"].runs(); len(got) != 0 {
			t.Fatalf("the step ran on one approver's edit: %v", got)
		}
		if err := h.bot.Decide(ctx, allowOn(t, h.harness, "carol", batchID)); err != nil {
			t.Fatal(err)
		}
		h.settle()
		if r, _ := h.run(id); r.Status != confirm.RunbookSucceeded || len(h.extra["restart"].runs()) != 1 {
			t.Fatalf("after the second approval: %s, runs %v", r.Status, h.extra["restart"].runs())
		}
	})
}

// Item 1, for a model's call: an edit to arguments the policy asks less
// for keeps the quorum, the risk tier and so the typed phrase the call
// needed. Prod needs two approvers and is critical, dev one and medium;
// Alice edits prod into dev: the edit is held (no vote), an Allow
// without the phrase of the edited arguments counts nothing, and it runs
// once two approvers typed it.
func TestEditNeverLowersAModelCall(t *testing.T) {
	onStores(t, func(t *testing.T, driver string) {
		ctx := context.Background()
		deploy := &argTool{name: "deploy"}
		byEnv := confirm.PolicyFunc(func(r confirm.Request) confirm.Verdict {
			if r.Call.Name != "deploy" {
				return confirm.Verdict{}
			}
			if strings.Contains(string(r.Call.Args), "prod") {
				return confirm.Verdict{Ask: true, Approvals: 2, Risk: confirm.RiskCritical}
			}
			return confirm.Verdict{Ask: true}
		})
		h := newHarnessWith(t, "", withPolicy(byEnv, withTool(deploy, "deploy", useStore(t, driver, nil))))
		h.push(calls(tc("", "deploy", `{"env":"prod","mode":"apply"}`)), text("done"))
		h.turn("bob", "deploy")
		batchID := h.plat.LastCard().BatchID
		if err := h.bot.Edit(ctx, onCard(t, h, "alice", batchID), `{"env":"dev","mode":"dev-apply"}`); err != nil {
			t.Fatalf("edit: %v", err)
		}
		c := storedCall(t, h, batchID)
		if c.Decision != confirm.DecisionPending || c.Approvals != 2 || c.Risk != confirm.RiskCritical || c.Grantable || len(c.Votes) != 0 {
			t.Fatalf("after the edit: %s, approvals %d, risk %s, grantable %v, votes %+v; want pending, 2, critical, no vote",
				c.Decision, c.Approvals, c.Risk, c.Grantable, c.Votes)
		}
		allow := func(user, phrase string) error {
			cl := onCard(t, h, user, batchID)
			cl.Allow, cl.Phrase = true, phrase
			return h.bot.Decide(ctx, cl)
		}
		if err := allow("alice", ""); !errors.Is(err, bot.ErrPhraseRequired) {
			t.Fatalf("Allow without the phrase: %v", err)
		}
		if err := allow("alice", "apply"); !errors.Is(err, bot.ErrWrongPhrase) {
			t.Fatalf("Allow with the phrase of the model's arguments: %v", err)
		}
		if err := allow("alice", "dev-apply"); err != nil {
			t.Fatal(err)
		}
		if got := deploy.ran(); len(got) != 0 {
			t.Fatalf("ran on one of two approvals: %v", got)
		}
		if err := allow("carol", "dev-apply"); err != nil {
			t.Fatal(err)
		}
		if got := deploy.ran(); len(got) != 1 || got[0] != `{"env":"dev","mode":"dev-apply"}` {
			t.Fatalf("ran %v, want the edited arguments once", got)
		}
	})
}

// Item 2: a retry runs only the arguments someone approved. The step's
// call is edited into a dry run and allowed (by a quorum of two, or as a
// critical call with its phrase typed); attempt 1 fails; attempt 2's
// arguments are the runbook's own, not those approved: it gets its own
// card (a critical one asks the phrase of its own arguments) and runs
// nothing until someone allows it.
func TestRetryRunsOnlyApprovedArguments(t *testing.T) {
	for _, critical := range []bool{false, true} {
		name := "quorum"
		if critical {
			name = "critical"
		}
		t.Run(name, func(t *testing.T) {
			onStores(t, func(t *testing.T, driver string) { testRetryApproved(t, driver, critical) })
		})
	}
}

func testRetryApproved(t *testing.T, driver string, critical bool) {
	ctx := context.Background()
	restart := &argTool{name: "restart", outs: []any{errors.New("dry run failed"), "restarted"}}
	if critical {
		restart.risk = confirm.RiskCritical
	}
	h := newRBHarness(t, withTool(restart, "restart", useStore(t, driver, nil)))
	step := runbook.StepConfig{ID: "restart", Tool: "restart", Args: map[string]any{"service": "{{ params.service }}", "mode": "apply"},
		Retry: &runbook.RetryConfig{Attempts: 2}}
	if !critical {
		step.Approvals = 2
	}
	id := h.start(&runbook.Config{Name: "restart", Steps: []runbook.StepConfig{step}}, "bob")
	first := h.plat.LastCard().BatchID
	const dry = `{"mode":"dry-run","service":"api"}`
	if err := h.bot.Edit(ctx, onCard(t, h.harness, "alice", first), dry); err != nil {
		t.Fatalf("edit: %v", err)
	}
	allow := func(user, batchID, phrase string) error {
		c := allowOn(t, h.harness, user, batchID)
		c.Phrase = phrase
		err := h.bot.Decide(ctx, c)
		h.settle()
		return err
	}
	if critical {
		if err := allow("alice", first, "dry-run"); err != nil {
			t.Fatal(err)
		}
	} else if err := allow("carol", first, ""); err != nil {
		t.Fatal(err)
	}
	if got := restart.ran(); len(got) != 1 || got[0] != dry {
		t.Fatalf("attempt 1 ran %v, want the approved dry run once", got)
	}
	r, steps := h.run(id)
	if got := restart.ran(); len(got) != 1 {
		t.Fatalf("attempt 2 ran %v without anyone's yes for its arguments (run %s, %s)", got[1:], r.Status, stepLine(steps))
	}
	if stepLine(steps) != "restart/1:failed restart/2:waiting" {
		t.Fatalf("steps %s, want attempt 2 waiting", stepLine(steps))
	}
	second := lastPosted(h.harness)
	if second.BatchID == first || !second.Calls[0].Open() || !strings.Contains(second.Calls[0].Args, `"apply"`) {
		t.Fatalf("attempt 2's card %+v, want a card of its own with its own arguments", second.Calls[0])
	}
	if critical {
		if err := allow("alice", second.BatchID, "dry-run"); !errors.Is(err, bot.ErrWrongPhrase) {
			t.Fatalf("the dry run's phrase for attempt 2: %v", err)
		}
		if err := allow("alice", second.BatchID, "apply"); err != nil {
			t.Fatal(err)
		}
	} else {
		for _, u := range []string{"alice", "carol"} {
			if err := allow(u, second.BatchID, ""); err != nil {
				t.Fatal(err)
			}
		}
	}
	if got := restart.ran(); len(got) != 2 || got[1] != `{"mode":"apply","service":"api"}` {
		t.Fatalf("runs %v, want attempt 2 with its own arguments once allowed", got)
	}
	if r, steps := h.run(id); r.Status != confirm.RunbookSucceeded {
		t.Fatalf("run %s %s", r.Status, stepLine(steps))
	}
}

// runIn sends `run restart service=api` as bob's turn in thread th.
func runIn(t *testing.T, h *rbHarness, th string) {
	t.Helper()
	if err := h.bot.HandleTurn(context.Background(), bot.Turn{Platform: "test", Channel: "C1", Thread: th, User: "bob", Text: "run restart service=api"}); err != nil {
		t.Fatal(err)
	}
	h.settle()
}

// Item 9: `run` commands keep limits.turns_per_minute: one requester's
// runs past the limit are refused with a word and start nothing.
func TestRunCommandsKeepTheTurnLimit(t *testing.T) {
	onStores(t, func(t *testing.T, driver string) {
		h := newRBHarness(t, useStore(t, driver, func(c *bot.Config) {
			c.Runbooks = compiledBooks(t)
			c.TurnsPerMinute = 2
		}))
		for _, th := range []string{"T1", "T2", "T3", "T4"} {
			runIn(t, h, th)
		}
		if n := len(h.liveRuns()); n != 2 {
			t.Fatalf("%d runs started, want 2 (limits.turns_per_minute)", n)
		}
		posts := strings.Join(h.plat.Posts, "\n")
		if strings.Count(posts, "limits.turns_per_minute") != 1 || !strings.Contains(posts, "No runbook was started") {
			t.Fatalf("posts %q: want one refusal naming the limit", posts)
		}
		if n := len(h.plat.Cards); n != 2 {
			t.Fatalf("%d cards, want the two runs'", n)
		}
		h.now.Add(int64(time.Minute + time.Second))
		runIn(t, h, "T5")
		if n := len(h.liveRuns()); n != 3 {
			t.Fatalf("a minute later: %d runs, want 3", n)
		}
	})
}

// Item 9: runs and their step cards keep limits.pending_per_channel. With
// one card waiting in a channel of limit 1, a `run` is refused with a
// word and creates nothing (no run, no conversation, no card); a run
// started otherwise (as the model's runbook tool does) has its gated
// step refused, nothing stored for it: the step fails saying why, the
// run fails and its tool never runs.
func TestRunsKeepThePendingLimit(t *testing.T) {
	onStores(t, func(t *testing.T, driver string) {
		ctx := context.Background()
		h := newRBHarness(t, useStore(t, driver, func(c *bot.Config) {
			c.Runbooks = compiledBooks(t)
			c.PendingPerChannel = 1
		}))
		runIn(t, h, "T1")
		if len(h.liveRuns()) != 1 || len(h.plat.Cards) != 1 {
			t.Fatalf("first run: %d runs, %d cards", len(h.liveRuns()), len(h.plat.Cards))
		}
		runIn(t, h, "T2")
		if p := h.plat.LastPost(); !strings.Contains(p, "limits.pending_per_channel") || !strings.Contains(p, "Runbook restart was not started") {
			t.Fatalf("refusal %q", p)
		}
		if len(h.liveRuns()) != 1 || len(h.plat.Cards) != 1 {
			t.Fatalf("after the refused run: %d runs, %d cards", len(h.liveRuns()), len(h.plat.Cards))
		}
		if _, err := h.store.FindConversation(ctx, "test", "C1", "T2"); !errors.Is(err, confirm.ErrNotFound) {
			t.Fatalf("the refused run made a conversation: %v", err)
		}
		id, err := h.bot.StartRunbook(ctx, bot.Thread{Platform: "test", Channel: "C1", Thread: "T3"}, "bob", restartBook(), map[string]any{"service": "api"}, "", "")
		if err != nil {
			t.Fatal(err)
		}
		h.settle()
		r, steps := h.run(id)
		if r.Status != confirm.RunbookFailed || r.FailedStep != "restart" || stepLine(steps) != "before/1:succeeded restart/1:failed page/1:succeeded" {
			t.Fatalf("run with a refused step: %s %q %s", r.Status, r.FailedStep, stepLine(steps))
		}
		if !strings.Contains(steps[1].Result, "limits.pending_per_channel") || steps[1].BatchID != "" {
			t.Fatalf("refused step: result %q, batch %q", steps[1].Result, steps[1].BatchID)
		}
		if len(h.plat.Cards) != 1 || len(h.extra["restart"].runs()) != 0 {
			t.Fatalf("%d cards, restart ran %v", len(h.plat.Cards), h.extra["restart"].runs())
		}
	})
}
