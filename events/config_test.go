package events_test

import (
	"errors"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/airlockhq/airlock/events"
	"github.com/airlockhq/airlock/events/webhook"
	"github.com/airlockhq/airlock/keyerr"
	"github.com/airlockhq/airlock/storage"
)

func TestConfigYAML(t *testing.T) {
	src := `
webhooks:
  - url: https://siem.internal.example/airlock
    secret: 0123456789abcdef0123
    events: [tool_call, approval_request, decision, tool_result]
  - url: https://pager.example/hook?token=abc
    secret: 0123456789abcdef0123
`
	var c events.Config
	if err := yaml.Unmarshal([]byte(src), &c); err != nil {
		t.Fatal(err)
	}
	if err := c.Validate("events"); err != nil {
		t.Fatal(err)
	}
	targets := c.Targets()
	if len(targets) != 2 || len(targets[0].Events) != 4 || targets[0].Events[2] != webhook.EventDecision || len(targets[1].Events) != 0 {
		t.Fatalf("targets = %+v", targets)
	}
	if targets[0].ID != storage.WebhookID("https://siem.internal.example/airlock") || len(targets[0].ID) != 16 || targets[0].ID == targets[1].ID {
		t.Fatalf("ids = %s, %s", targets[0].ID, targets[1].ID)
	}
	if n := c.Webhooks[1].Name(); strings.Contains(n, "token") || !strings.HasPrefix(n, "https://pager.example (") {
		t.Fatalf("Name = %q", n)
	}
}

func TestConfigValidate(t *testing.T) {
	good := events.Webhook{URL: "https://a.example/h", Secret: strings.Repeat("s", 16)}
	with := func(edit func(*events.Webhook)) events.Config {
		w := good
		edit(&w)
		return events.Config{Webhooks: []events.Webhook{w}}
	}
	for _, c := range []struct {
		cfg events.Config
		key string
	}{
		{with(func(w *events.Webhook) { w.URL = "" }), "events.webhooks[0].url"},
		{with(func(w *events.Webhook) { w.URL = "ftp://a.example/" }), "events.webhooks[0].url"},
		{with(func(w *events.Webhook) { w.URL = "https:///path" }), "events.webhooks[0].url"},
		{with(func(w *events.Webhook) { w.URL = "https://a.example/#x" }), "events.webhooks[0].url"},
		{with(func(w *events.Webhook) { w.Secret = "" }), "events.webhooks[0].secret"},
		{with(func(w *events.Webhook) { w.Secret = "short" }), "events.webhooks[0].secret"},
		{with(func(w *events.Webhook) { w.Events = []string{"tool_call", "tool_calls"} }), "events.webhooks[0].events[1]"},
		{with(func(w *events.Webhook) { w.Events = []string{"decision", "decision"} }), "events.webhooks[0].events[1]"},
		{events.Config{Webhooks: []events.Webhook{good, good}}, "events.webhooks[1].url"},
	} {
		err := c.cfg.Validate("events")
		var ke *keyerr.Error
		if !errors.As(err, &ke) || ke.Key != c.key {
			t.Errorf("Validate(%+v) = %v, want an error naming %s", c.cfg.Webhooks, err, c.key)
		}
	}
	every := with(func(w *events.Webhook) {
		for _, e := range webhook.EventTypes {
			w.Events = append(w.Events, string(e))
		}
	})
	if err := every.Validate("events"); err != nil {
		t.Fatalf("every event type: %v", err)
	}
	if err := (events.Config{}).Validate("events"); err != nil {
		t.Fatalf("no webhooks: %v", err)
	}
}
