package runbook

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/airlockhq/airlock/keyerr"
	"github.com/airlockhq/airlock/tools"
)

// Bounds of a runbook definition.
const (
	MaxSteps     = 50 // steps, and on_failure steps, of one runbook
	MaxApprovals = 10 // a step's approvals
	MaxAttempts  = 100
	// DefaultAttempts are a retry's attempts when it gives until only.
	DefaultAttempts = 3
	MinTimeout      = time.Second
	MaxTimeout      = 24 * time.Hour
	MaxDelay        = time.Hour
)

// ToolPrefix starts the name of the model tool that starts a runbook:
// runbook__<name>.
const ToolPrefix = "runbook__"

// ToolName is the model tool of the runbook named name.
func ToolName(name string) string { return ToolPrefix + name }

var (
	namePattern   = regexp.MustCompile(`^[a-z0-9_-]{1,48}$`)
	stepIDPattern = regexp.MustCompile(`^[a-z0-9_]{1,32}$`)
)

// Runbook is a compiled runbook: its definition as configured, its
// parameters' schema and its steps' expressions. It is immutable and safe
// for concurrent use.
type Runbook struct {
	cfg       Config
	schema    *tools.Schema
	props     map[string]map[string]any // top-level properties of the schema
	required  []string
	closed    bool // additionalProperties: false
	steps     []*Step
	onFailure []*Step
}

// Step is one compiled step.
type Step struct {
	cfg     StepConfig
	key     string // its place, e.g. runbooks[0].steps[1]
	failure bool   // an on_failure step
	when    *expr
	until   *expr
	args    map[string]*argNode
	argKeys []string
	refs    []string // the steps it refers to
	ptypes  paramTypes
}

// Name is the runbook's name.
func (r *Runbook) Name() string { return r.cfg.Name }

// Description is the runbook's description.
func (r *Runbook) Description() string { return r.cfg.Description }

// Config is the runbook's definition as configured (a deep copy).
func (r *Runbook) Config() Config {
	var c Config
	raw, _ := json.Marshal(r.cfg)
	_ = decodeJSON(raw, &c)
	return c
}

// Steps are the runbook's steps, in order.
func (r *Runbook) Steps() []*Step { return append([]*Step(nil), r.steps...) }

// OnFailure are the steps run when the run stops on a failed step.
func (r *Runbook) OnFailure() []*Step { return append([]*Step(nil), r.onFailure...) }

// Step is the step (or on_failure step) with that id, or nil.
func (r *Runbook) Step(id string) *Step {
	for _, s := range append(r.Steps(), r.onFailure...) {
		if s.cfg.ID == id {
			return s
		}
	}
	return nil
}

// Parameters is the parameters' JSON Schema, as the model tool
// runbook__<name> offers it.
func (r *Runbook) Parameters() json.RawMessage { return r.schema.JSON() }

// Tools are the tools the runbook's steps call, each once, in order.
func (r *Runbook) Tools() []string {
	var out []string
	for _, s := range append(r.Steps(), r.onFailure...) {
		if !slices.Contains(out, s.cfg.Tool) {
			out = append(out, s.cfg.Tool)
		}
	}
	return out
}

// ID is the step's id.
func (s *Step) ID() string { return s.cfg.ID }

// Tool is the tool the step calls.
func (s *Step) Tool() string { return s.cfg.Tool }

// Key is the step's place in the configuration, e.g. runbooks[0].steps[1].
func (s *Step) Key() string { return s.key }

// Config is the step as configured.
func (s *Step) Config() StepConfig { return s.cfg }

// IsOnFailure reports whether the step is one of the runbook's on_failure
// steps.
func (s *Step) IsOnFailure() bool { return s.failure }

// Confirm reports whether the step needs approval whatever its tool says.
func (s *Step) Confirm() bool { return s.cfg.Confirm }

// Approvals is the least number of distinct approvers the step asks for
// (0: as the policy says).
func (s *Step) Approvals() int { return s.cfg.Approvals }

