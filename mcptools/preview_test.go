package mcptools

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/airlockhq/airlock/keyerr"
	"github.com/airlockhq/airlock/tools"
)

// previews: {delete_item: get_item} previews delete_item calls with
// get_item, same arguments, no idempotency key; the previewed tool itself
// is not called.
func TestServerToolPreviewsAnother(t *testing.T) {
	rec := &recorder{}
	set := &tools.Set{}
	cfg := memConfig("mem")
	cfg.Previews = map[string]string{"delete_item": "get_item"}
	startManager(t, []Config{cfg}, set, nil, memDial(newTestServer(rec, nil)))

	pv, ok := tools.PreviewOf(mustTool(t, set, "mem__delete_item"))
	if !ok {
		t.Fatal("mem__delete_item has no preview")
	}
	if _, recheck := pv.Previews(); recheck {
		t.Error("an MCP preview rechecks")
	}
	out, err := pv.Preview(context.Background(), json.RawMessage(`{"id":"42"}`))
	if err != nil || out != "item 42" {
		t.Fatalf("Preview = %q, %v", out, err)
	}
	if n := len(rec.of("delete_item")); n != 0 {
		t.Fatalf("the previewed tool was called %d times", n)
	}
	got := rec.of("get_item")
	if len(got) != 1 || string(got[0].Args) != `{"id":"42"}` || got[0].Meta[IdempotencyMetaKey] != nil {
		t.Fatalf("preview calls %+v", got)
	}
	if _, err := pv.Preview(context.Background(), json.RawMessage(`{"id":42}`)); !errors.Is(err, tools.ErrInvalidArgs) {
		t.Errorf("Preview with invalid arguments = %v, want ErrInvalidArgs (nothing sent)", err)
	}
	if _, ok := tools.PreviewOf(mustTool(t, set, "mem__get_item")); ok {
		t.Error("get_item has a preview")
	}
}

func TestPreviewsConfigNamesTheKey(t *testing.T) {
	for _, tc := range []struct {
		name     string
		previews map[string]string
		tools    []string
		key      string
	}{
		{"bad tool", map[string]string{"a b": "plan"}, nil, "mcp_servers[0].previews.a b"},
		{"bad preview tool", map[string]string{"apply": ""}, nil, "mcp_servers[0].previews.apply"},
		{"itself", map[string]string{"apply": "apply"}, nil, "mcp_servers[0].previews.apply"},
		{"not carried", map[string]string{"apply": "plan"}, []string{"plan"}, "mcp_servers[0].previews.apply"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := Config{Name: "infra", Command: []string{"srv"}, Previews: tc.previews, Tools: tc.tools}
			var ke *keyerr.Error
			if err := ValidateAll([]Config{cfg}); !errors.As(err, &ke) || ke.Key != tc.key {
				t.Fatalf("error %v, want one naming %s", err, tc.key)
			}
		})
	}
	ok := Config{Name: "infra", Command: []string{"srv"}, Previews: map[string]string{"apply": "plan"}}
	if err := ValidateAll([]Config{ok}); err != nil {
		t.Fatal(err)
	}
}
