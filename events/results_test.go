package events_test

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/airlockhq/airlock/bot"
	"github.com/airlockhq/airlock/bot/bottest"
	"github.com/airlockhq/airlock/confirm"
	"github.com/airlockhq/airlock/events"
	"github.com/airlockhq/airlock/events/webhook"
	"github.com/airlockhq/airlock/model"
	"github.com/airlockhq/airlock/model/modeltest"
	"github.com/airlockhq/airlock/tools"
)

// outputTool returns out from every run.
type outputTool struct{ name, out string }

func (o outputTool) Spec() model.ToolSpec                                         { return model.ToolSpec{Name: o.name} }
func (outputTool) Confirm() bool                                                  { return false }
func (outputTool) Validate(json.RawMessage) error                                 { return nil }
func (o outputTool) Summary(json.RawMessage) (string, error)                      { return o.name, nil }
func (o outputTool) Run(context.Context, json.RawMessage, string) (string, error) { return o.out, nil }

type outputTools map[string]outputTool

func (s outputTools) Get(name string) (tools.Tool, bool) { t, ok := s[name]; return t, ok }
func (s outputTools) Specs() []model.ToolSpec {
	var out []model.ToolSpec
	for _, t := range s {
		out = append(out, t.Spec())
	}
	return out
}

// TestToolResultCarriesTheResult: a run of a real bot reaches a webhook's
// tool_result event with its result, scrubbed of secrets as the model sees
// it, whole under the default bound (16 KiB) and cut on a UTF-8 boundary,
// marked result_truncated, at a webhook's max_result_bytes; 0 sends none.
func TestToolResultCarriesTheResult(t *testing.T) {
	ctx := t.Context()
	const token = "tok-9f8e7d6c5b4a"
	out := "listing: " + token + " " + strings.Repeat("é", 40) // 2 bytes each
	whole, small, none := newReceiver(t, nil), newReceiver(t, nil), newReceiver(t, nil)
	cut, zero := 15, 0
	hSmall, hNone := small.hook("tool_result"), none.hook("tool_result")
	hSmall.MaxResultBytes, hNone.MaxResultBytes = &cut, &zero
	hooks := []events.Webhook{whole.hook("tool_result"), hSmall, hNone}
	cfg := events.Config{Webhooks: hooks}
	if err := cfg.Validate("events"); err != nil {
		t.Fatal(err)
	}
	db := openDB(t, hooks...)
	m := modeltest.NewScripted(
		model.Message{Role: model.RoleAssistant, ToolCalls: []confirm.ToolCall{{ID: "c1", Name: "list", Args: json.RawMessage(`{}`)}}},
		model.Message{Role: model.RoleAssistant, Text: "Listed."},
	)
	b, err := bot.New(bot.Config{
		Store: db, Model: m, Tools: outputTools{"list": {name: "list", out: out}}, Policy: confirm.NewPolicy(true, nil),
		Channels: bot.NewChannels([]bot.Channel{{Platform: "test", ID: "C1"}}),
		Timeout:  10 * time.Minute, WorkerID: "w1",
		Redact: func(s string) string { return strings.ReplaceAll(s, token, "[redacted]") },
	})
	if err != nil {
		t.Fatal(err)
	}
	b.Register("test", &bottest.Platform{})
	if err := b.HandleTurn(ctx, bot.Turn{Platform: "test", Channel: "C1", Thread: "T1", User: "bob", Text: "list"}); err != nil {
		t.Fatal(err)
	}
	d := events.NewDeliverer(db, hooks, events.Options{Worker: "r1"})
	if n := poll(t, d); n != 3 {
		t.Fatalf("delivered %d, want 3", n)
	}
	scrubbed := strings.ReplaceAll(out, token, "[redacted]")
	one := func(r *receiver) (webhook.Event, []byte) {
		t.Helper()
		got := r.receipts()
		if len(got) != 1 || got[0].ev.Type != webhook.EventToolResult {
			t.Fatalf("receipts: %+v", got)
		}
		if bytes.Contains(got[0].body, []byte(token)) {
			t.Fatalf("the secret reached the webhook: %s", got[0].body)
		}
		return got[0].ev, got[0].body
	}
	if ev, body := one(whole); ev.Result == nil || *ev.Result != scrubbed || ev.ResultTruncated || bytes.Contains(body, []byte("result_truncated")) {
		t.Fatalf("default bound: %s, want the whole scrubbed result", body)
	}
	if ev, body := one(small); ev.Result == nil || *ev.Result != scrubbed[:15] || !ev.ResultTruncated || !utf8.ValidString(*ev.Result) {
		t.Fatalf("bound 15: %s, want %q and result_truncated", body, scrubbed[:15])
	}
	if ev, body := one(none); ev.Result != nil || bytes.Contains(body, []byte(`"result"`)) {
		t.Fatalf("bound 0: %s, want no result", body)
	}
}

func TestMaxResultBytesConfig(t *testing.T) {
	w := hookTo("https://siem.example/x")
	if w.ResultBytes() != 16<<10 || w.Target().MaxResultBytes != 16<<10 {
		t.Fatalf("default: %d", w.ResultBytes())
	}
	for _, n := range []int{-1, 1<<20 + 1} {
		w.MaxResultBytes = &n
		err := events.Config{Webhooks: []events.Webhook{w}}.Validate("events")
		if err == nil || !strings.Contains(err.Error(), "events.webhooks[0].max_result_bytes") {
			t.Errorf("max_result_bytes %d: %v", n, err)
		}
	}
}
