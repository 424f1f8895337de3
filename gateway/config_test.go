package gateway

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/airlockhq/airlock/keyerr"
)

func goodClient() Client {
	return Client{Name: "alice-laptop", Token: strings.Repeat("a", 40), ActsFor: "U0ALICE",
		Channel: ChannelRef{Platform: "slack", ID: "C0OPS"}, Ask: []string{"Bash", "Write", "mcp__*"}, Deny: []string{"WebFetch"}}
}

// A bad client is refused naming its key, and a good one is accepted.
func TestValidateNamesTheKey(t *testing.T) {
	if err := (Config{Clients: []Client{goodClient()}}).Validate("gateway"); err != nil {
		t.Fatalf("a good client: %v", err)
	}
	for want, edit := range map[string]func(c *Config){
		"gateway.clients[0].name":                func(c *Config) { c.Clients[0].Name = "Alice Laptop" },
		"gateway.clients[0].token":               func(c *Config) { c.Clients[0].Token = "short" },
		"gateway.clients[0].acts_for":            func(c *Config) { c.Clients[0].ActsFor = "" },
		"gateway.clients[0].channel.platform":    func(c *Config) { c.Clients[0].Channel.Platform = "teams" },
		"gateway.clients[0].channel.id":          func(c *Config) { c.Clients[0].Channel.ID = "*" },
		"gateway.clients[0].ask[1]":              func(c *Config) { c.Clients[0].Ask[1] = "[" },
		"gateway.clients[0].max_pending":         func(c *Config) { c.Clients[0].MaxPending = -1 },
		"gateway.clients[0].requests_per_minute": func(c *Config) { c.Clients[0].RequestsPerMinute = -1 },
		"gateway.clients[0].callback_secret": func(c *Config) {
			c.Clients[0].CallbackSecret, c.Clients[0].CallbackURLs = "short", []string{"https://hooks.example.com/"}
		},
		"gateway.clients[0].callback_urls": func(c *Config) { c.Clients[0].CallbackSecret = strings.Repeat("s", 32) },
		"gateway.clients[0].callback_urls[0]": func(c *Config) {
			c.Clients[0].CallbackSecret, c.Clients[0].CallbackURLs = strings.Repeat("s", 32), []string{"ftp://hooks.example.com/"}
		},
		"gateway.clients[1].name": func(c *Config) {
			b := goodClient()
			b.Token = strings.Repeat("b", 40)
			c.Clients = append(c.Clients, b)
		},
		"gateway.clients[1].token": func(c *Config) {
			b := goodClient()
			b.Name = "bob"
			c.Clients = append(c.Clients, b)
		},
	} {
		c := Config{Clients: []Client{goodClient()}}
		edit(&c)
		var ke *keyerr.Error
		if err := c.Validate("gateway"); !errors.As(err, &ke) || ke.Key != want {
			t.Errorf("%s: %v", want, err)
		}
		if err := c.Validate("gateway"); err != nil && strings.Contains(err.Error(), strings.Repeat("a", 40)) {
			t.Errorf("%s: the error holds the token: %v", want, err)
		}
	}
}

// Deny wins; an allow-list denies what it and ask leave out; ask asks;
// the rest is free (allowed, audited).
func TestJudge(t *testing.T) {
	c := goodClient()
	for tool, want := range map[string]Verdict{"Bash": Asks, "mcp__github__merge": Asks, "WebFetch": Denied, "Read": Free} {
		if got := c.Judge(tool); got != want {
			t.Errorf("%s: %v, want %v", tool, got, want)
		}
	}
	c.Allow = []string{"Read", "Glob"}
	for tool, want := range map[string]Verdict{"Read": Free, "Bash": Asks, "Grep": Denied, "WebFetch": Denied} {
		if got := c.Judge(tool); got != want {
			t.Errorf("with an allow-list, %s: %v, want %v", tool, got, want)
		}
	}
}

