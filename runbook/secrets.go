package runbook

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// Secrets in a step's arguments. The configuration keeps a secret read
// from the environment or a file (${NAME}, ${NAME:-default},
// ${file:PATH}) in a step's args as its reference text, never its value:
// the run's snapshot, the call's stored arguments, its card, the audit
// and an approval all hold the reference, and the bot puts the value in
// (ExpandSecrets) only in memory, right before the tool runs, and only
// where the step's own configured text holds the reference (SecretPaths).
// A value an expression puts into the arguments may not hold a reference
// of its argument (the template's output is refused), so neither a
// parameter, a step's result, nor an approver's edit can move a secret
// elsewhere or bring in another.

// RefPattern is the syntax of a reference: ${NAME}, ${NAME:-default},
// ${file:PATH} (config expands it; step arguments keep secrets as it).
const RefPattern = `\$\{(file:([^}]+)|([A-Za-z_][A-Za-z0-9_]*)(:-([^}]*))?)\}`

var refRe = regexp.MustCompile(RefPattern)

// SecretRefs lists the references in s, each once, in order.
func SecretRefs(s string) []string {
	var out []string
	for _, r := range refRe.FindAllString(s, -1) {
		if !slices.Contains(out, r) {
			out = append(out, r)
		}
	}
	return out
}

// SecretPath is where a step's configured arguments hold references: the
// path of a string value (object keys; list indices as decimal text) and
// the references its configured text holds.
type SecretPath struct {
	Path []string
	Refs []string
}

// SecretPaths lists where the step's configured arguments hold
// references, in a stable order.
func (s StepConfig) SecretPaths() []SecretPath {
	var out []SecretPath
	var walk func(v any, path []string)
	walk = func(v any, path []string) {
		switch x := v.(type) {
		case string:
			if refs := SecretRefs(x); len(refs) > 0 {
				out = append(out, SecretPath{Path: slices.Clone(path), Refs: refs})
			}
		case map[string]any:
			keys := make([]string, 0, len(x))
			for k := range x {
				keys = append(keys, k)
			}
			slices.Sort(keys)
			for _, k := range keys {
				walk(x[k], append(path, k))
			}
		case []any:
			for i, e := range x {
				walk(e, append(path, strconv.Itoa(i)))
			}
		}
	}
	walk(map[string]any(s.Args), nil)
	return out
}

// ErrSecretMissing: a reference of a step's arguments has no value here
// (the configuration no longer holds it); the tool does not run.
var ErrSecretMissing = errors.New("a secret of the step's arguments is not configured")

// ExpandSecrets returns args with each path's references replaced by
// their values (lookup), the rest as it is; args unchanged when paths is
// empty. A path the arguments no longer hold as a string (an approver
// edited it away) expands nothing; a reference without a value is
// ErrSecretMissing, naming the reference, never a value. The result
// lives in memory only: it is what the tool receives.
func ExpandSecrets(args json.RawMessage, paths []SecretPath, lookup func(ref string) (string, bool)) (json.RawMessage, error) {
	if len(paths) == 0 {
		return args, nil
	}
	dec := json.NewDecoder(bytes.NewReader(args))
	dec.UseNumber()
	var root any
	if err := dec.Decode(&root); err != nil {
		return nil, fmt.Errorf("the step's arguments: %w", err)
	}
	for _, p := range paths {
		var err error
		root, err = expandAt(root, p.Path, p.Refs, lookup)
		if err != nil {
			return nil, err
		}
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(root); err != nil {
		return nil, fmt.Errorf("the step's arguments: %w", err)
	}
	return json.RawMessage(bytes.TrimRight(buf.Bytes(), "\n")), nil
}

func expandAt(v any, path []string, refs []string, lookup func(string) (string, bool)) (any, error) {
	if len(path) == 0 {
		s, ok := v.(string)
		if !ok {
			return v, nil
		}
		for _, r := range refs {
			if !strings.Contains(s, r) {
				continue
			}
			val, ok := lookup(r)
			if !ok {
				return nil, fmt.Errorf("%w: %s", ErrSecretMissing, r)
			}
			s = strings.ReplaceAll(s, r, val)
		}
		return s, nil
	}
	switch x := v.(type) {
	case map[string]any:
		c, ok := x[path[0]]
		if !ok {
			return v, nil
		}
		e, err := expandAt(c, path[1:], refs, lookup)
		if err != nil {
			return nil, err
		}
		x[path[0]] = e
	case []any:
		i, err := strconv.Atoi(path[0])
		if err != nil || i < 0 || i >= len(x) {
			return v, nil
		}
		e, err := expandAt(x[i], path[1:], refs, lookup)
		if err != nil {
			return nil, err
		}
		x[i] = e
	}
	return v, nil
}