// Timeout overrides the tool's timeout (0: the tool's).
func (s *Step) Timeout() time.Duration { return s.cfg.Timeout }

// Attempts is how many times the step may run: 1 without retry.
func (s *Step) Attempts() int {
	return s.cfg.Retry.Max()
}

// Delay is the wait between attempts.
func (s *Step) Delay() time.Duration {
	if s.cfg.Retry == nil {
		return 0
	}
	return s.cfg.Retry.Delay
}

// ContinueOnFailure reports whether the run goes on after the step failed.
func (s *Step) ContinueOnFailure() bool { return s.cfg.OnFailure == OnFailureContinue }

// Refers are the ids of the steps the step's expressions refer to.
func (s *Step) Refers() []string { return append([]string(nil), s.refs...) }

// errAt is err at key, as a *keyerr.Error.
func errAt(key string, err error) error {
	var ke *keyerr.Error
	if errors.As(err, &ke) {
		return err
	}
	return keyerr.Wrap(key, err)
}

// Validate checks the runbook's keys; key is its place, e.g.
// "runbooks[0]". What only compiling finds (expressions, the schema, tools)
// Compile reports. The error is a *keyerr.Error naming the bad key.
func (c Config) Validate(key string) error {
	switch {
	case c.Name == "":
		return keyerr.New(key+".name", "required")
	case !namePattern.MatchString(c.Name):
		return keyerr.New(key+".name", "%q: use 1 to 48 lower-case letters, digits, _ and -", c.Name)
	case len(c.Steps) == 0:
		return keyerr.New(key+".steps", "required: at least one step")
	case len(c.Steps) > MaxSteps:
		return keyerr.New(key+".steps", "%d steps; at most %d", len(c.Steps), MaxSteps)
	case len(c.OnFailure) > MaxSteps:
		return keyerr.New(key+".on_failure", "%d steps; at most %d", len(c.OnFailure), MaxSteps)
	}
	seen := map[string]string{}
	for _, l := range []struct {
		field string
		steps []StepConfig
	}{{"steps", c.Steps}, {"on_failure", c.OnFailure}} {
		for i, s := range l.steps {
			k := fmt.Sprintf("%s.%s[%d]", key, l.field, i)
			if err := s.Validate(k); err != nil {
				return err
			}
			if first, dup := seen[s.ID]; dup {
				return keyerr.New(k+".id", "%q is already the id of %s", s.ID, first)
			}
			seen[s.ID] = k
		}
	}
	return nil
}

// Validate checks one step's keys; key is its place, e.g.
// "runbooks[0].steps[1]".
func (s StepConfig) Validate(key string) error {
	switch {
	case s.ID == "":
		return keyerr.New(key+".id", "required")
	case !stepIDPattern.MatchString(s.ID):
		return keyerr.New(key+".id", "%q: use 1 to 32 lower-case letters, digits and _", s.ID)
	case s.Tool == "":
		return keyerr.New(key+".tool", "required")
	case strings.HasPrefix(s.Tool, ToolPrefix):
		return keyerr.New(key+".tool", "%q: a step cannot start a runbook", s.Tool)
	case s.Approvals < 0 || s.Approvals > MaxApprovals:
		return keyerr.New(key+".approvals", "%d: must be between 0 (as the policy says) and %d", s.Approvals, MaxApprovals)
	case s.Timeout != 0 && (s.Timeout < MinTimeout || s.Timeout > MaxTimeout):
		return keyerr.New(key+".timeout", "%s: must be between %s and %s (leave it out for the tool's own)", s.Timeout, MinTimeout, MaxTimeout)
	}
	switch s.OnFailure {
	case "", OnFailureStop, OnFailureContinue:
	default:
		return keyerr.New(key+".on_failure", "%q is not one of stop, continue", s.OnFailure)
	}
	if r := s.Retry; r != nil {
		switch {
		case r.Attempts == 0 && strings.TrimSpace(r.Until) == "":
			return keyerr.New(key+".retry", "needs attempts or until (or both)")
		case r.Attempts != 0 && (r.Attempts < 2 || r.Attempts > MaxAttempts):
			return keyerr.New(key+".retry.attempts", "%d: must be between 2 and %d", r.Attempts, MaxAttempts)
		case r.Delay < 0 || r.Delay > MaxDelay:
			return keyerr.New(key+".retry.delay", "%s: must be between 0 and %s", r.Delay, MaxDelay)
		}
	}
	return nil
}

