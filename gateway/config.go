// Package gateway is Airlock as the approval plane for agents it does not
// run (issue 36): the clients that may ask for approval over HTTP, who
// each acts for, where their cards go, and which of their tools need a
// yes. This file holds the configuration (`gateway:`); api.go serves the
// API over the approval core's Approvals.
package gateway

import (
	"crypto/subtle"
	"errors"
	"fmt"
	"net/url"
	"path"
	"regexp"
	"strings"
	"time"

	"github.com/airlockhq/airlock/keyerr"
)

// Config is the `gateway:` section.
type Config struct {
	// MCP serves Airlock's tools to the clients over MCP (issue 37);
	// off while its path is empty.
	MCP     MCP      `yaml:"mcp"`
	Clients []Client `yaml:"clients"`
}

// MCP is `gateway.mcp`: MCP over streamable HTTP on `listen`.
type MCP struct {
	// Path is where it is served, such as /mcp; "" serves nothing.
	Path string `yaml:"path"`
	// Hold is how long a call that needs a yes waits inside tools/call
	// before answering that it waits; default DefaultHold, at most
	// MaxHold.
	Hold time.Duration `yaml:"hold"`
}

// Bounds of gateway.mcp.hold.
const (
	DefaultHold = 45 * time.Second
	MaxHold     = 5 * time.Minute
)

// Client is one agent (or the laptop it runs on) allowed to ask.
type Client struct {
	// Name is shown on cards and in the audit: [a-z0-9_-]{1,48}, unique.
	Name string `yaml:"name"`
	// Token is the client's bearer token, at least MinTokenLength
	// characters; compared in constant time, never logged.
	Token string `yaml:"token"`
	// ActsFor is the person the agent works for, as the channel's
	// platform knows them: the requester of its calls (self-approval,
	// requester rules, grants).
	ActsFor string `yaml:"acts_for"`
	// Channel is a configured channel: its cards go there, its approvers
	// decide.
	Channel ChannelRef `yaml:"channel"`
	// Ask are tool-name globs whose calls need a yes; rules may add.
	Ask []string `yaml:"ask"`
	// Deny are tool-name globs never allowed (no card).
	Deny []string `yaml:"deny"`
	// Allow, when given, is an allow-list: any other tool is denied.
	Allow []string `yaml:"allow"`
	// Tools are globs of Airlock's own tools (config tools, upstream MCP
	// servers' tools under their Airlock names, runbook__<name>) the
	// client is offered over MCP; none when absent.
	Tools []string `yaml:"tools"`
	// MaxPending bounds the client's waiting approvals; default
	// DefaultMaxPending.
	MaxPending int `yaml:"max_pending"`
	// RequestsPerMinute bounds the client's requests; default
	// DefaultRequestsPerMinute.
	RequestsPerMinute int `yaml:"requests_per_minute"`
	// CallbackSecret signs the callbacks of the client's requests (the
	// webhooks' Airlock-Signature); without it a request's callback_url
	// is refused.
	CallbackSecret string `yaml:"callback_secret"`
	// CallbackURLs are where callbacks may go: a request's callback_url
	// must have one's scheme and host and lie under its path. Required
	// with CallbackSecret, so that a client's token cannot make Airlock
	// POST anywhere it can reach.
	CallbackURLs []string `yaml:"callback_urls"`
}

// ChannelRef names a configured channel.
type ChannelRef struct {
	Platform string `yaml:"platform"`
	ID       string `yaml:"id"`
}

// Bounds and defaults.
const (
	MinTokenLength           = 32
	MinCallbackSecretLength  = 16
	MaxCallbackURLLength     = 2000
	DefaultMaxPending        = 20
	DefaultRequestsPerMinute = 120
)

var clientName = regexp.MustCompile(`^[a-z0-9_-]{1,48}$`)

// SetDefaults fills in what a client left out.
func (c *Config) SetDefaults() {
	if c.MCP.Path != "" && c.MCP.Hold == 0 {
		c.MCP.Hold = DefaultHold
	}
	for i := range c.Clients {
		cl := &c.Clients[i]
		if cl.MaxPending == 0 {
			cl.MaxPending = DefaultMaxPending
		}
		if cl.RequestsPerMinute == 0 {
			cl.RequestsPerMinute = DefaultRequestsPerMinute
		}
	}
}

