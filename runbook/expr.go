package runbook

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/ast"
	"github.com/google/cel-go/common/operators"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/common/types/traits"
	"github.com/google/cel-go/ext"

	"github.com/airlockhq/airlock/rules"
)

// Limits of one expression's evaluation, as confirmation.rules have them
// (rules.CostLimit, rules.EvalTimeout). Going over either is an
// evaluation error of the step.
const (
	CostLimit   = rules.CostLimit
	EvalTimeout = rules.EvalTimeout
	// MaxArgsBytes bounds a step's resolved arguments as JSON.
	MaxArgsBytes = 256 << 10
)

// Template delimiters of argument values. They differ from ${ENV}, which
// config expands before decoding, and argument values are never Go
// templates (tools[].summary and url are other fields).
const (
	openDelim  = "{{"
	closeDelim = "}}"
)

// Fields of the variables steps.<id> and run.
var (
	stepFields = []string{"outcome", "result"}
	runFields  = []string{"id", "name", "requester", "platform", "channel", "failed_step"}
)

// newEnv declares the variables of a runbook's expressions.
func newEnv() (*cel.Env, error) {
	return cel.NewEnv(
		cel.Variable("params", cel.MapType(cel.StringType, cel.DynType)),
		cel.Variable("steps", cel.MapType(cel.StringType, cel.MapType(cel.StringType, cel.DynType))),
		cel.Variable("run", cel.MapType(cel.StringType, cel.StringType)),
		cel.Variable("now", cel.TimestampType),
		ext.Strings(),
		cel.CrossTypeNumericComparisons(true),
		cel.DefaultUTCTimeZone(true),
	)
}

// expr is one compiled expression.
type expr struct {
	src   string
	prg   cel.Program
	steps []string // the steps it refers to (steps.<id>)
}

// scope is what an expression at some place of a runbook may refer to.
type scope struct {
	env    *cel.Env
	step   string          // the step the expression belongs to
	self   bool            // it may refer to its own step (retry.until)
	before map[string]bool // the steps before it
	all    map[string]bool // every step of the runbook
	params map[string]bool // declared parameters; nil: any
}

// compileExpr compiles and type-checks src; wantBool: it must be a bool.
func compileExpr(sc *scope, src string, wantBool bool) (*expr, error) {
	a, iss := sc.env.Compile(src)
	if iss != nil && iss.Err() != nil {
		return nil, rules.IssuesError(iss)
	}
	if t := a.OutputType(); wantBool && !t.IsExactType(cel.BoolType) && !t.IsExactType(cel.DynType) {
		return nil, fmt.Errorf("the expression is of type %s; it must be a bool (compare a value, e.g. steps.before.outcome == \"succeeded\")", t)
	}
	native := a.NativeRep()
	refs, err := sc.check(native)
	if err != nil {
		return nil, err
	}
	prg, err := sc.env.Program(a,
		cel.CostTracking(rules.CallCost()),
		cel.CostLimit(CostLimit),
		cel.InterruptCheckFrequency(1),
	)
	if err != nil {
		return nil, err
	}
	return &expr{src: src, prg: prg, steps: refs}, nil
}

