package bot_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/airlockhq/airlock/bot"
	"github.com/airlockhq/airlock/confirm"
	"github.com/airlockhq/airlock/internal/pgtest"
	"github.com/airlockhq/airlock/redact"
	"github.com/airlockhq/airlock/storage"
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
	dsn := filepath.Join(t.TempDir(), "airlock.db")
	if driver == "postgres" {
		dsn = pgtest.FreshSchema(t, os.Getenv("AIRLOCK_TEST_POSTGRES_DSN"), "bot")
	}
	db, err := storage.Open(context.Background(), driver, dsn, append(opts, storage.WithClock(clock))...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
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
