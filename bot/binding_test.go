package bot_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/airlockhq/airlock/bot"
	"github.com/airlockhq/airlock/confirm"
	"github.com/airlockhq/airlock/internal/pgtest"
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