// check inspects the expression's syntax tree: steps are referred to by
// constant ids (steps.<id> or steps["id"]), each an earlier step (or the
// step itself where allowed), with fields outcome and result; run's fields
// are known ones; params' are declared ones when the schema says which.
func (sc *scope) check(a *ast.AST) ([]string, error) {
	info := a.SourceInfo()
	at := func(id int64, format string, args ...any) error {
		msg := fmt.Sprintf(format, args...)
		if loc := info.GetStartLocation(id); loc.Line() > 0 {
			msg = fmt.Sprintf("%d:%d: %s", loc.Line(), loc.Column()+1, msg)
		}
		return errors.New(msg)
	}
	// sel is the constant field an expression selects of its operand:
	// x.f, has(x.f), x["f"].
	sel := func(e ast.Expr) (operand ast.Expr, field string, ok bool) {
		switch e.Kind() {
		case ast.SelectKind:
			s := e.AsSelect()
			return s.Operand(), s.FieldName(), true
		case ast.CallKind:
			c := e.AsCall()
			if c.FunctionName() == operators.Index && len(c.Args()) == 2 && c.Args()[1].Kind() == ast.LiteralKind {
				if s, isStr := c.Args()[1].AsLiteral().(types.String); isStr {
					return c.Args()[0], string(s), true
				}
			}
		}
		return nil, "", false
	}
	isIdent := func(e ast.Expr, name string) bool {
		return e.Kind() == ast.IdentKind && e.AsIdent() == name
	}
	var all []ast.Expr
	ast.PreOrderVisit(a.Expr(), ast.NewExprVisitor(func(e ast.Expr) { all = append(all, e) }))
	covered := map[int64]bool{} // idents steps/run/params read through a constant field
	stepSel := map[int64]string{}
	var refs []string
	for _, e := range all {
		op, field, ok := sel(e)
		if !ok {
			continue
		}
		switch {
		case isIdent(op, "steps"):
			covered[op.ID()] = true
			stepSel[e.ID()] = field
			switch {
			case field == sc.step && sc.self:
			case field == sc.step:
				return nil, at(e.ID(), "steps.%s is this step itself: refer to earlier steps only", field)
			case sc.before[field]:
			case sc.all[field]:
				return nil, at(e.ID(), "steps.%s is a later step: refer to earlier steps only", field)
			default:
				return nil, at(e.ID(), "no step %q in this runbook", field)
			}
			if !slices.Contains(refs, field) {
				refs = append(refs, field)
			}
		case isIdent(op, "run"):
			covered[op.ID()] = true
			if !slices.Contains(runFields, field) {
				return nil, at(e.ID(), "run has no field %q (it has %s)", field, strings.Join(runFields, ", "))
			}
		case isIdent(op, "params"):
			covered[op.ID()] = true
			if sc.params != nil && !sc.params[field] {
				return nil, at(e.ID(), "no parameter %q (the parameters are %s)", field, strings.Join(sortedKeys(sc.params), ", "))
			}
		}
	}
	for _, e := range all {
		if op, field, ok := sel(e); ok {
			if id, isStep := stepSel[op.ID()]; isStep && !slices.Contains(stepFields, field) {
				return nil, at(e.ID(), "steps.%s has no field %q (it has outcome, result)", id, field)
			}
		}
		if isIdent(e, "steps") && !covered[e.ID()] {
			return nil, at(e.ID(), `refer to a step by its id: steps.<id> or steps["<id>"]`)
		}
	}
	return refs, nil
}

// activation is the variables of an evaluation.
func activation(v Vars) map[string]any {
	steps := make(map[string]any, len(v.Steps))
	for id, s := range v.Steps {
		steps[id] = map[string]any{"outcome": string(s.Outcome), "result": normalize(s.Result)}
	}
	params := make(map[string]any, len(v.Params))
	for k, p := range v.Params {
		params[k] = normalize(p)
	}
	now := v.Now
	if now.IsZero() {
		now = time.Now()
	}
	return map[string]any{
		"params": params,
		"steps":  steps,
		"run": map[string]string{
			"id": v.Run.ID, "name": v.Run.Name, "requester": v.Run.Requester,
			"platform": v.Run.Platform, "channel": v.Run.Channel, "failed_step": v.Run.FailedStep,
		},
		"now": now.UTC(),
	}
}

// eval runs the expression within its limits.
func (e *expr) eval(vars map[string]any) (out ref.Val, err error) {
	defer func() {
		if p := recover(); p != nil { // never let an expression take the process down
			out, err = nil, fmt.Errorf("panic: %v", p)
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), EvalTimeout)
	defer cancel()
	out, _, err = e.prg.ContextEval(ctx, vars)
	if err != nil {
		return nil, err
	}
	return out, nil
}

// evalBool evaluates a condition.
func (e *expr) evalBool(vars map[string]any) (bool, error) {
	out, err := e.eval(vars)
	if err != nil {
		return false, err
	}
	b, ok := out.(types.Bool)
	if !ok {
		return false, fmt.Errorf("the result is %s, not a bool", out.Type())
	}
	return bool(b), nil
}

