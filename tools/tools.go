// Package tools owns the tools Airlock carries: their definitions from
// config, argument validation against a JSON Schema, the read-back summary a
// person approves, and the executors (HTTP and exec) that run them.
package tools

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"sync"
	"time"

	"github.com/airlockhq/airlock/confirm"
	"github.com/airlockhq/airlock/keyerr"
	"github.com/airlockhq/airlock/model"
	"github.com/airlockhq/airlock/redact"
)

// Config is one tool as written in the config file (key `tools[]`).
type Config struct {
	Name        string         `yaml:"name"`
	Description string         `yaml:"description"`
	Parameters  map[string]any `yaml:"parameters"` // JSON Schema
	Confirm     bool           `yaml:"confirm"`
	Approvals   int            `yaml:"approvals"` // distinct approvals a gated call needs; 0: confirmation.approvals
	Risk        string         `yaml:"risk"`      // low | medium | high | critical; "": medium when gated
	Summary     string         `yaml:"summary"`   // text/template over the validated arguments
	HTTP        *HTTPConfig    `yaml:"http"`
	Exec        *ExecConfig    `yaml:"exec"`
	// Preview is the tool's dry run, shown on the card (see PreviewConfig).
	Preview *PreviewConfig `yaml:"preview"`

	// ConfirmPhrase is what an approver types to allow a critical call:
	// a text/template over the validated arguments; "": the tool's name.
	ConfirmPhrase string `yaml:"confirm_phrase"`
}

// HTTPConfig is the `http` executor.
type HTTPConfig struct {
	Method  string            `yaml:"method"`
	URL     string            `yaml:"url"` // text/template over the arguments
	Headers map[string]string `yaml:"headers"`
	// Timeout bounds a whole run, from connecting to the end of the answer's
	// body, whatever the context allows; 0 means DefaultTimeout.
	Timeout time.Duration `yaml:"timeout"`
}

// ExecConfig is the `exec` executor.
type ExecConfig struct {
	Command []string          `yaml:"command"` // argv, each a text/template; no shell
	Timeout time.Duration     `yaml:"timeout"`
	Env     map[string]string `yaml:"env"`
}

// Tool is one tool the bot carries.
type Tool interface {
	Spec() model.ToolSpec
	// Confirm is the tool's own confirm flag.
	Confirm() bool
	// Validate checks arguments against the schema.
	Validate(args json.RawMessage) error
	// Summary renders the read-back from validated arguments only.
	Summary(args json.RawMessage) (string, error)
	// Run executes the tool once. idempotencyKey is "<batch id>/<call key>".
	Run(ctx context.Context, args json.RawMessage, idempotencyKey string) (string, error)
}

// DefaultMaxOutput is the default number of bytes of a tool's output kept as
// its result.
const DefaultMaxOutput = 16 << 10

// DefaultTimeout is the timeout of a run (tools[].http.timeout and
// tools[].exec.timeout) when the config sets none.
const DefaultTimeout = 60 * time.Second

// Options are the settings shared by the configured tools.
type Options struct {
	// HTTPClient runs the http tools. Nil means a client that does not
	// follow redirects (a 3xx is an error), so configured headers never go
	// to another host.
	HTTPClient *http.Client
	// MaxOutput is the number of bytes of a result kept; <= 0 means
	// DefaultMaxOutput.
	MaxOutput int
	// Redactor scrubs secrets from a result (and the output an error
	// quotes) before it is cut at MaxOutput, so no secret is left in part
	// at the cut. Nil scrubs nothing here (the bot still scrubs).
	Redactor *redact.Redactor
}

// ErrInvalidArgs is wrapped by every argument validation error.
var ErrInvalidArgs = errors.New("invalid arguments")

// ErrOutcomeUnknown is wrapped by the error of a run that may have taken
// effect: the request may have reached the server (a timeout or a broken
// connection after it was sent) or the process was killed while running. A
// person must check; such a run is never retried. A failure before anything
// was sent (DNS, connection refused, TLS handshake) or a clear answer (a
// non-2xx status, a nonzero exit) is an ordinary error.
var ErrOutcomeUnknown = errors.New("outcome unknown")

// namePattern is the tool name every provider accepts.
var namePattern = regexp.MustCompile(`^[a-zA-Z_][a-zA-Z0-9_-]{0,63}$`)

