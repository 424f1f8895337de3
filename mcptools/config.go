// Package mcptools carries the tools of MCP (Model Context Protocol) servers:
// each server, reached over stdio (a command) or streamable HTTP (a URL),
// lends its tools to the bot's tools.Set as "<server>__<tool>". They are
// validated against the server's input schema, summarised for the approval
// card, gated by the server's confirm flag, and run once with the call's
// idempotency key in the request's _meta. A server's questions during a
// call (elicitation, form mode) go to an Asker with the call they belong to
// (elicit.go).
package mcptools

import (
	"errors"
	"fmt"
	"maps"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"text/template"
	"time"

	"github.com/airlockhq/airlock/keyerr"
	"github.com/airlockhq/airlock/tools"
)

// Config is one MCP server as written in the config file (key
// `mcp_servers[]`).
type Config struct {
	// Name is the server's name, [a-z0-9_]+ starting with a letter or "_";
	// its tools reach the model as <name>__<tool>.
	Name string `yaml:"name"`
	// Command is the argv of a stdio server; no shell.
	Command []string `yaml:"command"`
	// URL is the endpoint of a streamable HTTP server.
	URL string `yaml:"url"`
	// Headers go with every HTTP request (URL only).
	Headers map[string]string `yaml:"headers"`
	// Env is the stdio server's environment besides PATH and HOME (Command
	// only): nothing else of Airlock's environment reaches it.
	Env map[string]string `yaml:"env"`
	// Tools are the server's tools to carry; empty means all.
	Tools []string `yaml:"tools"`
	// Confirm is whether the server's tools need a person's yes; nil means
	// true.
	Confirm *bool `yaml:"confirm"`
	// TrustAnnotations lets a tool annotated readOnlyHint: true run
	// without approval. Otherwise annotations are shown, never trusted.
	TrustAnnotations bool `yaml:"trust_annotations"`
	// Elicitation is whether the server may ask a person questions during
	// a call (MCP elicitation, form mode); nil means true. false declares
	// no such capability: a server that asks gets an error.
	Elicitation *bool `yaml:"elicitation"`
	// Timeout bounds one call; 0 means DefaultTimeout.
	Timeout time.Duration `yaml:"timeout"`
	// Summaries are read-backs by tool name (the server's, without the
	// prefix): text/templates over the arguments, as tools[].summary.
	Summaries map[string]string `yaml:"summaries"`
	// Previews name, by tool (the server's names, without the prefix), the
	// server's tool whose result previews a call of it on the card, called
	// with the same arguments: {apply: plan} previews apply with plan.
	Previews map[string]string `yaml:"previews"`
}

// DefaultTimeout bounds a call when the config sets no timeout.
const DefaultTimeout = 60 * time.Second

// Separator joins a server's name and its tool's name.
const Separator = "__"

var (
	serverNamePattern = regexp.MustCompile(`^[a-z0-9_]+$`)
	// joinedNamePattern is what every provider accepts as a tool name.
	joinedNamePattern = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)
)

// ToolName is the name the model sees for the server's tool.
func (c Config) ToolName(tool string) string { return c.Name + Separator + tool }

// confirm is the server's confirm flag, true when unset.
func (c Config) confirm() bool { return c.Confirm == nil || *c.Confirm }

// asks reports whether the server may ask questions (Elicitation).
func (c Config) asks() bool { return c.Elicitation == nil || *c.Elicitation }

// timeout is the per-call timeout.
func (c Config) timeout() time.Duration {
	if c.Timeout <= 0 {
		return DefaultTimeout
	}
	return c.Timeout
}

