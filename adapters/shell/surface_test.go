package shell

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/airlockhq/airlock/bot"
	"github.com/airlockhq/airlock/confirm"
	"github.com/airlockhq/airlock/model"
	"github.com/airlockhq/airlock/model/modeltest"
	"github.com/airlockhq/airlock/storage"
)

// deployTool is a gated tool.
type deployTool struct{ ran int }

func (d *deployTool) Spec() model.ToolSpec {
	return model.ToolSpec{Name: "deploy", Description: "Deploy.", Parameters: json.RawMessage(`{"type":"object"}`)}
}
func (d *deployTool) Confirm() bool                  { return true }
func (d *deployTool) Validate(json.RawMessage) error { return nil }
func (d *deployTool) Summary(args json.RawMessage) (string, error) {
	return "deploy " + string(args), nil
}
func (d *deployTool) Run(context.Context, json.RawMessage, string) (string, error) {
	d.ran++
	return "deployed", nil
}

// A decision typed in the terminal, with the real bot and store, is
// audited with surface "terminal" (issue 28: each decision row names the
// surface it came from).
func TestTerminalDecisionSurface(t *testing.T) {
	db, err := storage.Open(context.Background(), "sqlite", filepath.Join(t.TempDir(), "a.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	deploy := &deployTool{}
	m := modeltest.NewScripted()
	m.PushCalls(confirm.ToolCall{ID: "c1", Name: "deploy", Args: json.RawMessage(`{"v":1}`)}).PushText("Deployed.")
	b, err := bot.New(bot.Config{Store: db, Model: m, Tools: oneTool{deploy},
		Channels: bot.NewChannels([]bot.Channel{{Platform: Platform, ID: DefaultChannel, Approvers: []string{DefaultUser}}}),
		Timeout:  time.Hour, SelfApproval: true}) // as `airlock chat` sets for its one local user
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	s := New(strings.NewReader("deploy v1\n/allow 1\n"), &out)
	b.Register(Platform, s)
	if err := s.Run(context.Background(), b); err != nil {
		t.Fatal(err)
	}
	if deploy.ran != 1 || !strings.Contains(out.String(), "Deployed.") {
		t.Fatalf("deploy ran %d times:\n%s", deploy.ran, out.String())
	}
	evs, err := db.AuditEvents(context.Background(), confirm.AuditFilter{})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range evs {
		if e.Kind != confirm.AuditDecision {
			continue
		}
		n++
		var d struct {
			Status  string `json:"status"`
			Surface string `json:"surface"`
		}
		if err := json.Unmarshal([]byte(e.Detail), &d); err != nil {
			t.Fatal(err)
		}
		if d.Status != "allowed" || d.Surface != confirm.SurfaceTerminal || e.Actor != DefaultUser {
			t.Fatalf("decision row: actor %s, detail %s; want allowed by %s from the terminal", e.Actor, e.Detail, DefaultUser)
		}
	}
	if n != 1 {
		t.Fatalf("%d decision rows, want 1", n)
	}
}
