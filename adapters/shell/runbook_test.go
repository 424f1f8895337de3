package shell

import (
	"context"
	"encoding/json"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/airlockhq/airlock/bot"
	"github.com/airlockhq/airlock/internal/testkit"
	"github.com/airlockhq/airlock/model"
	"github.com/airlockhq/airlock/model/modeltest"
	"github.com/airlockhq/airlock/runbook"
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

// The session of docs/terminal.md: /runbooks lists, a bad parameter is refused
// naming what is allowed, /run prints the run message and the card,
// /allow 1 runs the step and the run message ends succeeded. The model
// is never asked.
func TestShellRunsARunbook(t *testing.T) {
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
	b, _ := realBot(t, bot.Config{Model: m, Tools: oneTool{tool}, Runbooks: rbs, SelfApproval: true})
	out := runRegistered(t, b, "/runbooks\n/run restart service=db\n/run restart service=api\n/allow 1\n")
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