// A token finds its client; any other string, the empty one included,
// finds none.
func TestByToken(t *testing.T) {
	a, b := goodClient(), goodClient()
	b.Name, b.Token = "bob", strings.Repeat("b", 40)
	c := Config{Clients: []Client{a, b}}
	if got, ok := c.ByToken(strings.Repeat("b", 40)); !ok || got.Name != "bob" {
		t.Fatalf("bob's token: %+v %v", got, ok)
	}
	for _, tok := range []string{"", strings.Repeat("b", 39), strings.Repeat("b", 41), strings.Repeat("c", 40)} {
		if _, ok := c.ByToken(tok); ok {
			t.Errorf("%q found a client", tok)
		}
	}
}

// A callback_url must lie under one of the client's callback_urls: the
// same scheme and host, under its path at a "/"; tricks with a longer
// host, a longer path segment, "..", a user or a fragment are refused.
func TestCallbackAllowed(t *testing.T) {
	c := goodClient()
	if err := c.CallbackAllowed("https://hooks.example.com/airlock/x"); err == nil {
		t.Fatal("a client without callback_secret allowed a callback")
	}
	c.CallbackSecret = strings.Repeat("s", 32)
	c.CallbackURLs = []string{"https://hooks.example.com/airlock/", "http://127.0.0.1:8088/cb"}
	for _, ok := range []string{
		"https://hooks.example.com/airlock/",
		"https://hooks.example.com/airlock/wf/123?run=abc",
		"https://HOOKS.example.com/airlock/x",
		"http://127.0.0.1:8088/cb",
		"http://127.0.0.1:8088/cb/7",
	} {
		if err := c.CallbackAllowed(ok); err != nil {
			t.Errorf("%s: %v", ok, err)
		}
	}
	for _, bad := range []string{
		"https://hooks.example.com.evil.test/airlock/x",
		"https://hooks.example.com/airlockx",
		"https://hooks.example.com/",
		"https://hooks.example.com/airlock/../admin",
		"http://hooks.example.com/airlock/x",
		"https://user:pw@hooks.example.com/airlock/x",
		"https://hooks.example.com/airlock/x#frag",
		"http://127.0.0.1:8089/cb",
		"http://127.0.0.1:8088/cbx",
		"http://169.254.169.254/latest/meta-data",
		"file:///etc/passwd",
		"https://hooks.example.com/airlock/" + strings.Repeat("a", MaxCallbackURLLength),
	} {
		err := c.CallbackAllowed(bad)
		if err == nil {
			t.Errorf("%s was allowed", bad)
		} else if strings.Contains(err.Error(), "evil") || strings.Contains(err.Error(), "169.254") {
			t.Errorf("the error echoes the URL: %v", err)
		}
	}
}

// gateway.mcp: a path such as /mcp, not one airlock run serves; a hold
// of at most 5 minutes, 45 s by default.
func TestMCPConfig(t *testing.T) {
	for _, ok := range []MCP{{}, {Path: "/mcp"}, {Path: "/agents/mcp", Hold: 5 * time.Minute}} {
		c := Config{MCP: ok, Clients: []Client{goodClient()}}
		if err := c.Validate("gateway"); err != nil {
			t.Errorf("%+v: %v", ok, err)
		}
	}
	for want, bad := range map[string]MCP{
		"gateway.mcp.path": {Path: "mcp"},
		"gateway.mcp.hold": {Path: "/mcp", Hold: 6 * time.Minute},
	} {
		var ke *keyerr.Error
		if err := (Config{MCP: bad}).Validate("gateway"); !errors.As(err, &ke) || ke.Key != want {
			t.Errorf("%+v: %v, want %s", bad, err, want)
		}
	}
	for _, p := range []string{"/v1/approvals", "/slack/events", "/metrics", "/", "/mcp/../v1", "/a b"} {
		if err := (Config{MCP: MCP{Path: p}}).Validate("gateway"); err == nil {
			t.Errorf("path %q accepted", p)
		}
	}
	c := Config{MCP: MCP{Path: "/mcp"}}
	c.SetDefaults()
	if c.MCP.Hold != DefaultHold {
		t.Errorf("default hold %s", c.MCP.Hold)
	}
	cl := goodClient()
	cl.Tools = []string{"service_*", "runbook__restart"}
	for tool, want := range map[string]bool{"service_status": true, "runbook__restart": true, "runbook__drop": false, "ban_member": false} {
		if cl.Offers(tool) != want {
			t.Errorf("Offers(%s) = %v", tool, !want)
		}
	}
}
