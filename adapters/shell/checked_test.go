package shell

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/airlockhq/airlock/adapters/internal/adaptertest"
	"github.com/airlockhq/airlock/bot"
	cardpkg "github.com/airlockhq/airlock/card"
	"github.com/airlockhq/airlock/confirm"
	"github.com/airlockhq/airlock/internal/testkit"
	"github.com/airlockhq/airlock/model"
	"github.com/airlockhq/airlock/model/modeltest"
	"github.com/airlockhq/airlock/storage"
	"github.com/airlockhq/airlock/tools"
)

func (f *fakeBot) MarkChecked(_ context.Context, c bot.Click) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.clicks = append(f.clicks, c)
	return f.err
}

func (f *fakeBot) UncheckedRuns(context.Context, bot.Thread) ([]cardpkg.UnknownNotice, error) {
	return nil, nil
}

type oneTool struct{ t tools.Tool }

func (o oneTool) Get(name string) (tools.Tool, bool) {
	if name == o.t.Spec().Name {
		return o.t, true
	}
	return nil, false
}
func (o oneTool) Specs() []model.ToolSpec { return []model.ToolSpec{o.t.Spec()} }

// realBot is the real bot on a fresh SQLite file, with the shell's
// channel, DefaultUser approving; cfg's Store and Channels are set here,
// its Timeout when it has none. It returns the database too.
func realBot(t *testing.T, cfg bot.Config) (*bot.Bot, *storage.DB) {
	t.Helper()
	db, err := storage.Open(context.Background(), "sqlite", filepath.Join(t.TempDir(), "a.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	cfg.Store = db
	cfg.Channels = bot.NewChannels([]bot.Channel{{Platform: Platform, ID: DefaultChannel, Approvers: []string{DefaultUser}}})
	if cfg.Timeout == 0 {
		cfg.Timeout = time.Hour
	}
	b, err := bot.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return b, db
}

// runRegistered runs a shell on input against b, registered as b's
// platform, and returns what it printed (the bot may print more after,
// e.g. a runbook that goes on).
func runRegistered(t *testing.T, b *bot.Bot, input string) *strings.Builder {
	t.Helper()
	var out strings.Builder
	s := New(strings.NewReader(input), &out)
	b.Register(Platform, s)
	if err := s.Run(context.Background(), b); err != nil {
		t.Fatal(err)
	}
	return &out
}

// In the terminal, with the real bot: a charge whose outcome is unknown
// says so and how to go on; the retry with a note waits for a yes;
// /checked lists the run, /checked 1 marks it (once), and the next
// charge runs as usual.
func TestCheckedCommand(t *testing.T) {
	charge := &adaptertest.ChargeTool{}
	m := modeltest.NewScripted()
	m.PushCalls(confirm.ToolCall{ID: "c1", Name: "charge", Args: json.RawMessage(`{"amount":10}`)}).PushText("Maybe charged.")
	m.PushCalls(confirm.ToolCall{ID: "c2", Name: "charge", Args: json.RawMessage(`{"amount":10,"note":"retry"}`)})
	m.PushCalls(confirm.ToolCall{ID: "c3", Name: "charge", Args: json.RawMessage(`{"amount":10,"note":"retry"}`)}).PushText("Charged.")
	b, db := realBot(t, bot.Config{Model: m, Tools: oneTool{charge}})
	got := runRegistered(t, b, "charge 10\nagain\n/checked\n/checked 2\n/checked x\n/checked 1\n/checked 1\n/checked\nnever mind, charge it\n").String()
	testkit.ContainsAll(t, "terminal", got,
		"Outcome unknown for call 1 (charge): it may or may not have taken effect.",
		"  > charge {\"amount\":10}\n  Until someone marks it checked, every call of this tool in this thread needs a person's yes.\n",
		"(/checked lists runs to mark checked)",
		"Checked by local at ",
		"APPROVAL NEEDED",
		"an earlier call of this tool has an unknown outcome",
		"1. request ",
		`"2" is not a run number (1-1)`,
		`"x" is not a run number (1-1)`,
		"Marked checked: call 1 (charge)",
		"No run with an unknown outcome waits to be checked.",
		"Charged.",
	)
	if n := strings.Count(got, "Marked checked:"); n != 1 {
		t.Errorf("marked checked %d times:\n%s", n, got)
	}
	if charge.Runs.Load() != 2 {
		t.Errorf("charge ran %d times, want 2 (the first, and the one after the check)", charge.Runs.Load())
	}
	evs, _ := db.AuditEvents(context.Background(), confirm.AuditFilter{})
	n := 0
	for _, e := range evs {
		if e.Kind == confirm.AuditUnknownChecked && e.Actor == DefaultUser {
			n++
		}
	}
	if n != 1 {
		t.Errorf("%d unknown_checked events, want 1", n)
	}
}
