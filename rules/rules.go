// Package rules owns confirmation.rules: CEL expressions over a tool call
// (its tool, its arguments, where, by whom and when it was asked) that make
// the call ask for approval or refuse it. Rules are compiled and type-checked
// when the configuration loads; a rule that cannot be evaluated for a call
// counts as ask, never as a pass and never as a deny.
package rules

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common"
	"github.com/google/cel-go/common/operators"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/common/types/traits"
	"github.com/google/cel-go/ext"
	"github.com/google/cel-go/interpreter"

	"github.com/airlockhq/airlock/confirm"
	"github.com/airlockhq/airlock/keyerr"
	"github.com/airlockhq/airlock/tools"
)

// Actions of a rule.
const (
	ActionAsk  = "ask"  // a person must allow the call
	ActionDeny = "deny" // the call is refused; nobody is asked
)

// MaxApprovals is the most distinct approvals a rule may ask for.
const MaxApprovals = 10

// Limits of one rule's evaluation for one call. Going over either is an
// evaluation error: the call asks (confirm.ReasonRuleError).
const (
	// CostLimit bounds a rule's evaluation in CEL cost units (about one per
	// operation; string and list operations cost by their size).
	CostLimit = 10_000
	// EvalTimeout bounds a rule's evaluation in wall-clock time. It is
	// checked between the iterations of comprehensions (all, exists, map,
	// filter, ...), whose steps CEL may price below their work (deep
	// equality of nested values costs one unit per top-level element).
	EvalTimeout = 50 * time.Millisecond
	// interruptCheckFrequency: comprehension iterations between checks of
	// the evaluation's context (a check is an atomic add).
	interruptCheckFrequency = 1
)

// Config is one confirmation.rules entry as the configuration file holds it.
type Config struct {
	Name           string   `yaml:"name"`
	When           string   `yaml:"when"`
	Action         string   `yaml:"action"`
	Approvals      int      `yaml:"approvals"`
	Approvers      []string `yaml:"approvers"`
	ApproverGroups []string `yaml:"approver_groups"`
	ApproverRoles  []string `yaml:"approver_roles"`
	Grantable      *bool    `yaml:"grantable"`
	Risk           string   `yaml:"risk"` // the tier of the calls it matches (the highest wins)
	Message        string   `yaml:"message"`
}

// Set is the compiled rules, in the configuration's order. A nil *Set holds
// no rule. A Set is safe for concurrent use.
type Set struct {
	rules []*rule
}

type rule struct {
	name      string
	deny      bool
	message   string
	approvals int
	restrict  []confirm.Approvers // nil, or one set
	notGrant  bool
	risk      confirm.Risk
	usesArgs  bool // the expression refers to args
	prg       cel.Program
	partial   cel.Program // prg evaluating with unknowns (MayAsk)
}

var namePattern = regexp.MustCompile(`^[a-z0-9_-]+$`)

// newEnv declares the variables a rule's expression may use.
func newEnv() (*cel.Env, error) {
	return cel.NewEnv(
		cel.Variable("tool", cel.StringType),
		cel.Variable("args", cel.MapType(cel.StringType, cel.DynType)),
		cel.Variable("platform", cel.StringType),
		cel.Variable("channel", cel.StringType),
		cel.Variable("user", cel.StringType),
		cel.Variable("client", cel.StringType),
		cel.Variable("now", cel.TimestampType),
		ext.Strings(),
		cel.CrossTypeNumericComparisons(true),
		cel.DefaultUTCTimeZone(true),
	)
}