// EvalError is an expression of a step that could not be evaluated: Step
// is the step's id, Key the expression's place in the step ("when",
// "retry.until", "args.service").
type EvalError struct {
	Step string
	Key  string
	Err  error
}

func (e *EvalError) Error() string {
	return fmt.Sprintf("step %s: %s: %v", e.Step, e.Key, e.Err)
}
func (e *EvalError) Unwrap() error { return e.Err }

// When reports whether the step runs: its `when` holds (true when it has
// none).
func (s *Step) When(v Vars) (bool, error) { return s.holds(s.when, "when", v) }

// Done reports whether the step's retry.until holds, v.Steps holding the
// step's latest attempt (true when it has none: a retry without until ends
// at the first success).
func (s *Step) Done(v Vars) (bool, error) { return s.holds(s.until, "retry.until", v) }

// holds evaluates the step's condition at key (true when it has none).
func (s *Step) holds(cond *expr, key string, v Vars) (bool, error) {
	if cond == nil {
		return true, nil
	}
	ok, err := cond.evalBool(activation(v))
	if err != nil {
		return false, &EvalError{Step: s.cfg.ID, Key: key, Err: err}
	}
	return ok, nil
}

// Args resolves the step's argument templates into the tool's arguments, a
// JSON object. Values are computed once from the variables and are data:
// a result holding "{{ ... }}" is never evaluated.
func (s *Step) Args(v Vars) (json.RawMessage, error) {
	vars := activation(v)
	obj := make(map[string]any, len(s.args))
	for _, k := range s.argKeys {
		val, err := s.args[k].resolve(vars, "args."+k)
		if err != nil {
			var ee *EvalError
			if errors.As(err, &ee) {
				ee.Step = s.cfg.ID
				return nil, ee
			}
			return nil, &EvalError{Step: s.cfg.ID, Key: "args." + k, Err: err}
		}
		obj[k] = val
	}
	raw, err := json.Marshal(obj)
	if err != nil {
		return nil, &EvalError{Step: s.cfg.ID, Key: "args", Err: err}
	}
	if len(raw) > MaxArgsBytes {
		return nil, &EvalError{Step: s.cfg.ID, Key: "args", Err: fmt.Errorf("the arguments are %d bytes, more than %d", len(raw), MaxArgsBytes)}
	}
	return raw, nil
}

// argNode is one compiled argument value.
type argNode struct {
	lit   any      // a value as it is (no template)
	exact *expr    // the string is exactly {{ EXPR }}: its typed value
	parts []part   // a string with {{ EXPR }} inside: interpolated
	keys  []string // a map's keys, sorted
	refs  []string // interpolated: the secret references its text holds (SecretRefs)
	m     map[string]*argNode
	list  []*argNode
	kind  int
}

const (
	litNode = iota
	exactNode
	interpNode
	mapNode
	listNode
)

type part struct {
	text string
	e    *expr
}

// compileArg compiles a configured argument value at key.
func compileArg(sc *scope, key string, v any, refs *[]string) (*argNode, error) {
	switch x := v.(type) {
	case string:
		parts, err := splitTemplate(x)
		if err != nil {
			return nil, errAt(key, err)
		}
		if len(parts) == 1 && parts[0].text == "" && parts[0].src != "" && !parts[0].hasText {
			e, err := compileExpr(sc, parts[0].src, false)
			if err != nil {
				return nil, errAt(key, err)
			}
			*refs = append(*refs, e.steps...)
			return &argNode{kind: exactNode, exact: e}, nil
		}
		n := &argNode{kind: interpNode}
		hasExpr := false
		for _, p := range parts {
			if p.text != "" {
				n.parts = append(n.parts, part{text: p.text})
			}
			if p.src != "" {
				e, err := compileExpr(sc, p.src, false)
				if err != nil {
					return nil, errAt(key, err)
				}
				*refs = append(*refs, e.steps...)
				n.parts = append(n.parts, part{e: e})
				hasExpr = true
			}
		}
		if !hasExpr {
			return &argNode{kind: litNode, lit: x}, nil
		}
		n.refs = SecretRefs(x)
		return n, nil
	case map[string]any:
		n := &argNode{kind: mapNode, m: make(map[string]*argNode, len(x))}
		for k, e := range x {
			c, err := compileArg(sc, key+"."+k, e, refs)
			if err != nil {
				return nil, err
			}
			n.m[k] = c
			n.keys = append(n.keys, k)
		}
		sort.Strings(n.keys)
		return n, nil
	case map[any]any:
		return nil, errAt(key, errors.New("a mapping's keys must be strings"))
	case []any:
		n := &argNode{kind: listNode}
		for i, e := range x {
			c, err := compileArg(sc, fmt.Sprintf("%s[%d]", key, i), e, refs)
			if err != nil {
				return nil, err
			}
			n.list = append(n.list, c)
		}
		return n, nil
	default:
		if _, err := json.Marshal(x); err != nil {
			return nil, errAt(key, fmt.Errorf("not a JSON value: %w", err))
		}
		return &argNode{kind: litNode, lit: x}, nil
	}
}

