package shell

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/airlockhq/airlock/bot"
	"github.com/airlockhq/airlock/internal/testkit"
	"github.com/airlockhq/airlock/model"
	"github.com/airlockhq/airlock/model/modeltest"
	"github.com/airlockhq/airlock/runbook"
	"github.com/airlockhq/airlock/storage"
)

type restartTool struct{ runs atomic.Int64 }

func (r *restartTool) Spec() model.ToolSpec {
	return model.ToolSpec{Name: "restart_service", Parameters: json.RawMessage(`{"type":"object"}`)}
}
func (r *restartTool) Confirm() bool                  { return true }
func (r *restartTool) Validate(json.RawMessage) error { return nil }
func (r *restartTool) Summary(args json.RawMessage) (string, error) {
	return "restart " + string(args), nil
}
func (r *restartTool) Run(context.Context, json.RawMessage, string) (string, error) {
	r.runs.Add(1)
	return `{"status":"up"}`, nil
}

// The README's session: /runbooks lists, a bad parameter is refused
// naming what is allowed, /run prints the run message and the card,
// /allow 1 runs the step and the run message ends succeeded. The model
// is never asked.
func TestShellRunsARunbook(t *testing.T) {
	db, err := storage.Open(context.Background(), "sqlite", filepath.Join(t.TempDir(), "a.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	rbs, err := runbook.Compile("runbooks", []runbook.Config{{
		Name: "restart", Description: "Restart a service.",
		Parameters: map[string]any{"type": "object", "properties": map[string]any{
			"service": map[string]any{"type": "string", "enum": []any{"api", "web"}}}, "required": []any{"service"}},
		Steps:     []runbook.StepConfig{{ID: "restart", Tool: "restart_service", Args: map[string]any{"service": "{{ params.service }}"}}},
		OnFailure: []runbook.StepConfig{{ID: "page", Tool: "restart_service", Args: map[string]any{"service": "pager"}}},
	}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	tool := &restartTool{}
	m := modeltest.NewScripted()
	b, err := bot.New(bot.Config{Store: db, Model: m, Tools: oneTool{tool}, Runbooks: rbs,
		Channels: bot.NewChannels([]bot.Channel{{Platform: Platform, ID: DefaultChannel, Approvers: []string{DefaultUser}}}),
		Timeout:  time.Hour, SelfApproval: true})
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	s := New(strings.NewReader("/runbooks\n/run restart service=db\n/run restart service=api\n/allow 1\n"), &out)
	b.Register(Platform, s)
	if err := s.Run(context.Background(), b); err != nil {
		t.Fatal(err)
	}
	b.Runbooks().Wait()
	got := out.String()
	testkit.ContainsAll(t, "output", got,
		"restart service=api|web: Restart a service.",
		"Runbook restart was not started",
		"=== Runbook restart",
		"- restart (restart_service): waiting",
		"APPROVAL NEEDED",
		": succeeded",
		"- page (restart_service): not needed",
	)
	// The run message is printed again only when what it says changed.
	var prev string
	for _, block := range strings.Split(got, "=== ")[1:] {
		block, _, _ = strings.Cut(block, "\n+--")
		if strings.HasPrefix(block, "Runbook ") && block == prev {
			t.Errorf("the run message was printed twice unchanged:\n%s", block)
		}
		prev = block
	}
	if n := tool.runs.Load(); n != 1 {
		t.Fatalf("the step ran %d times", n)
	}
	if n := len(m.Requests()); n != 0 {
		t.Fatalf("the model was asked %d times", n)
	}
}
