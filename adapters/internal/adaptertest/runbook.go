package adaptertest

import (
	"context"
	"encoding/json"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/airlockhq/airlock/bot"
	"github.com/airlockhq/airlock/card"
	"github.com/airlockhq/airlock/confirm"
	"github.com/airlockhq/airlock/model"
	"github.com/airlockhq/airlock/model/modeltest"
	"github.com/airlockhq/airlock/runbook"
	"github.com/airlockhq/airlock/storage"
	"github.com/airlockhq/airlock/tools"
)

// SearchTool is a gated tool, search_logs, whose summary is "search logs
// for <query>".
type SearchTool struct{}

func (SearchTool) Spec() model.ToolSpec {
	return model.ToolSpec{Name: "search_logs", Description: "Search logs.", Parameters: json.RawMessage(`{"type":"object"}`)}
}
func (SearchTool) Confirm() bool                  { return true }
func (SearchTool) Validate(json.RawMessage) error { return nil }
func (SearchTool) Summary(args json.RawMessage) (string, error) {
	var a struct{ Query string }
	_ = json.Unmarshal(args, &a)
	return "search logs for " + a.Query, nil
}
func (SearchTool) Run(context.Context, json.RawMessage, string) (string, error) { return "[]", nil }

type searchTools struct{}

func (searchTools) Get(name string) (tools.Tool, bool) {
	if name == "search_logs" {
		return SearchTool{}, true
	}
	return nil, false
}
func (searchTools) Specs() []model.ToolSpec { return []model.ToolSpec{SearchTool{}.Spec()} }

// recorder is a platform that keeps what the bot posted.
type recorder struct {
	mu    sync.Mutex
	cards []card.Card
	runs  []card.Run
}

func (r *recorder) PostCard(_ context.Context, _ bot.Thread, c card.Card) (string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.cards = append(r.cards, c)
	return c.BatchID, nil
}
func (r *recorder) UpdateCard(context.Context, bot.Thread, string, card.Card) error { return nil }
func (r *recorder) Post(context.Context, bot.Thread, string) error                  { return nil }
func (r *recorder) PostRun(_ context.Context, _ bot.Thread, c card.Run) (string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.runs = append(r.runs, c)
	return "run", nil
}
func (r *recorder) UpdateRun(_ context.Context, _ bot.Thread, _ string, c card.Run) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.runs = append(r.runs, c)
	return nil
}

// RunbookStepCard starts, with the real bot and store, a run of a
// runbook whose parameter and arguments hold &, < and > (as a search
// query does), and returns the card its gated step posted and the run
// message as it then stands, exactly as the bot gave them to the
// platform, with their random ids and times made fixed for golden files.
func RunbookStepCard(t testing.TB, platform, channel, user string) (card.Card, card.Run) {
	t.Helper()
	ctx := context.Background()
	db, err := storage.Open(ctx, "sqlite", filepath.Join(t.TempDir(), "a.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	rbs, err := runbook.Compile("runbooks", []runbook.Config{{
		Name: "search",
		Parameters: map[string]any{"type": "object", "properties": map[string]any{
			"query": map[string]any{"type": "string"}}, "required": []any{"query"}},
		Steps: []runbook.StepConfig{{ID: "search", Tool: "search_logs", Args: map[string]any{
			"query":  "{{ params.query }}",
			"filter": `level >= "warn" && service != "<none>"`,
			"label":  "{{ params.query + ' & more' }}",
		}}},
	}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	rec := &recorder{}
	b, err := bot.New(bot.Config{Store: db, Model: modeltest.NewScripted(), Tools: searchTools{}, Runbooks: rbs,
		Channels: bot.NewChannels([]bot.Channel{{Platform: platform, ID: channel, Approvers: []string{user}}}),
		Timeout:  time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	b.Register(platform, rec)
	cfg := rbs[0].Config()
	params, err := rbs[0].Params(map[string]string{"query": `a&b <c> "d" > e`})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.StartRunbook(ctx, bot.Thread{Platform: platform, Channel: channel, Thread: "t1"}, user, &cfg, params, "", ""); err != nil {
		t.Fatal(err)
	}
	b.Runbooks().Wait()
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if len(rec.cards) != 1 || len(rec.runs) == 0 {
		t.Fatalf("%d cards, %d run messages", len(rec.cards), len(rec.runs))
	}
	c, r := rec.cards[0], rec.runs[len(rec.runs)-1]
	// Fixed ids and times, for golden files.
	const batch, run = "abcdefghijklmnop", "r7k2mq9xabcdefghijklmnopqr"
	at := time.Date(2026, 11, 29, 16, 5, 0, 0, time.UTC)
	c.BatchID, c.CreatedAt, c.ExpiresAt, c.Now = batch, at, at.Add(time.Hour), at
	c.AllRef, c.ExtendRef = confirm.AllRef(batch, 0), ""
	for i := range c.Calls {
		c.Calls[i].Ref, c.Calls[i].Key = confirm.RefAt(batch, i, 0), run+"/search/1"
	}
	r.ID = run
	return c, r
}
