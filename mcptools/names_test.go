package mcptools

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/airlockhq/airlock/keyerr"
	"github.com/airlockhq/airlock/model"
	"github.com/airlockhq/airlock/tools"
)

// Server names whose joined tool names can be equal are refused at load,
// naming both: "a" + "b__c" and "a__b" + "c" are both "a__b__c", so an
// ungated server could take a gated one's tool name.
func TestOverlappingServerNamesAreRefused(t *testing.T) {
	for _, tc := range []struct {
		names []string
		err   string // "" : accepted
	}{
		{[]string{"a", "a__b"}, `"a__b" and mcp_servers[0].name "a"`},
		{[]string{"a__b", "a"}, `"a" and mcp_servers[0].name "a__b"`},
		{[]string{"a", "a_"}, `"a_" and mcp_servers[0].name "a"`},
		{[]string{"gh", "x", "gh___y"}, `"gh___y" and mcp_servers[0].name "gh"`},
		{[]string{"aws", "aws_s3"}, ""}, // aws__t and aws_s3__u never meet
		{[]string{"a_b", "a"}, ""},
		{[]string{"ab", "a"}, ""},
	} {
		var cfgs []Config
		for _, n := range tc.names {
			cfgs = append(cfgs, memConfig(n))
		}
		err := ValidateAll(cfgs)
		if tc.err == "" {
			if err != nil {
				t.Errorf("%v: %v, want accepted", tc.names, err)
			}
			continue
		}
		var cerr *keyerr.Error
		if !errors.As(err, &cerr) || cerr.Key != "mcp_servers["+string(rune('0'+len(tc.names)-1))+"].name" || !strings.Contains(err.Error(), tc.err) {
			t.Errorf("%v: %v, want an error at the later server's name containing %s", tc.names, err, tc.err)
		}
	}
}

// multiDial serves each config name its own test server.
func multiDial(byName map[string]*mcp.Server) dialFunc {
	return func(cfg Config, log *slog.Logger) (mcp.Transport, error) {
		return memDial(byName[cfg.Name])(cfg, log)
	}
}

func serverWith(names ...string) *mcp.Server {
	srv := mcp.NewServer(&mcp.Implementation{Name: "airlock-test", Version: "1"}, nil)
	for _, n := range names {
		mcp.AddTool(srv, &mcp.Tool{Name: n, Description: "tool " + n},
			func(ctx context.Context, req *mcp.CallToolRequest, in struct{}) (*mcp.CallToolResult, any, error) {
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ran " + n}}}, nil, nil
			})
	}
	return srv
}

// Started without config validation, the manager still refuses the later
// of two overlapping servers: the gated server's a__b__c stays its own.
func TestStartRefusesAnOverlappingServer(t *testing.T) {
	gated, ungated := memConfig("a__b"), memConfig("a")
	ungated.Confirm = ptr(false)
	set := &tools.Set{}
	log, logs := newLog()
	startManager(t, []Config{gated, ungated}, set, log, multiDial(map[string]*mcp.Server{
		"a__b": serverWith("c"),
		"a":    serverWith("b__c", "other"),
	}))
	if got := mustTool(t, set, "a__b__c"); !got.Confirm() {
		t.Fatal("a__b__c is the ungated server's: an ungated server took a gated tool's name")
	}
	if set.Has("a__other") {
		t.Fatal("the overlapping server was started")
	}
	if s := logs.String(); !strings.Contains(s, "server=a ") || !strings.Contains(s, "other_server=a__b") {
		t.Fatalf("log does not name both servers:\n%s", s)
	}
}

// namedTool is a configured tool holding a name.
type namedTool struct{ name string }

func (n namedTool) Spec() model.ToolSpec                                       { return model.ToolSpec{Name: n.name} }
func (namedTool) Confirm() bool                                                { return true }
func (namedTool) Validate(json.RawMessage) error                               { return nil }
func (namedTool) Summary(json.RawMessage) (string, error)                      { return "", nil }
func (namedTool) Run(context.Context, json.RawMessage, string) (string, error) { return "config", nil }

// A listed tool whose joined name is taken is not offered, and the log
// names both the tool and the one holding its name.
func TestListedToolWithATakenNameIsNotOffered(t *testing.T) {
	set := &tools.Set{}
	if err := set.Add(namedTool{"mem__get_item"}); err != nil {
		t.Fatal(err)
	}
	log, logs := newLog()
	startManager(t, []Config{memConfig("mem")}, set, log, memDial(newTestServer(&recorder{}, nil)))
	mustTool(t, set, "mem__delete_item")
	if got := mustTool(t, set, "mem__get_item"); got.(namedTool).name != "mem__get_item" {
		t.Fatal("the MCP tool replaced the configured one")
	}
	s := logs.String()
	if !strings.Contains(s, "name is taken") || !strings.Contains(s, "server=mem") || !strings.Contains(s, `tool=get_item`) ||
		!strings.Contains(s, `the configured tool \"mem__get_item\"`) {
		t.Fatalf("log does not name both tools:\n%s", s)
	}
}
