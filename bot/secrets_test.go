package bot_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/airlockhq/airlock/adapters/shell"
	"github.com/airlockhq/airlock/bot"
	"github.com/airlockhq/airlock/confirm"
	"github.com/airlockhq/airlock/model"
	"github.com/airlockhq/airlock/redact"
	"github.com/airlockhq/airlock/storage"
)

const botSecret = "sk-live-0123456789abc"

// secretTool reads its arguments back with the target and token, records
// the exact bytes it runs with and returns out.
type secretTool struct {
	mu   sync.Mutex
	args []string
	out  string
}

func (s *secretTool) Spec() model.ToolSpec { return model.ToolSpec{Name: "deploy"} }
func (s *secretTool) Confirm() bool        { return true }
func (s *secretTool) Validate(args json.RawMessage) error {
	return json.Unmarshal(args, new(map[string]any))
}
func (s *secretTool) Summary(args json.RawMessage) (string, error) {
	var m map[string]string
	_ = json.Unmarshal(args, &m)
	return "Deploy to " + m["target"] + " with token " + m["token"], nil
}
func (s *secretTool) Run(_ context.Context, args json.RawMessage, _ string) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.args = append(s.args, string(args))
	return s.out, nil
}

// TestSecretsStayOffEveryPath: a model that puts a secret in its words and
// its arguments, and a tool that echoes it encoded, get it onto no card
// (as the terminal renders it), no Edit… form, no tool_call audit detail,
// no webhook body and not back to the model; the tool still runs with the
// exact bytes, which stay in the database as sent.
func TestSecretsStayOffEveryPath(t *testing.T) {
	r := redact.New([]string{botSecret})
	db, err := storage.Open(context.Background(), "sqlite", filepath.Join(t.TempDir(), "scrubbed.db"), storage.WithScrub(r.String))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	if err := db.SetWebhooks([]storage.WebhookTarget{{ID: "siem"}}); err != nil {
		t.Fatal(err)
	}
	goJSON, _ := json.Marshal(botSecret + "&<>")
	tool := &secretTool{out: strings.Join([]string{
		"b64 " + base64.StdEncoding.EncodeToString([]byte(botSecret)),
		"b64url " + base64.RawURLEncoding.EncodeToString([]byte(botSecret)),
		"query " + url.QueryEscape(botSecret+"/&"),
		"json " + string(goJSON),
	}, "\n")}
	h := newHarnessWith(t, "", func(c *bot.Config) {
		c.Store = db
		c.Now = db.Clock() // the bot and its store read one clock
		c.Tools = toolSetWith{"deploy": tool}
		c.Redact = r.String
	})
	args := `{"target":"prod","token":"` + botSecret + `","note":"a<b & c"}`
	reply := calls(tc("a", "deploy", args))
	reply.Text = "I'll use " + botSecret + " to deploy."
	h.push(reply, text("done"))
	h.turn("bob", "deploy")

	leaks := func(where, s string) {
		t.Helper()
		for _, form := range []string{botSecret, base64.StdEncoding.EncodeToString([]byte(botSecret))[:20], url.QueryEscape(botSecret + "/&"), strings.Trim(string(goJSON), `"`)} {
			if strings.Contains(s, form) {
				t.Errorf("%s holds the secret (%q):\n%s", where, form, s)
			}
		}
	}
	c := h.plat.LastCard()
	rendered := shell.Render(c)
	leaks("the card", rendered)
	if !strings.Contains(c.Intro, redact.Marker) || !strings.Contains(c.Calls[0].Args, redact.Marker) || !strings.Contains(c.Calls[0].Summary, redact.Marker) {
		t.Errorf("card: intro %q, args %q, summary %q", c.Intro, c.Calls[0].Args, c.Calls[0].Summary)
	}
	ref := c.Calls[0].Ref
	click := bot.Click{Platform: "test", Channel: "C1", User: "alice", Ref: ref, Message: cardMsg(ref)}
	shown, err := h.bot.ClickedCard(context.Background(), click) // "Show full arguments"
	if err != nil {
		t.Fatal(err)
	}
	leaks("the full arguments", shown.Calls[0].Args+shown.Intro)
	form, err := h.bot.EditForm(context.Background(), click)
	if err != nil {
		t.Fatal(err)
	}
	leaks("the Edit… form", form.Args+form.Summary)
	// Submitting the form as shown would run the marker in the secret's
	// place: refused, nothing changed.
	var ee *bot.EditError
	if err := h.bot.Edit(context.Background(), click, form.Args); !errors.As(err, &ee) {
		t.Fatalf("edit with the marker: %v", err)
	}

	if err := h.click("alice", 1, true, ""); err != nil {
		t.Fatal(err)
	}
	tool.mu.Lock()
	ran := append([]string(nil), tool.args...)
	tool.mu.Unlock()
	if len(ran) != 1 || ran[0] != args {
		t.Fatalf("the tool ran with %q, want exactly %q", ran, args)
	}
	batch, err := db.Batch(context.Background(), c.BatchID)
	if err != nil || string(batch.Calls[0].Args) != args {
		t.Fatalf("stored args %s, %v", batch.Calls[0].Args, err)
	}
	for _, res := range lastToolResults(t, h.lastRequest()) {
		leaks("the tool result to the model", res.Content)
	}

	events, err := db.AuditEvents(context.Background(), confirm.AuditFilter{})
	if err != nil {
		t.Fatal(err)
	}
	sawCall := false
	for _, e := range events {
		if e.Kind == confirm.AuditToolCall {
			sawCall = true
			leaks("the tool_call audit", e.Detail)
			var d struct{ Args map[string]string }
			if err := json.Unmarshal([]byte(e.Detail), &d); err != nil || d.Args["target"] != "prod" || d.Args["note"] != "a<b & c" {
				t.Errorf("tool_call detail %s: %v", e.Detail, err)
			}
		}
	}
	if !sawCall {
		t.Fatal("no tool_call audit event")
	}
	ds, err := db.Deliveries(context.Background(), storage.DeliveryFilter{})
	if err != nil || len(ds) == 0 {
		t.Fatalf("deliveries: %d, %v", len(ds), err)
	}
	for _, d := range ds {
		leaks("webhook body "+string(d.Type), string(d.Body))
		if !json.Valid(d.Body) {
			t.Errorf("webhook body not JSON: %s", d.Body)
		}
	}
}