// Validate checks one rule's keys; key is its place in the file, e.g.
// "confirmation.rules[2]". Its expression is checked when Compile compiles
// it. The error is a *keyerr.Error naming the bad key.
func (c Config) Validate(key string) error {
	fail := func(field, format string, args ...any) error {
		return keyerr.New(key+"."+field, format, args...)
	}
	switch {
	case c.Name == "":
		return fail("name", "required")
	case !namePattern.MatchString(c.Name):
		return fail("name", "%q: use lower-case letters, digits, _ and - only", c.Name)
	}
	switch c.Action {
	case ActionAsk, ActionDeny:
	case "":
		return fail("action", "required: ask or deny")
	default:
		return fail("action", "%q: must be ask or deny", c.Action)
	}
	if c.Approvals < 0 || c.Approvals > MaxApprovals {
		return fail("approvals", "%d: must be between 0 (the default) and %d", c.Approvals, MaxApprovals)
	}
	if c.Action == ActionDeny {
		switch {
		case c.Approvals != 0:
			return fail("approvals", "only for action ask")
		case len(c.Approvers) > 0:
			return fail("approvers", "only for action ask")
		case len(c.ApproverGroups) > 0:
			return fail("approver_groups", "only for action ask")
		case len(c.ApproverRoles) > 0:
			return fail("approver_roles", "only for action ask")
		case c.Grantable != nil:
			return fail("grantable", "only for action ask")
		case c.Risk != "":
			return fail("risk", "only for action ask")
		}
	} else {
		if c.Message != "" {
			return fail("message", "only for action deny")
		}
		if _, err := confirm.ParseRisk(c.Risk); err != nil {
			return fail("risk", "%v", err)
		}
		for _, l := range []struct {
			field string
			ids   []string
		}{{"approvers", c.Approvers}, {"approver_groups", c.ApproverGroups}, {"approver_roles", c.ApproverRoles}} {
			for j, id := range l.ids {
				if strings.TrimSpace(id) == "" {
					return fail(fmt.Sprintf("%s[%d]", l.field, j), "empty id")
				}
			}
		}
	}
	if strings.TrimSpace(c.When) == "" {
		return fail("when", "required: a CEL expression, e.g. 'tool == \"restart_service\"'")
	}
	return nil
}

// ValidateAll checks every rule (keys "confirmation.rules[N]...") and that
// names are unique.
func ValidateAll(cfgs []Config) error {
	return keyerr.List("confirmation.rules", cfgs, Config.Validate, func(c Config) string { return c.Name }, func(c Config, key string, first int) error {
		return keyerr.New(key+".name", "%q is already the name of confirmation.rules[%d]", c.Name, first)
	})
}

// Compile validates (ValidateAll) and compiles the rules. The first
// problem is returned as a *keyerr.Error naming its key. No rules (nil) is
// a valid, empty Set.
func Compile(cfgs []Config) (*Set, error) {
	if err := ValidateAll(cfgs); err != nil {
		return nil, err
	}
	env, err := newEnv()
	if err != nil {
		return nil, fmt.Errorf("rules: CEL environment: %w", err)
	}
	s := &Set{rules: make([]*rule, 0, len(cfgs))}
	for i, c := range cfgs {
		key := fmt.Sprintf("confirmation.rules[%d].when", i)
		r := &rule{name: c.Name, deny: c.Action == ActionDeny}
		if r.deny {
			r.message = c.Message
			if strings.TrimSpace(r.message) == "" {
				r.message = confirm.DefaultRuleDenyMessage(c.Name)
			}
		} else {
			r.approvals = c.Approvals
			a := confirm.Approvers{Users: clone(c.Approvers), Groups: clone(c.ApproverGroups), Roles: clone(c.ApproverRoles)}
			if !a.Empty() {
				r.restrict = []confirm.Approvers{a}
			}
			r.notGrant = c.Grantable != nil && !*c.Grantable
			r.risk = confirm.Risk(c.Risk)
		}
		ast, iss := env.Compile(c.When)
		if iss != nil && iss.Err() != nil {
			return nil, keyerr.Wrap(key, IssuesError(iss))
		}
		if t := ast.OutputType(); !t.IsExactType(cel.BoolType) {
			return nil, keyerr.New(key, "the expression is of type %s; it must be a bool (compare a value, e.g. args.flag == true)", t)
		}
		for _, ref := range ast.NativeRep().ReferenceMap() {
			if ref.Name == "args" {
				r.usesArgs = true
			}
		}
		r.prg, err = env.Program(ast,
			cel.CostTracking(dynamicCallCost{}),
			cel.CostLimit(CostLimit),
			cel.InterruptCheckFrequency(interruptCheckFrequency),
		)
		if err != nil {
			return nil, keyerr.Wrap(key, err)
		}
		r.partial, err = env.Program(ast,
			cel.EvalOptions(cel.OptPartialEval),
			cel.CostTracking(dynamicCallCost{}),
			cel.CostLimit(CostLimit),
			cel.InterruptCheckFrequency(interruptCheckFrequency),
		)
		if err != nil {
			return nil, keyerr.Wrap(key, err)
		}
		s.rules = append(s.rules, r)
	}
	return s, nil
}

