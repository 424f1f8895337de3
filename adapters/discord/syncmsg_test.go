package discord

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/airlockhq/airlock/adapters/discord/discordtest"
	"github.com/airlockhq/airlock/bot"
	"github.com/airlockhq/airlock/confirm"
	"github.com/airlockhq/airlock/jobs"
	"github.com/airlockhq/airlock/model"
	"github.com/airlockhq/airlock/runbook"
)

// statusTool is an ungated tool that answers at once.
type statusTool struct{}

func (statusTool) Spec() model.ToolSpec {
	return model.ToolSpec{Name: "service_status", Description: "A service's status.", Parameters: json.RawMessage(`{"type":"object"}`)}
}
func (statusTool) Confirm() bool                                                { return false }
func (statusTool) Validate(json.RawMessage) error                               { return nil }
func (statusTool) Summary(json.RawMessage) (string, error)                      { return "status", nil }
func (statusTool) Run(context.Context, json.RawMessage, string) (string, error) { return "up", nil }

// runCardSync runs the bot's card-sync job (every 20 ms, and when a
// change wakes it) until the test ends.
func (h *harness) runCardSync() {
	h.t.Helper()
	r := jobs.New(jobs.Options{})
	for _, j := range h.bot.Jobs(20 * time.Millisecond) {
		if j.Name == bot.JobCardSync {
			if err := r.Add(j); err != nil {
				h.t.Fatal(err)
			}
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = r.Run(ctx) }()
	h.t.Cleanup(func() { cancel(); <-done })
}

// A run's message under Discord's rate limit, with the real client
// against the fake and the card-sync job running: its first edit is
// answered 429 (retry_after 3 s). The run goes through its three steps
// without waiting for its message (by the time it ends, at most that
// 429'd edit was sent: nothing goes to the channel before retry_after),
// then one edit brings the message to the run's final state.
func TestRunMessageRateLimited(t *testing.T) {
	h := newHarnessWith(t, defaultChannels(), nil)
	if err := h.set.Add(statusTool{}); err != nil {
		t.Fatal(err)
	}
	h.runCardSync()
	h.fd.AnswerEdits(discordtest.RateLimited(3 * time.Second))
	rb := &runbook.Config{Name: "check", Steps: []runbook.StepConfig{
		{ID: "one", Tool: "service_status", Args: map[string]any{"service": "api"}},
		{ID: "two", Tool: "service_status", Args: map[string]any{"service": "db"}},
		{ID: "three", Tool: "service_status", Args: map[string]any{"service": "web"}},
	}}
	ctx := context.Background()
	id, err := h.bot.StartRunbook(ctx, bot.Thread{Platform: Platform, Channel: channelID}, requester, rb, map[string]any{}, "", "")
	if err != nil {
		t.Fatal(err)
	}
	h.bot.Runbooks().Wait()
	run, err := h.db.RunbookRun(ctx, id)
	if err != nil || run.Status != confirm.RunbookSucceeded || run.MessageRef == "" {
		t.Fatalf("run %+v, %v", run, err)
	}
	path := "/channels/" + channelID + "/messages/" + run.MessageRef
	if n := len(h.fd.Recorded("PATCH", path)); n > 1 {
		t.Fatalf("%d edits of the run message by the time the run ended, want at most the 429'd one (the rest held, the run not waiting)", n)
	}
	var edits []apiCall
	deadline := time.Now().Add(20 * time.Second)
	for {
		edits = h.fd.Recorded("PATCH", path)
		if len(edits) > 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the run message never caught up after the rate limit")
		}
		time.Sleep(20 * time.Millisecond)
	}
	last := decodeMessage(t, edits[len(edits)-1])
	if !strings.Contains(last.content, "started by "+requester+": succeeded") || !strings.Contains(last.content, "three (service_status): succeeded") {
		t.Fatalf("the run message after the limit: %q", last.content)
	}
	time.Sleep(100 * time.Millisecond) // a needless edit would come now
	if n := len(h.fd.Recorded("PATCH", path)); n != 2 {
		t.Fatalf("%d edits of the run message, want the 429'd one and the final one", n)
	}
}