// Validate checks the section at key ("gateway"), naming the key at
// fault. Whether each client's channel is configured, and its acts_for
// a user id of that platform, is the config's cross-check (it knows the
// channels).
func (c Config) Validate(key string) error {
	if err := c.MCP.validate(key + ".mcp"); err != nil {
		return err
	}
	tokens := map[string]int{}
	return keyerr.List(key+".clients", c.Clients, func(cl Client, k string) error {
		if err := cl.validate(k); err != nil {
			return err
		}
		for t, j := range tokens {
			if subtle.ConstantTimeCompare([]byte(t), []byte(cl.Token)) == 1 {
				return keyerr.New(k+".token", "the same token as clients[%d]: each client needs its own", j)
			}
		}
		tokens[cl.Token] = len(tokens)
		return nil
	}, func(cl Client) string { return cl.Name }, func(cl Client, k string, first int) error {
		return keyerr.New(k+".name", "%q is also clients[%d]'s name", cl.Name, first)
	})
}

func (cl Client) validate(k string) error {
	switch {
	case !clientName.MatchString(cl.Name):
		return keyerr.New(k+".name", "%q: 1 to 48 of a-z, 0-9, _ and -", cl.Name)
	case len(cl.Token) < MinTokenLength:
		return keyerr.New(k+".token", "at least %d characters (got %d)", MinTokenLength, len(cl.Token))
	case cl.ActsFor == "":
		return keyerr.New(k+".acts_for", "required: the user id of the person the agent works for")
	case cl.Channel.Platform != "slack" && cl.Channel.Platform != "discord":
		return keyerr.New(k+".channel.platform", "%q: slack or discord", cl.Channel.Platform)
	case cl.Channel.ID == "" || cl.Channel.ID == "*" || cl.Channel.ID == "dm":
		return keyerr.New(k+".channel.id", "%q: one channel's id", cl.Channel.ID)
	case cl.MaxPending < 0:
		return keyerr.New(k+".max_pending", "must not be negative")
	case cl.RequestsPerMinute < 0:
		return keyerr.New(k+".requests_per_minute", "must not be negative")
	}
	if err := cl.validateCallbacks(k); err != nil {
		return err
	}
	for field, globs := range map[string][]string{"ask": cl.Ask, "deny": cl.Deny, "allow": cl.Allow, "tools": cl.Tools} {
		for i, g := range globs {
			if _, err := path.Match(g, ""); err != nil || g == "" {
				return keyerr.New(fmt.Sprintf("%s.%s[%d]", k, field, i), "%q is not a tool-name glob", g)
			}
		}
	}
	return nil
}

// Verdict is what a client's lists say of a tool, before the rules
// (which may only add: ask, or deny).
type Verdict int

const (
	// Free: no list names it; allowed, and audited.
	Free Verdict = iota
	// Asks: a person must decide.
	Asks
	// Denied: never allowed, no card (deny, or not on an allow-list).
	Denied
)

// Judge is what the client's lists say of tool: deny wins, then an
// allow-list that leaves it out, then ask.
func (cl Client) Judge(tool string) Verdict {
	switch {
	case matchAny(cl.Deny, tool):
		return Denied
	case len(cl.Allow) > 0 && !matchAny(cl.Allow, tool) && !matchAny(cl.Ask, tool):
		return Denied
	case matchAny(cl.Ask, tool):
		return Asks
	}
	return Free
}

func matchAny(globs []string, name string) bool {
	for _, g := range globs {
		if ok, _ := path.Match(g, name); ok {
			return true
		}
	}
	return false
}

// ByToken is the client whose token is token, compared in constant time
// against every client's (so the time taken says nothing of which, or
// how much, matched).
func (c Config) ByToken(token string) (Client, bool) {
	var found Client
	ok := 0
	for _, cl := range c.Clients {
		if subtle.ConstantTimeCompare([]byte(cl.Token), []byte(token)) == 1 {
			found, ok = cl, 1
		}
	}
	return found, ok == 1 && token != ""
}

