package runbook

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/airlockhq/airlock/tools"
)

// ParamError is a bad or missing parameter of a run, as one message for
// the person who started it: Param names the parameter ("" when the
// problem is not one parameter's), Allowed what it may be (the enum's
// values, as text; nil when the schema has no enum).
type ParamError struct {
	Param   string
	Allowed []string
	Problem string
}

func (e *ParamError) Error() string {
	var b strings.Builder
	if e.Param != "" {
		fmt.Fprintf(&b, "parameter %s: ", e.Param)
	}
	b.WriteString(e.Problem)
	if len(e.Allowed) > 0 {
		fmt.Fprintf(&b, " (allowed: %s)", strings.Join(e.Allowed, ", "))
	}
	return b.String()
}

// ErrInvalidParams is wrapped by every ParamError's classification:
// errors.Is(err, ErrInvalidParams).
var ErrInvalidParams = errors.New("invalid parameters")

func (e *ParamError) Is(target error) bool { return target == ErrInvalidParams }

// ParamSpec is one declared parameter, for listings.
type ParamSpec struct {
	Name        string
	Type        string // integer, number, boolean, string, array, object, or ""
	Description string
	Enum        []any
	Default     any
	HasDefault  bool
	Required    bool
}

// ParamSpecs are the declared parameters: the required ones first, each
// group by name.
func (r *Runbook) ParamSpecs() []ParamSpec {
	out := make([]ParamSpec, 0, len(r.props))
	for name, p := range r.props {
		s := ParamSpec{Name: name, Type: propType(p), Required: slices.Contains(r.required, name)}
		s.Description, _ = p["description"].(string)
		if enum, ok := p["enum"].([]any); ok {
			for _, e := range enum {
				s.Enum = append(s.Enum, normalize(e))
			}
		}
		s.Default, s.HasDefault = p["default"]
		s.Default = normalize(s.Default)
		out = append(out, s)
	}
	for _, name := range r.required { // required but not declared
		if _, ok := r.props[name]; !ok {
			out = append(out, ParamSpec{Name: name, Required: true})
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Required != out[j].Required {
			return out[i].Required
		}
		return out[i].Name < out[j].Name
	})
	return out
}

// propType is a property's JSON type: "type" itself, or the first of a
// list that is not "null".
func propType(p map[string]any) string {
	switch t := p["type"].(type) {
	case string:
		return t
	case []any:
		for _, e := range t {
			if s, ok := e.(string); ok && s != "null" {
				return s
			}
		}
	}
	return ""
}

// allowed is a property's enum as text.
func (r *Runbook) allowed(name string) []string {
	enum, _ := r.props[name]["enum"].([]any)
	var out []string
	for _, e := range enum {
		out = append(out, textOf(normalize(e)))
	}
	return out
}

func textOf(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	b, _ := MarshalJSON(v)
	return string(b)
}

// Params turns the parameters given in a `run` command (text) into the
// run's parameters: each value is coerced by its property's type
// (integer, number, boolean; array and object as JSON; anything else as
// text), the schema's defaults fill what is not given, and the whole is
// validated against the schema. A problem is a *ParamError naming the
// parameter and what is allowed.
func (r *Runbook) Params(given map[string]string) (map[string]any, error) {
	obj := make(map[string]any, len(given))
	for _, name := range sortedKeys(given) {
		text := given[name]
		p, declared := r.props[name]
		if !declared {
			if r.closed {
				return nil, &ParamError{Param: name, Problem: "no such parameter", Allowed: r.names()}
			}
			obj[name] = text
			continue
		}
		v, err := coerce(propType(p), text)
		if err != nil {
			return nil, &ParamError{Param: name, Problem: fmt.Sprintf("%q is not %s", text, err), Allowed: r.allowed(name)}
		}
		obj[name] = v
	}
	return r.finish(obj)
}

// ParamsJSON validates the arguments of a model call of runbook__<name>
// as tool arguments are validated (one JSON object, valid UTF-8, no key
// twice), fills the defaults and validates against the schema.
func (r *Runbook) ParamsJSON(raw json.RawMessage) (map[string]any, error) {
	obj, err := tools.DecodeObject(tools.NormalizeArgs(raw))
	if err != nil {
		return nil, &ParamError{Problem: "the arguments are not one JSON object: " + err.Error()}
	}
	n, _ := normalize(obj).(map[string]any)
	if r.closed {
		for _, name := range sortedKeys(n) {
			if _, ok := r.props[name]; !ok {
				return nil, &ParamError{Param: name, Problem: "no such parameter", Allowed: r.names()}
			}
		}
	}
	return r.finish(n)
}