// resolve computes the value at key.
func (n *argNode) resolve(vars map[string]any, key string) (any, error) {
	switch n.kind {
	case exactNode:
		out, err := n.exact.eval(vars)
		if err != nil {
			return nil, &EvalError{Key: key, Err: fmt.Errorf("%s: %w", n.exact.src, err)}
		}
		v, err := native(out, 0)
		if err != nil {
			return nil, &EvalError{Key: key, Err: fmt.Errorf("%s: %w", n.exact.src, err)}
		}
		return v, nil
	case interpNode:
		var b strings.Builder
		for _, p := range n.parts {
			if p.e == nil {
				b.WriteString(p.text)
				continue
			}
			out, err := p.e.eval(vars)
			if err != nil {
				return nil, &EvalError{Key: key, Err: fmt.Errorf("%s: %w", p.e.src, err)}
			}
			s, err := stringForm(out)
			if err != nil {
				return nil, &EvalError{Key: key, Err: fmt.Errorf("%s: %w", p.e.src, err)}
			}
			b.WriteString(s)
			if b.Len() > MaxArgsBytes {
				return nil, &EvalError{Key: key, Err: fmt.Errorf("longer than %d bytes", MaxArgsBytes)}
			}
		}
		if err := n.noAddedRefs(b.String()); err != nil {
			return nil, &EvalError{Key: key, Err: err}
		}
		return b.String(), nil
	case mapNode:
		m := make(map[string]any, len(n.m))
		for _, k := range n.keys {
			v, err := n.m[k].resolve(vars, key+"."+k)
			if err != nil {
				return nil, err
			}
			m[k] = v
		}
		return m, nil
	case listNode:
		l := make([]any, len(n.list))
		for i, c := range n.list {
			v, err := c.resolve(vars, fmt.Sprintf("%s[%d]", key, i))
			if err != nil {
				return nil, err
			}
			l[i] = v
		}
		return l, nil
	}
	return n.lit, nil
}

// noAddedRefs refuses an interpolated value holding a secret reference
// of its text more often than its text does: a parameter or a result
// would have the secret put where it was not configured (ExpandSecrets
// expands every occurrence at the value's path).
func (n *argNode) noAddedRefs(out string) error {
	for _, r := range n.refs {
		want := 0
		for _, p := range n.parts {
			want += strings.Count(p.text, r)
		}
		if strings.Count(out, r) != want {
			return fmt.Errorf("a value put into it holds %s, the reference of a secret: refused", r)
		}
	}
	return nil
}

// tpart is a piece of a template: literal text, then an expression.
type tpart struct {
	text    string
	src     string
	hasText bool
}