// ValidateAll checks every runbook at key ("runbooks[N]...") and that
// names are unique.
func ValidateAll(key string, cfgs []Config) error {
	return keyerr.List(key, cfgs, Config.Validate, func(c Config) string { return c.Name }, func(c Config, k string, first int) error {
		return keyerr.New(k+".name", "%q is already the name of %s[%d]", c.Name, key, first)
	})
}

// Compile validates (ValidateAll) and compiles the runbooks at key
// ("runbooks"). has says whether a tool exists; nil checks no tool (see
// CheckTools). The first problem is a *keyerr.Error naming its key, e.g.
// runbooks[0].steps[1].args.service.
func Compile(key string, cfgs []Config, has func(name string) bool) ([]*Runbook, error) {
	if err := ValidateAll(key, cfgs); err != nil {
		return nil, err
	}
	out := make([]*Runbook, 0, len(cfgs))
	for i, c := range cfgs {
		r, err := compile(fmt.Sprintf("%s[%d]", key, i), c)
		if err != nil {
			return nil, err
		}
		if has != nil {
			if err := r.CheckTools(has); err != nil {
				return nil, err
			}
		}
		out = append(out, r)
	}
	return out, nil
}

// compile compiles one runbook that Validate accepted.
func compile(key string, c Config) (*Runbook, error) {
	raw, err := json.Marshal(c.Parameters)
	if err != nil {
		return nil, keyerr.New(key+".parameters", "not a JSON value: %w", err)
	}
	if c.Parameters == nil {
		raw = nil
	}
	schema, err := tools.CompileSchema(raw)
	if err != nil {
		return nil, keyerr.New(key+".parameters", "invalid JSON Schema: %w", err)
	}
	r := &Runbook{cfg: c, schema: schema, props: map[string]map[string]any{}}
	if props, ok := c.Parameters["properties"].(map[string]any); ok {
		for name, p := range props {
			pm, _ := p.(map[string]any)
			r.props[name] = pm
		}
	}
	if req, ok := c.Parameters["required"].([]any); ok {
		for _, n := range req {
			if s, ok := n.(string); ok {
				r.required = append(r.required, s)
			}
		}
	}
	r.closed = c.Parameters["additionalProperties"] == false
	var declared map[string]bool
	if r.closed {
		declared = map[string]bool{}
		for n := range r.props {
			declared[n] = true
		}
	}
	for name, p := range r.props {
		if d, ok := p["default"]; ok {
			if err := r.checkValue(name, normalize(d)); err != nil {
				return nil, keyerr.New(fmt.Sprintf("%s.parameters.properties.%s.default", key, name), "%v", err)
			}
		}
	}
	ptypes := paramTypesOf(r.props)
	env, err := newEnv(ptypes)
	if err != nil {
		return nil, fmt.Errorf("runbook: CEL environment: %w", err)
	}
	all := map[string]bool{}
	for _, s := range append(append([]StepConfig(nil), c.Steps...), c.OnFailure...) {
		all[s.ID] = true
	}
	before := map[string]bool{}
	for _, l := range []struct {
		field   string
		steps   []StepConfig
		failure bool
	}{{"steps", c.Steps, false}, {"on_failure", c.OnFailure, true}} {
		for i, sc := range l.steps {
			k := fmt.Sprintf("%s.%s[%d]", key, l.field, i)
			s, err := compileStep(k, sc, &scope{env: env, step: sc.ID, before: before, all: all, params: declared})
			if err != nil {
				return nil, err
			}
			s.failure, s.ptypes = l.failure, ptypes
			if l.failure {
				r.onFailure = append(r.onFailure, s)
			} else {
				r.steps = append(r.steps, s)
			}
			before[sc.ID] = true
		}
	}
	return r, nil
}

