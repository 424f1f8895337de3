package mcptools

import (
	"errors"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/airlockhq/airlock/keyerr"
)

func TestConfigYAML(t *testing.T) {
	src := `
- name: github
  command: ["github-mcp-server", "stdio"]
  env: {GITHUB_PERSONAL_ACCESS_TOKEN: "tok"}
  tools: [get_issue, create_issue]
  confirm: false
  trust_annotations: true
  timeout: 90s
  summaries:
    create_issue: "Open an issue in {{.owner}}/{{.repo}}: {{.title}}"
- name: internal
  url: https://mcp.internal.example/mcp
  headers: {Authorization: "Bearer x"}
`
	var cfgs []Config
	if err := yaml.Unmarshal([]byte(src), &cfgs); err != nil {
		t.Fatal(err)
	}
	if err := ValidateAll(cfgs); err != nil {
		t.Fatal(err)
	}
	g := cfgs[0]
	if g.Name != "github" || len(g.Command) != 2 || g.Env["GITHUB_PERSONAL_ACCESS_TOKEN"] != "tok" || len(g.Tools) != 2 ||
		g.Confirm == nil || *g.Confirm || !g.TrustAnnotations || g.Timeout != 90*time.Second || g.Summaries["create_issue"] == "" {
		t.Fatalf("github = %+v", g)
	}
	if i := cfgs[1]; i.URL != "https://mcp.internal.example/mcp" || i.Headers["Authorization"] != "Bearer x" || !i.confirm() || i.timeout() != DefaultTimeout {
		t.Fatalf("internal = %+v", i)
	}
}

func TestConfigValidateNamesTheKey(t *testing.T) {
	ok := func() Config { return Config{Name: "srv", Command: []string{"srv"}} }
	cases := []struct {
		name string
		cfg  func(*Config)
		key  string
	}{
		{"no name", func(c *Config) { c.Name = "" }, "mcp_servers[3].name"},
		{"bad name", func(c *Config) { c.Name = "Git-Hub" }, "mcp_servers[3].name"},
		{"digit first", func(c *Config) { c.Name = "1pass" }, "mcp_servers[3].name"},
		{"long name", func(c *Config) { c.Name = strings.Repeat("a", 62) }, "mcp_servers[3].name"},
		{"neither", func(c *Config) { c.Command = nil }, "mcp_servers[3]"},
		{"both", func(c *Config) { c.URL = "https://x.example" }, "mcp_servers[3].url"},
		{"empty program", func(c *Config) { c.Command = []string{""} }, "mcp_servers[3].command[0]"},
		{"NUL arg", func(c *Config) { c.Command = []string{"a", "b\x00"} }, "mcp_servers[3].command[1]"},
		{"headers with command", func(c *Config) { c.Headers = map[string]string{"A": "b"} }, "mcp_servers[3].headers"},
		{"bad env name", func(c *Config) { c.Env = map[string]string{"A=B": "x"} }, "mcp_servers[3].env"},
		{"url scheme", func(c *Config) { c.Command, c.URL = nil, "ftp://x.example" }, "mcp_servers[3].url"},
		{"url no host", func(c *Config) { c.Command, c.URL = nil, "https:///mcp" }, "mcp_servers[3].url"},
		{"env with url", func(c *Config) { c.Command, c.URL, c.Env = nil, "https://x.example", map[string]string{"A": "b"} }, "mcp_servers[3].env"},
		{"bad header", func(c *Config) {
			c.Command, c.URL, c.Headers = nil, "https://x.example", map[string]string{"Bad Name": "b"}
		}, "mcp_servers[3].headers"},
		{"header CRLF", func(c *Config) {
			c.Command, c.URL, c.Headers = nil, "https://x.example", map[string]string{"X-A": "b\r\nX-B: c"}
		}, "mcp_servers[3].headers.X-A"},
		{"bad tool", func(c *Config) { c.Tools = []string{"ok", "get.issue"} }, "mcp_servers[3].tools[1]"},
		{"long tool", func(c *Config) { c.Tools = []string{strings.Repeat("t", 60)} }, "mcp_servers[3].tools[0]"},
		{"dup tool", func(c *Config) { c.Tools = []string{"a", "a"} }, "mcp_servers[3].tools[1]"},
		{"negative timeout", func(c *Config) { c.Timeout = -time.Second }, "mcp_servers[3].timeout"},
		{"bad summary", func(c *Config) { c.Summaries = map[string]string{"create": "{{.x"} }, "mcp_servers[3].summaries.create"},
		{"summary not in tools", func(c *Config) {
			c.Tools, c.Summaries = []string{"a"}, map[string]string{"b": "B"}
		}, "mcp_servers[3].summaries.b"},
		{"summary bad name", func(c *Config) { c.Summaries = map[string]string{"a b": "x"} }, "mcp_servers[3].summaries.a b"},
	}
	for _, tc := range cases {
		c := ok()
		tc.cfg(&c)
		err := c.Validate("mcp_servers[3]")
		if err == nil {
			_, err = c.ParseSummaries("mcp_servers[3]") // the templates compile apart
		}
		var ce *keyerr.Error
		if !errors.As(err, &ce) || ce.Key != tc.key {
			t.Errorf("%s: err = %v, want key %s", tc.name, err, tc.key)
		}
	}
	good := ok()
	good.Summaries = map[string]string{"create": `{{.title}} {{json .labels}} {{quote .x}}`}
	if err := good.Validate("mcp_servers[0]"); err != nil {
		t.Errorf("valid config: %v", err)
	}
	if _, err := good.ParseSummaries("mcp_servers[0]"); err != nil {
		t.Errorf("valid summaries: %v", err)
	}
	err := ValidateAll([]Config{ok(), ok()})
	var ce *keyerr.Error
	if !errors.As(err, &ce) || ce.Key != "mcp_servers[1].name" {
		t.Errorf("duplicate names: %v", err)
	}
}