// splitTemplate splits s into literal text and {{ EXPR }} expressions. An
// expression ends at the first "}}" (write a literal "{{" as {{ "{{" }}).
// An unclosed "{{" or an empty expression is an error.
func splitTemplate(s string) ([]tpart, error) {
	var parts []tpart
	rest := s
	hasText := false
	for {
		i := strings.Index(rest, openDelim)
		if i < 0 {
			if rest != "" {
				parts = append(parts, tpart{text: rest})
				hasText = true
			}
			break
		}
		j := strings.Index(rest[i+len(openDelim):], closeDelim)
		if j < 0 {
			return nil, fmt.Errorf("%q is not closed by %q", openDelim, closeDelim)
		}
		src := strings.TrimSpace(rest[i+len(openDelim) : i+len(openDelim)+j])
		if src == "" {
			return nil, fmt.Errorf("empty expression %s %s", openDelim, closeDelim)
		}
		if i > 0 {
			hasText = true
		}
		parts = append(parts, tpart{text: rest[:i], src: src})
		rest = rest[i+len(openDelim)+j+len(closeDelim):]
	}
	if hasText {
		for i := range parts {
			parts[i].hasText = true
		}
	}
	return parts, nil
}

// maxDepth bounds the nesting of an expression's value.
const maxDepth = 64

// native is a CEL value as a JSON-able Go value: null, bool, int64,
// uint64, float64, string, []any, map[string]any; timestamps as RFC 3339
// text, durations as Go durations ("1m30s").
func native(v ref.Val, depth int) (any, error) {
	if depth > maxDepth {
		return nil, fmt.Errorf("the value is nested deeper than %d", maxDepth)
	}
	switch x := v.(type) {
	case types.Null:
		return nil, nil
	case types.Bool:
		return bool(x), nil
	case types.Int:
		return int64(x), nil
	case types.Uint:
		return uint64(x), nil
	case types.Double:
		f := float64(x)
		if math.IsNaN(f) || math.IsInf(f, 0) {
			return nil, fmt.Errorf("%v is not a JSON number", f)
		}
		return f, nil
	case types.String:
		return string(x), nil
	case types.Timestamp:
		return x.Time.UTC().Format(time.RFC3339Nano), nil
	case types.Duration:
		return x.Duration.String(), nil
	}
	if l, ok := v.(traits.Lister); ok {
		size, _ := l.Size().(types.Int)
		out := make([]any, 0, int(size))
		it := l.Iterator()
		for it.HasNext() == types.True {
			e, err := native(it.Next(), depth+1)
			if err != nil {
				return nil, err
			}
			out = append(out, e)
		}
		return out, nil
	}
	if m, ok := v.(traits.Mapper); ok {
		out := map[string]any{}
		it := m.Iterator()
		for it.HasNext() == types.True {
			k := it.Next()
			ks, isStr := k.(types.String)
			if !isStr {
				return nil, fmt.Errorf("a map key of type %s; JSON keys are strings", k.Type())
			}
			e, err := native(m.Get(k), depth+1)
			if err != nil {
				return nil, err
			}
			out[string(ks)] = e
		}
		return out, nil
	}
	if types.IsError(v) {
		return nil, fmt.Errorf("%v", v)
	}
	return nil, fmt.Errorf("a value of type %s is not JSON", v.Type())
}

// stringForm is a value as interpolated text: a string as it is, anything
// else as JSON (timestamps and durations as their text).
func stringForm(v ref.Val) (string, error) {
	n, err := native(v, 0)
	if err != nil {
		return "", err
	}
	if s, ok := n.(string); ok {
		return s, nil
	}
	b, err := json.Marshal(n)
	if err != nil {
		return "", err
	}
	return string(b), nil
}

// normalize makes decoded JSON values plain for CEL: json.Number becomes
// int64 (a whole number in range) or float64, recursively; other values
// are copied as they are.
func normalize(v any) any {
	switch x := v.(type) {
	case map[string]any:
		m := make(map[string]any, len(x))
		for k, e := range x {
			m[k] = normalize(e)
		}
		return m
	case []any:
		l := make([]any, len(x))
		for i, e := range x {
			l[i] = normalize(e)
		}
		return l
	case json.Number:
		if i, err := strconv.ParseInt(string(x), 10, 64); err == nil {
			return i
		}
		f, _ := strconv.ParseFloat(string(x), 64)
		if f == math.Trunc(f) && f >= math.MinInt64 && f < math.MaxInt64 {
			return int64(f)
		}
		return f
	case int:
		return int64(x)
	}
	return v
}

// sortedKeys are m's keys, sorted.
func sortedKeys[V any](m map[string]V) []string {
	return slices.Sorted(maps.Keys(m))
}
