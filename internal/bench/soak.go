package bench

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/airlockhq/airlock/bot"
	"github.com/airlockhq/airlock/card"
	"github.com/airlockhq/airlock/confirm"
	"github.com/airlockhq/airlock/model"
	"github.com/airlockhq/airlock/storage"
	"github.com/airlockhq/airlock/tools"
)

// Soak is airlock soak. It repeats the double-click storm: one gated
// call, many concurrent Allow clicks on its button, and counts how often
// the tool ran. Every storm must run it exactly once.
func Soak(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("airlock soak", flag.ContinueOnError)
	fs.SetOutput(stderr)
	storms := fs.Int("storms", 1000, "how many storms")
	clicks := fs.Int("clicks", 20, "concurrent clicks per storm")
	driver := fs.String("driver", "sqlite", "sqlite or postgres")
	dsn := fs.String("dsn", "", "database (default: a new SQLite file in a temporary folder)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *storms < 1 || *clicks < 1 {
		fmt.Fprintln(stderr, "airlock soak: -storms and -clicks must be positive")
		return 2
	}
	if *dsn == "" && *driver != "sqlite" {
		fmt.Fprintln(stderr, "airlock soak: -dsn is required for postgres")
		return 2
	}
	s := soak{driver: *driver, dsn: *dsn, storms: *storms, clicks: *clicks}
	if err := s.run(ctx); err != nil {
		fmt.Fprintf(stderr, "airlock soak: %v\n", err)
		return 1
	}
	return s.report(stdout)
}

// soak is one airlock soak: its options, and the tool's runs per storm.
type soak struct {
	driver, dsn    string
	storms, clicks int
	runs           []int64
	elapsed        time.Duration
}

// run runs the storms on the database, by default a new SQLite file in
// a temporary folder.
func (s *soak) run(ctx context.Context) error {
	dsn := s.dsn
	if dsn == "" {
		dir, err := os.MkdirTemp("", "airlock-soak")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		dsn = filepath.Join(dir, "soak.db")
	}
	db, err := storage.Open(ctx, s.driver, dsn)
	if err != nil {
		return err
	}
	defer db.Close()
	return s.runStorms(ctx, db)
}

// runStorms starts the bot on db and runs every storm: a turn that posts a
// card, then -clicks concurrent Allow clicks on it.
func (s *soak) runStorms(ctx context.Context, db bot.Store) error {
	tool := &soakTool{}
	b, err := bot.New(bot.Config{
		Store:    db,
		Model:    soakModel{},
		Tools:    soakTools{tool},
		Policy:   confirm.FromToolFlag(),
		Channels: bot.NewChannels([]bot.Channel{{Platform: "soak", ID: "*", Approvers: []string{"approver"}}}),
		Logger:   slog.New(slog.DiscardHandler),
		WorkerID: fmt.Sprintf("soak/%d", os.Getpid()),
	})
	if err != nil {
		return err
	}
	plat := &soakPlatform{}
	b.Register("soak", plat)
	run := fmt.Sprintf("%d", time.Now().UnixNano())
	s.runs = make([]int64, 0, s.storms)
	start := time.Now()
	for i := 0; i < s.storms; i++ {
		if err := ctx.Err(); err != nil {
			return err
		}
		before := tool.runs.Load()
		thread := fmt.Sprintf("%s-%d", run, i)
		if err := b.HandleTurn(ctx, bot.Turn{Platform: "soak", Channel: "C", Thread: thread, User: "requester", Text: "go"}); err != nil {
			return fmt.Errorf("storm %d: turn: %w", i, err)
		}
		clickAll(ctx, b, plat.lastRef(), s.clicks)
		s.runs = append(s.runs, tool.runs.Load()-before)
	}
	s.elapsed = time.Since(start)
	return nil
}

// clickAll sends clicks concurrent Allow clicks on the call ref, all
// released at once, and waits for them.
func clickAll(ctx context.Context, b *bot.Bot, ref string, clicks int) {
	batchID, _, _ := confirm.ParseRef(ref)
	var wg sync.WaitGroup
	gate := make(chan struct{})
	for c := 0; c < clicks; c++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-gate
			_ = b.Decide(ctx, bot.Click{Platform: "soak", Channel: "C", User: "approver", Ref: ref, Message: batchID, Allow: true})
		}()
	}
	close(gate)
	wg.Wait()
}

// report prints the tool's runs per storm and returns the exit code: 0
// when every storm ran it exactly once.
func (s *soak) report(stdout io.Writer) int {
	hist := map[int64]int{}
	for _, n := range s.runs {
		hist[n]++
	}
	fmt.Fprintf(stdout, "storms: %d, concurrent clicks per storm: %d, driver: %s, %s (%.1f storms/s)\n",
		len(s.runs), s.clicks, s.driver, s.elapsed.Round(time.Millisecond), float64(len(s.runs))/s.elapsed.Seconds())
	fmt.Fprintln(stdout, "tool runs per storm:")
	for _, k := range slices.Sorted(maps.Keys(hist)) {
		fmt.Fprintf(stdout, "  %d run(s): %d storms\n", k, hist[k])
	}
	if len(hist) != 1 || hist[1] != len(s.runs) {
		fmt.Fprintln(stdout, "FAIL: some storm did not run the tool exactly once")
		return 1
	}
	fmt.Fprintln(stdout, "ok: every storm ran the tool exactly once")
	return 0
}

// soakModel asks for the gated tool on a user message and answers in text
// after the results.
type soakModel struct{}

func (soakModel) Generate(_ context.Context, req model.Request) (model.Message, error) {
	last := req.Messages[len(req.Messages)-1]
	if last.Role == model.RoleTool {
		return model.Message{Role: model.RoleAssistant, Text: "done"}, nil
	}
	return model.Message{Role: model.RoleAssistant, ToolCalls: []confirm.ToolCall{{ID: "c1", Name: "storm", Args: json.RawMessage(`{}`)}}}, nil
}

type soakTool struct{ runs atomic.Int64 }

func (t *soakTool) Spec() model.ToolSpec                    { return model.ToolSpec{Name: "storm"} }
func (t *soakTool) Confirm() bool                           { return true }
func (t *soakTool) Validate(json.RawMessage) error          { return nil }
func (t *soakTool) Summary(json.RawMessage) (string, error) { return "storm", nil }
func (t *soakTool) Run(context.Context, json.RawMessage, string) (string, error) {
	t.runs.Add(1)
	return "ran", nil
}

type soakTools struct{ t *soakTool }

func (s soakTools) Get(name string) (tools.Tool, bool) { return s.t, name == "storm" }
func (s soakTools) Specs() []model.ToolSpec            { return []model.ToolSpec{s.t.Spec()} }

type soakPlatform struct {
	mu  sync.Mutex
	ref string
}

func (p *soakPlatform) PostCard(_ context.Context, _ bot.Thread, c card.Card) (string, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.ref = c.Calls[0].Ref
	return c.BatchID, nil
}
func (p *soakPlatform) UpdateCard(context.Context, bot.Thread, string, card.Card) error { return nil }
func (p *soakPlatform) Post(context.Context, bot.Thread, string) error                  { return nil }
func (p *soakPlatform) lastRef() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.ref
}