func (cl Client) validateCallbacks(k string) error {
	switch {
	case cl.CallbackSecret != "" && len(cl.CallbackSecret) < MinCallbackSecretLength:
		return keyerr.New(k+".callback_secret", "at least %d characters (e.g. openssl rand -hex 32, given as ${AIRLOCK_CALLBACK_SECRET})", MinCallbackSecretLength)
	case cl.CallbackSecret != "" && len(cl.CallbackURLs) == 0:
		return keyerr.New(k+".callback_urls", "required with callback_secret: the URLs (prefixes) callbacks may go to")
	case cl.CallbackSecret == "" && len(cl.CallbackURLs) > 0:
		return keyerr.New(k+".callback_secret", "required with callback_urls: it signs the callbacks")
	}
	for i, raw := range cl.CallbackURLs {
		if _, err := parseCallbackURL(raw); err != nil {
			return keyerr.New(fmt.Sprintf("%s.callback_urls[%d]", k, i), "%v", err)
		}
	}
	return nil
}

// parseCallbackURL reads an http or https URL with a host, no user, no
// fragment, and no . or .. in its path.
func parseCallbackURL(raw string) (*url.URL, error) {
	if len(raw) > MaxCallbackURLLength {
		return nil, fmt.Errorf("over %d characters", MaxCallbackURLLength)
	}
	u, err := url.Parse(raw)
	switch {
	case err != nil:
		return nil, errors.New("not a URL")
	case u.Scheme != "http" && u.Scheme != "https" || u.Host == "":
		return nil, errors.New("must be an http:// or https:// URL with a host")
	case u.User != nil:
		return nil, errors.New("must not hold a user or password")
	case u.Fragment != "" || strings.Contains(raw, "#"):
		return nil, errors.New("must not have a #fragment")
	}
	for seg := range strings.SplitSeq(u.Path, "/") {
		if seg == "." || seg == ".." {
			return nil, errors.New("must not have . or .. in its path")
		}
	}
	return u, nil
}

// CallbackAllowed checks a request's callback_url against the client's
// callback_urls: the same scheme and host, and a path under one's path
// (at a / boundary). Its error says why, without echoing the URL.
func (cl Client) CallbackAllowed(raw string) error {
	if cl.CallbackSecret == "" {
		return errors.New("this client has no callback_secret (gateway.clients[].callback_secret): poll GET /v1/approvals/{id}?wait=25s instead")
	}
	u, err := parseCallbackURL(raw)
	if err != nil {
		return err
	}
	for _, allowed := range cl.CallbackURLs {
		p, err := parseCallbackURL(allowed)
		if err != nil || !strings.EqualFold(p.Scheme, u.Scheme) || !strings.EqualFold(p.Host, u.Host) {
			continue
		}
		prefix := strings.TrimSuffix(p.Path, "/")
		if u.Path == prefix || strings.HasPrefix(u.Path, prefix+"/") {
			return nil
		}
	}
	return errors.New("not under any of this client's callback_urls (gateway.clients[].callback_urls)")
}

// Reserved paths gateway.mcp.path may not take: airlock run serves them.
var reservedPaths = []string{"/v1/", "/slack/", "/metrics", "/healthz", "/readyz"}

func (m MCP) validate(k string) error {
	switch {
	case m.Path == "" && m.Hold != 0:
		return keyerr.New(k+".path", "required with hold: where MCP is served, such as /mcp")
	case m.Path == "":
		return nil
	case !strings.HasPrefix(m.Path, "/") || strings.ContainsAny(m.Path, "?# {}") || path.Clean(m.Path) != m.Path || m.Path == "/":
		return keyerr.New(k+".path", "%q: a path such as /mcp", m.Path)
	case m.Hold < 0 || m.Hold > MaxHold:
		return keyerr.New(k+".hold", "%s: between 0 (the default, %s) and %s", m.Hold, DefaultHold, MaxHold)
	}
	for _, r := range reservedPaths {
		if strings.HasPrefix(m.Path+"/", r) || strings.HasPrefix(r, m.Path+"/") {
			return keyerr.New(k+".path", "%q: taken by %s", m.Path, r)
		}
	}
	return nil
}

// Offers reports whether the client's tools globs name Airlock's tool.
func (cl Client) Offers(tool string) bool { return matchAny(cl.Tools, tool) }