// Validate checks the server's config. key is its place in the file, e.g.
// "mcp_servers[0]"; an error is a *keyerr.Error naming the bad key. The
// summaries' templates are checked by ParseSummaries.
func (c Config) Validate(key string) error {
	cerr := func(sub string, err error) error { return keyerr.Wrap(key+sub, err) }
	switch {
	case c.Name == "":
		return cerr(".name", errors.New("required"))
	case !serverNamePattern.MatchString(c.Name):
		return cerr(".name", fmt.Errorf("invalid %q: must match %s", c.Name, serverNamePattern))
	case c.Name[0] >= '0' && c.Name[0] <= '9':
		return cerr(".name", fmt.Errorf("invalid %q: must start with a letter or _ (tool names can't start with a digit)", c.Name))
	case len(c.Name)+len(Separator)+1 > 64:
		return cerr(".name", fmt.Errorf("too long: %q%s<tool> must fit 64 characters", c.Name, Separator))
	}

	hasCmd, hasURL := len(c.Command) > 0, c.URL != ""
	switch {
	case !hasCmd && !hasURL:
		return cerr("", errors.New("one of command or url is required"))
	case hasCmd && hasURL:
		return cerr(".url", errors.New("not allowed with command: use one of command or url"))
	}
	if hasCmd {
		if c.Command[0] == "" {
			return cerr(".command[0]", errors.New("empty program"))
		}
		for i, a := range c.Command {
			if strings.ContainsRune(a, 0) {
				return cerr(fmt.Sprintf(".command[%d]", i), errors.New("NUL character"))
			}
		}
		if len(c.Headers) > 0 {
			return cerr(".headers", errors.New("only with url"))
		}
		for _, name := range slices.Sorted(maps.Keys(c.Env)) {
			v := c.Env[name]
			if name == "" || strings.ContainsAny(name, "=\x00") {
				return cerr(".env", fmt.Errorf("invalid name %q", name))
			}
			if strings.ContainsRune(v, 0) {
				return cerr(".env."+name, errors.New("NUL character"))
			}
		}
	}
	if hasURL {
		u, err := url.Parse(c.URL)
		if err != nil {
			return cerr(".url", errors.New("not a valid URL"))
		}
		if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return cerr(".url", errors.New("must be an http:// or https:// URL with a host"))
		}
		if len(c.Env) > 0 {
			return cerr(".env", errors.New("only with command"))
		}
		if err := tools.ValidateHeaders(key+".headers", c.Headers); err != nil {
			return err
		}
	}

	listed := make(map[string]bool, len(c.Tools))
	for i, t := range c.Tools {
		k := fmt.Sprintf(".tools[%d]", i)
		if err := c.checkToolName(t); err != nil {
			return cerr(k, err)
		}
		if listed[t] {
			return cerr(k, fmt.Errorf("duplicate %q", t))
		}
		listed[t] = true
	}
	if c.Timeout < 0 {
		return cerr(".timeout", errors.New("must not be negative"))
	}
	for _, t := range slices.Sorted(maps.Keys(c.Previews)) {
		k, by := ".previews."+t, c.Previews[t]
		switch err := c.checkToolName(t); {
		case err != nil:
			return cerr(k, err)
		case len(c.Tools) > 0 && !listed[t]:
			return cerr(k, fmt.Errorf("%q is not in tools", t))
		}
		switch err := c.checkToolName(by); {
		case err != nil:
			return cerr(k, fmt.Errorf("the preview tool: %w", err))
		case by == t:
			return cerr(k, fmt.Errorf("%q can't preview itself", t))
		}
	}
	for _, t := range slices.Sorted(maps.Keys(c.Summaries)) {
		k := ".summaries." + t
		if err := c.checkToolName(t); err != nil {
			return cerr(k, err)
		}
		if len(c.Tools) > 0 && !listed[t] {
			return cerr(k, fmt.Errorf("%q is not in tools", t))
		}
	}
	return nil
}

// ParseSummaries compiles the server's summaries (key as for Validate),
// by the server's tool name.
func (c Config) ParseSummaries(key string) (map[string]*template.Template, error) {
	out := make(map[string]*template.Template, len(c.Summaries))
	for _, t := range slices.Sorted(maps.Keys(c.Summaries)) {
		tmpl, err := tools.ParseSummary(c.Summaries[t])
		if err != nil {
			return nil, keyerr.Wrap(key+".summaries."+t, err)
		}
		out[t] = tmpl
	}
	return out, nil
}

// checkToolName checks that the server's tool name, joined, is a valid tool
// name.
func (c Config) checkToolName(tool string) error {
	if tool == "" {
		return errors.New("empty tool name")
	}
	if full := c.ToolName(tool); !joinedNamePattern.MatchString(full) || !tools.ValidName(full) {
		return fmt.Errorf("%q: joined name %q must match %s", tool, full, joinedNamePattern)
	}
	return nil
}

// ValidateAll validates every server (keys "mcp_servers[N]...") and that
// names are unique.
func ValidateAll(cfgs []Config) error {
	if err := keyerr.List("mcp_servers", cfgs, Config.Validate, func(c Config) string { return c.Name }, func(c Config, key string, _ int) error {
		return keyerr.New(key+".name", "duplicate %q", c.Name)
	}); err != nil {
		return err
	}
	for i, c := range cfgs {
		for j, o := range cfgs[:i] {
			if short, long := namesOverlap(o.Name, c.Name); short != "" {
				joined := long + Separator + "x"
				return keyerr.New(fmt.Sprintf("mcp_servers[%d].name", i),
					"%q and mcp_servers[%d].name %q can give two tools one name (server %q's tool %q and server %q's tool %q are both %q): rename one",
					c.Name, j, o.Name, short, joined[len(short)+len(Separator):], long, "x", joined)
			}
		}
	}
	return nil
}

// namesOverlap reports, as (shorter, longer), two server names whose joined
// tool names can be equal: <a>__<t> = <b>__<u> needs b to be a followed by
// "__" (t = <rest>__<u>) or by "_" alone (t = _<u>). Other names sharing a
// prefix (aws, aws_s3) never give one name to two tools.
func namesOverlap(x, y string) (shorter, longer string) {
	if len(x) > len(y) {
		x, y = y, x
	}
	if y == x+"_" || strings.HasPrefix(y, x+Separator) {
		return x, y
	}
	return "", ""
}