// Set is the tools the bot carries, in config order. It is safe for
// concurrent use.
type Set struct {
	mu    sync.RWMutex
	order []Tool
	byKey map[string]Tool
}

// KeepAliveTransport is Go's default transport keeping up to 64 idle
// connections a host. Go's default keeps 2: concurrent runs of one
// service, or requests to one model provider, would each open (and
// handshake) a new connection. The model provider's client uses it too.
func KeepAliveTransport() *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConns, t.MaxIdleConnsPerHost = 256, 64
	return t
}

// ValidateAll checks every tool (keys "tools[N]...") and that names are
// unique; the error is a *keyerr.Error naming the key.
func ValidateAll(cfgs []Config) error {
	return keyerr.List("tools", cfgs, Config.Validate, func(c Config) string { return c.Name }, func(c Config, key string, _ int) error {
		return keyerr.New(key+".name", "duplicate %q", c.Name)
	})
}

// New validates (ValidateAll) and builds the configured tools, compiling
// their schemas and templates. The first error found is returned as a
// *keyerr.Error naming its key.
func New(cfgs []Config, opts Options) (*Set, error) {
	if err := ValidateAll(cfgs); err != nil {
		return nil, err
	}
	if opts.MaxOutput <= 0 {
		opts.MaxOutput = DefaultMaxOutput
	}
	if opts.HTTPClient == nil {
		opts.HTTPClient = &http.Client{
			Transport:     KeepAliveTransport(),
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		}
	}
	s := &Set{byKey: make(map[string]Tool, len(cfgs))}
	for i, cfg := range cfgs {
		key := fmt.Sprintf("tools[%d]", i)
		t, err := newConfigTool(key, cfg, opts)
		if err != nil {
			return nil, err
		}
		s.byKey[t.name] = t
		s.order = append(s.order, t)
	}
	return s, nil
}

// Add adds a tool, e.g. a built-in one. Its name must be valid and not yet
// taken.
func (s *Set) Add(t Tool) error {
	if t == nil {
		return errors.New("add tool: nil")
	}
	name := t.Spec().Name
	if !namePattern.MatchString(name) {
		return fmt.Errorf("add tool: invalid name %q: must match %s", name, namePattern)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, dup := s.byKey[name]; dup {
		return fmt.Errorf("add tool: duplicate %q", name)
	}
	if s.byKey == nil {
		s.byKey = make(map[string]Tool)
	}
	s.byKey[name] = t
	s.order = append(s.order, t)
	return nil
}

// Get returns the tool of that name.
func (s *Set) Get(name string) (Tool, bool) {
	if s == nil {
		return nil, false
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	t, ok := s.byKey[name]
	return t, ok
}

// Has reports whether the set carries a tool of that name.
func (s *Set) Has(name string) bool {
	_, ok := s.Get(name)
	return ok
}

// Definition is a hash of what a tool is: for a config tool its whole
// entry (executor, URL or command, schema, flags), for others (MCP,
// Discord moderation) its spec as the model sees it and its flag. A grant
// records it and covers nothing once it changed.
func Definition(t Tool) string {
	if d, ok := t.(interface{ Definition() string }); ok {
		return d.Definition()
	}
	b, _ := json.Marshal(struct {
		Spec    model.ToolSpec
		Confirm bool
	}{t.Spec(), t.Confirm()})
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// Info is what the confirmation policy may know of the named tool.
func (s *Set) Info(name string) (confirm.ToolInfo, bool) {
	t, ok := s.Get(name)
	if !ok {
		return confirm.ToolInfo{}, false
	}
	info := confirm.ToolInfo{Name: name, Confirm: t.Confirm()}
	if r, ok := t.(interface{ Risk() confirm.Risk }); ok {
		info.Risk = r.Risk()
	}
	return info, true
}

// Specs returns the tools as the model sees them, in config order (tools
// added later follow).
func (s *Set) Specs() []model.ToolSpec {
	if s == nil {
		return nil
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	specs := make([]model.ToolSpec, len(s.order))
	for i, t := range s.order {
		specs[i] = t.Spec()
	}
	return specs
}

// Names returns the tool names in the order of Specs.
func (s *Set) Names() []string {
	if s == nil {
		return nil
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	names := make([]string, len(s.order))
	for i, t := range s.order {
		names[i] = t.Spec().Name
	}
	return names
}
