package config

import (
	"strings"
	"testing"
)

func TestMaxCallsPerReply(t *testing.T) {
	c, err := Parse([]byte(minimal), env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if c.Model.MaxCallsPerReply != 32 {
		t.Fatalf("model.max_calls_per_reply default: %d, want 32", c.Model.MaxCallsPerReply)
	}
	c, err = Parse([]byte(minimal+"  max_calls_per_reply: 500\n"), env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if c.Model.MaxCallsPerReply != 500 {
		t.Fatalf("model.max_calls_per_reply: %d, want 500", c.Model.MaxCallsPerReply)
	}
	_, err = Parse([]byte(minimal+"  max_calls_per_reply: -1\n"), env(nil))
	if err == nil || !strings.Contains(err.Error(), "model.max_calls_per_reply") {
		t.Fatalf("a negative limit: %v, want an error naming model.max_calls_per_reply", err)
	}
}

// A configured tool named like an MCP server's tools is refused, naming
// the tool and the server; so are MCP servers whose tool names can meet.
func TestToolNameClashesNameBoth(t *testing.T) {
	cfg := minimal + `tools:
  - name: a__b__c
    http: {url: 'http://127.0.0.1:9/x'}
mcp_servers:
  - {name: z, url: 'http://127.0.0.1:9/mcp'}
  - {name: a__b, url: 'http://127.0.0.1:9/mcp'}
`
	_, err := Parse([]byte(cfg), env(nil))
	if err == nil || !strings.Contains(err.Error(), "tools[0].name") || !strings.Contains(err.Error(), `mcp_servers[1] ("a__b")`) {
		t.Fatalf("err = %v, want tools[0].name and mcp_servers[1] (\"a__b\") named", err)
	}
	cfg = minimal + `mcp_servers:
  - {name: a__b, url: 'http://127.0.0.1:9/mcp', confirm: true}
  - {name: a, url: 'http://127.0.0.1:9/mcp', confirm: false}
`
	_, err = Parse([]byte(cfg), env(nil))
	if err == nil || !strings.Contains(err.Error(), "mcp_servers[1].name") || !strings.Contains(err.Error(), `mcp_servers[0].name "a__b"`) {
		t.Fatalf("err = %v, want mcp_servers[1].name and mcp_servers[0].name named", err)
	}
}

func TestWebhookMaxResultBytes(t *testing.T) {
	base := minimal + "events:\n  webhooks:\n    - {url: 'https://siem.example/a', secret: 0123456789abcdef0123"
	c, err := Parse([]byte(base+", max_result_bytes: 100}\n"), env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Events.Webhooks[0].Target().MaxResultBytes; got != 100 {
		t.Fatalf("max_result_bytes: %d", got)
	}
	c, err = Parse([]byte(base+"}\n"), env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Events.Webhooks[0].Target().MaxResultBytes; got != 16<<10 {
		t.Fatalf("default max_result_bytes: %d, want 16 KiB", got)
	}
	if _, err := Parse([]byte(base+", max_result_bytes: -5}\n"), env(nil)); err == nil || !strings.Contains(err.Error(), "events.webhooks[0].max_result_bytes") {
		t.Fatalf("negative: %v", err)
	}
}