// IssuesError is CEL's issues on one line, each with its line:column
// (runbook expressions report theirs the same way).
func IssuesError(iss *cel.Issues) error {
	var parts []string
	for _, e := range iss.Errors() {
		msg := strings.ReplaceAll(e.Message, "\n", " ")
		if e.Location != nil && e.Location.Line() > 0 {
			msg = fmt.Sprintf("%d:%d: %s", e.Location.Line(), e.Location.Column()+1, msg)
		}
		parts = append(parts, msg)
	}
	if len(parts) == 0 {
		return iss.Err()
	}
	return errors.New(strings.Join(parts, "; "))
}

func clone(s []string) []string {
	if len(s) == 0 {
		return nil
	}
	return append([]string(nil), s...)
}

// Names returns the rules' names in the configuration's order.
func (s *Set) Names() []string {
	if s == nil {
		return nil
	}
	names := make([]string, len(s.rules))
	for i, r := range s.rules {
		names[i] = r.name
	}
	return names
}

// Len is the number of rules.
func (s *Set) Len() int {
	if s == nil {
		return 0
	}
	return len(s.rules)
}

// Evaluate runs every rule on the call and merges the verdicts of those
// that match (confirm.Merge): a deny wins, otherwise the largest approvals,
// approver restrictions intersect. A rule that cannot be evaluated (an
// error, a missing key, a limit reached, or arguments that are not a JSON
// object while the rule refers to args) asks with confirm.ReasonRuleError.
// A nil Set returns the zero Verdict.
func (s *Set) Evaluate(r confirm.Request) confirm.Verdict {
	if s == nil || len(s.rules) == 0 {
		return confirm.Verdict{}
	}
	now := r.Now
	if now.IsZero() {
		now = time.Now()
	}
	vars := map[string]any{
		"tool":     r.Call.Name,
		"platform": r.Platform,
		"channel":  r.Channel,
		"user":     r.Requester,
		"client":   r.Client,
		"now":      now.UTC(),
	}
	args, argsErr := decodeArgs(r.Call.Args)
	if argsErr == nil {
		vars["args"] = types.DefaultTypeAdapter.NativeToValue(args)
	}
	var vs []confirm.Verdict
	for _, ru := range s.rules {
		if ru.usesArgs && argsErr != nil {
			vs = append(vs, ru.errored())
			continue
		}
		match, err := ru.eval(vars)
		switch {
		case err != nil:
			vs = append(vs, ru.errored())
		case match:
			vs = append(vs, ru.matched())
		}
	}
	return confirm.Merge(vs...)
}

// eval runs the rule's program within its limits.
func (ru *rule) eval(vars map[string]any) (match bool, err error) {
	defer func() {
		if p := recover(); p != nil { // never let a rule take the process down
			match, err = false, fmt.Errorf("rule %s: panic: %v", ru.name, p)
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), EvalTimeout)
	defer cancel()
	out, _, err := ru.prg.ContextEval(ctx, vars)
	if err != nil {
		return false, err
	}
	b, ok := out.(types.Bool)
	if !ok {
		return false, fmt.Errorf("rule %s: result is %s, not a bool", ru.name, out.Type())
	}
	return bool(b), nil
}

// dynamicCallCost prices the calls CEL dispatches at run time, on values of
// args (dyn): CEL's own tracker charges 1 for any of them, whatever the
// size of the strings concatenated or compared. It charges them as CEL
// charges the statically typed calls; other calls keep CEL's price.
type dynamicCallCost struct{}