// names are the declared parameters, sorted.
func (r *Runbook) names() []string {
	out := make([]string, 0, len(r.props))
	for n := range r.props {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// finish fills defaults, checks each declared parameter for a clear
// message, then validates the whole against the schema.
func (r *Runbook) finish(obj map[string]any) (map[string]any, error) {
	for name, p := range r.props {
		if _, ok := obj[name]; ok {
			continue
		}
		if d, ok := p["default"]; ok {
			obj[name] = normalize(d)
		}
	}
	for _, name := range r.required {
		if _, ok := obj[name]; !ok {
			return nil, &ParamError{Param: name, Problem: "required", Allowed: r.allowed(name)}
		}
	}
	for _, name := range sortedKeys(obj) {
		if err := r.checkValue(name, obj[name]); err != nil {
			return nil, err
		}
	}
	raw, err := json.Marshal(obj)
	if err != nil {
		return nil, &ParamError{Problem: err.Error()}
	}
	if _, err := r.schema.Decode(raw); err != nil {
		msg := strings.TrimPrefix(err.Error(), tools.ErrInvalidArgs.Error()+": ")
		pe := &ParamError{Problem: msg}
		if rest, ok := strings.CutPrefix(msg, "/"); ok {
			if path, problem, ok := strings.Cut(rest, ": "); ok && path != "" {
				name, _, _ := strings.Cut(path, "/")
				pe.Param, pe.Problem, pe.Allowed = name, msg, r.allowed(name)
				if name == path {
					pe.Problem = problem
				}
			}
		}
		return nil, pe
	}
	return obj, nil
}

// checkValue checks a declared parameter's value against its property's
// type and enum (the schema's validation checks the rest).
func (r *Runbook) checkValue(name string, v any) error {
	p, ok := r.props[name]
	if !ok {
		return nil
	}
	if t := propType(p); t != "" && !hasType(v, p["type"]) {
		return &ParamError{Param: name, Problem: fmt.Sprintf("%s is not %s", textOf(v), article(t)), Allowed: r.allowed(name)}
	}
	if enum, ok := p["enum"].([]any); ok {
		for _, e := range enum {
			if equalJSON(normalize(e), v) {
				return nil
			}
		}
		return &ParamError{Param: name, Problem: fmt.Sprintf("%q is not allowed", textOf(v)), Allowed: r.allowed(name)}
	}
	return nil
}

// hasType reports whether v is of the schema type t (a name or a list).
func hasType(v any, t any) bool {
	switch x := t.(type) {
	case string:
		return isType(v, x)
	case []any:
		for _, e := range x {
			if s, ok := e.(string); ok && isType(v, s) {
				return true
			}
		}
		return false
	}
	return true
}

func isType(v any, t string) bool {
	switch t {
	case "string":
		_, ok := v.(string)
		return ok
	case "boolean":
		_, ok := v.(bool)
		return ok
	case "integer":
		switch n := v.(type) {
		case int64, uint64:
			return true
		case float64:
			return n == math.Trunc(n)
		}
		return false
	case "number":
		switch v.(type) {
		case int64, uint64, float64:
			return true
		}
		return false
	case "array":
		_, ok := v.([]any)
		return ok
	case "object":
		_, ok := v.(map[string]any)
		return ok
	case "null":
		return v == nil
	}
	return true
}

func equalJSON(a, b any) bool {
	if fa, ok := toFloat(a); ok {
		fb, ok := toFloat(b)
		return ok && fa == fb
	}
	return reflect.DeepEqual(a, b)
}

func toFloat(v any) (float64, bool) {
	switch n := v.(type) {
	case int64:
		return float64(n), true
	case uint64:
		return float64(n), true
	case float64:
		return n, true
	}
	return 0, false
}

func article(t string) string {
	switch t {
	case "integer", "array", "object":
		return "an " + t
	}
	return "a " + t
}

// coerce turns a command's text into a value of the JSON type t; the
// error says what it is not ("an integer").
func coerce(t, text string) (any, error) {
	switch t {
	case "integer":
		if i, err := strconv.ParseInt(text, 10, 64); err == nil {
			return i, nil
		}
		return nil, errors.New("an integer")
	case "number":
		if i, err := strconv.ParseInt(text, 10, 64); err == nil {
			return i, nil
		}
		if f, err := strconv.ParseFloat(text, 64); err == nil && !math.IsInf(f, 0) && !math.IsNaN(f) {
			return f, nil
		}
		return nil, errors.New("a number")
	case "boolean":
		switch text {
		case "true":
			return true, nil
		case "false":
			return false, nil
		}
		return nil, errors.New("a boolean (true or false)")
	case "array", "object":
		v, err := tools.DecodeObject([]byte(`{"v":` + text + `}`))
		if err != nil {
			return nil, fmt.Errorf("%s written as JSON", article(t))
		}
		return normalize(v["v"]), nil
	}
	return text, nil
}
