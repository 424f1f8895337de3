package gateway

import (
	"errors"
	"strings"
	"testing"

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