func (dynamicCallCost) CallCost(function, overloadID string, args []ref.Val, _ ref.Val) *uint64 {
	if overloadID != "" || len(args) != 2 {
		return nil
	}
	var cost float64
	switch function {
	case operators.Add:
		if !isText(args[0]) || !isText(args[1]) {
			return nil // lists concatenate in constant time
		}
		cost = float64(size(args[0])+size(args[1])) * common.StringTraversalCostFactor
	case operators.Less, operators.LessEquals, operators.Greater, operators.GreaterEquals,
		operators.Equals, operators.NotEquals:
		cost = float64(min(size(args[0]), size(args[1]))) * common.StringTraversalCostFactor
	case operators.In:
		cost = float64(size(args[1]))
	default:
		return nil
	}
	c := max(uint64(math.Ceil(cost)), 1)
	return &c
}

func isText(v ref.Val) bool {
	switch v.(type) {
	case types.String, types.Bytes:
		return true
	}
	return false
}

// size is a value's size for pricing: its length, or 1.
func size(v ref.Val) int64 {
	if s, ok := v.(traits.Sizer); ok {
		if n, ok := s.Size().(types.Int); ok {
			return int64(n)
		}
	}
	return 1
}

// matched is the verdict of a rule whose expression is true.
func (ru *rule) matched() confirm.Verdict {
	reasons := []confirm.Reason{{Kind: confirm.ReasonRule, Rule: ru.name}}
	if ru.deny {
		return confirm.Verdict{Deny: true, DenyRule: ru.name, DenyMessage: ru.message, Reasons: reasons}
	}
	return confirm.Verdict{
		Ask:          true,
		Approvals:    ru.approvals,
		Restrict:     ru.restrict,
		NotGrantable: ru.notGrant,
		Risk:         ru.risk,
		Reasons:      reasons,
	}
}

// errored is the verdict of a rule that could not be evaluated: an ask. As
// the rule might have matched, an ask rule keeps its approvals, approver
// restriction and grantability (an error never loosens them), and a deny
// rule's call may not be covered by a grant.
func (ru *rule) errored() confirm.Verdict {
	v := confirm.Verdict{
		Ask:     true,
		Reasons: []confirm.Reason{{Kind: confirm.ReasonRuleError, Rule: ru.name}},
	}
	if ru.deny {
		v.NotGrantable = true
	} else {
		v.Approvals, v.Restrict, v.NotGrantable, v.Risk = ru.approvals, ru.restrict, ru.notGrant, ru.risk
	}
	return v
}

// decodeArgs decodes a call's arguments for CEL: a single JSON object of
// valid UTF-8 without duplicate keys (empty arguments are {}). Objects
// become map[string]any, arrays []any, null nil; a number becomes an int
// (int64) when its value is a whole number within int64's range, whatever
// its spelling (12, 12.0, 1.2e1), and a double (float64) otherwise.
func decodeArgs(data []byte) (map[string]any, error) {
	if len(bytes.TrimSpace(data)) == 0 {
		return map[string]any{}, nil
	}
	// Decoded as the tool's own validation decodes them (valid UTF-8, one
	// object, no key twice), so a rule sees the value the tool would.
	obj, err := tools.DecodeObject(data)
	if err != nil {
		return nil, fmt.Errorf("arguments: %w", err)
	}
	return convert(obj).(map[string]any), nil
}

// convert replaces json.Number values with int64 or float64, in place.
// The depth is bounded by encoding/json's nesting limit.
func convert(v any) any {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			x[k] = convert(e)
		}
	case []any:
		for i, e := range x {
			x[i] = convert(e)
		}
	case json.Number:
		return number(string(x))
	}
	return v
}

func number(s string) any {
	if i, err := strconv.ParseInt(s, 10, 64); err == nil {
		return i
	}
	f, _ := strconv.ParseFloat(s, 64) // valid JSON; out of range gives ±Inf
	if f == math.Trunc(f) && f >= math.MinInt64 && f < math.MaxInt64 {
		return int64(f)
	}
	return f
}

// CallCost is the pricing rules give the calls CEL dispatches at run time
// (dynamicCallCost), for other CEL programs (runbooks) held to the same
// limits.
func CallCost() interpreter.ActualCostEstimator { return dynamicCallCost{} }