// compileStep compiles one step at key.
func compileStep(key string, c StepConfig, sc *scope) (*Step, error) {
	s := &Step{cfg: c, key: key, args: map[string]*argNode{}}
	var refs []string
	if strings.TrimSpace(c.When) != "" {
		e, err := compileExpr(sc, c.When, true)
		if err != nil {
			return nil, keyerr.Wrap(key+".when", err)
		}
		s.when, refs = e, append(refs, e.steps...)
	}
	for k, v := range c.Args {
		n, err := compileArg(sc, key+".args."+k, v, &refs)
		if err != nil {
			return nil, err
		}
		s.args[k] = n
		s.argKeys = append(s.argKeys, k)
	}
	sort.Strings(s.argKeys)
	if c.Retry != nil && strings.TrimSpace(c.Retry.Until) != "" {
		self := *sc
		self.self = true
		e, err := compileExpr(&self, c.Retry.Until, true)
		if err != nil {
			return nil, keyerr.Wrap(key+".retry.until", err)
		}
		s.until = e
		for _, id := range e.steps {
			if id != c.ID {
				refs = append(refs, id)
			}
		}
	}
	for _, id := range refs {
		if !slices.Contains(s.refs, id) {
			s.refs = append(s.refs, id)
		}
	}
	return s, nil
}

// MissingToolError is a step whose tool does not exist.
type MissingToolError struct {
	Runbook string
	Step    string
	Tool    string
	Key     string // the step's tool key, e.g. runbooks[0].steps[1].tool
}

func (e *MissingToolError) Error() string {
	return fmt.Sprintf("runbook %s, step %s: no tool named %q", e.Runbook, e.Step, e.Tool)
}

// CheckTools checks that every step's tool exists (has): the first missing
// one is a *keyerr.Error at the step's tool key wrapping a
// *MissingToolError naming the runbook, the step and the tool. A run of a
// runbook that fails it must not start.
func (r *Runbook) CheckTools(has func(name string) bool) error {
	for _, s := range append(r.Steps(), r.onFailure...) {
		if !has(s.cfg.Tool) {
			return keyerr.Wrap(s.key+".tool", &MissingToolError{Runbook: r.cfg.Name, Step: s.cfg.ID, Tool: s.cfg.Tool, Key: s.key + ".tool"})
		}
	}
	return nil
}

// CheckTools checks every runbook's tools (Runbook.CheckTools), as
// cmd/airlock does once the MCP servers listed theirs; the error joins
// one *MissingToolError per runbook that lacks a tool.
func CheckTools(rbs []*Runbook, has func(name string) bool) error {
	var errs []error
	for _, r := range rbs {
		if err := r.CheckTools(has); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Snapshot is the runbook's definition as a run stores it.
func (r *Runbook) Snapshot() Snapshot {
	raw, err := json.Marshal(r.cfg)
	if err != nil { // Compile marshalled every part of it
		panic(fmt.Sprintf("runbook %s: snapshot: %v", r.cfg.Name, err))
	}
	return raw
}

// FromSnapshot recompiles a stored definition (Snapshot). Its tools are
// not checked: a run checks each step's tool as it calls it.
func FromSnapshot(s Snapshot) (*Runbook, error) {
	var c Config
	if err := decodeJSON(s, &c); err != nil {
		return nil, fmt.Errorf("runbook snapshot: %w", err)
	}
	if err := c.Validate("snapshot"); err != nil {
		return nil, fmt.Errorf("runbook snapshot: %w", err)
	}
	r, err := compile("snapshot", c)
	if err != nil {
		return nil, fmt.Errorf("runbook snapshot: %w", err)
	}
	return r, nil
}

// decodeJSON decodes one JSON value strictly, numbers as json.Number.
func decodeJSON(raw []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return errors.New("more than one JSON value")
	}
	return nil
}
