package tools

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"text/template"
	"unicode/utf8"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/airlockhq/airlock/confirm"
	"github.com/airlockhq/airlock/keyerr"
	"github.com/airlockhq/airlock/model"
)

// MaxSummaryRunes caps a read-back summary; a longer one ends in "…".
const MaxSummaryRunes = 1000

// emptySchema is the parameters of a tool that configures none.
const emptySchema = `{"type":"object"}`

// executor runs a tool with validated arguments: body is the arguments as the
// model sent them, data the same decoded for templates.
type executor interface {
	// check renders the executor's templates (URL, argv) from data as run
	// would and returns the invalid-arguments error run would return.
	check(data map[string]any) error
	// run renders the templates again, refusing what check refuses, then
	// runs the tool.
	run(ctx context.Context, body []byte, data map[string]any, idempotencyKey string) (string, error)
}

// configTool is a tool defined in config.
type configTool struct {
	name        string
	description string
	params      json.RawMessage
	schema      *jsonschema.Schema
	confirm     bool
	approvals   int
	risk        confirm.Risk
	definition  string             // Definition: a hash of cfg
	summary     *template.Template // nil: the default summary
	phrase      *template.Template // tools[].confirm_phrase; nil: the tool's name
	declared    []string           // top-level properties the schema declares
	exec        executor
	preview     executor // nil: no preview (tools[].preview)
	recheck     bool
}

var (
	_ Tool     = (*configTool)(nil)
	_ executor = (*httpExecutor)(nil)
	_ executor = (*execExecutor)(nil)
)

// Validate checks the tool's keys; key is its place in the file, e.g.
// "tools[2]". What only compiling finds (the schema, the templates) New
// reports. The error is a *keyerr.Error naming the bad key.
func (cfg Config) Validate(key string) error {
	switch {
	case cfg.Name == "":
		return keyerr.New(key+".name", "required")
	case !namePattern.MatchString(cfg.Name):
		return keyerr.New(key+".name", "invalid %q: must match %s", cfg.Name, namePattern)
	case (cfg.HTTP == nil) == (cfg.Exec == nil):
		return keyerr.New(key, "exactly one of http or exec is required")
	}
	if cfg.Approvals < 0 || cfg.Approvals > 10 {
		return keyerr.New(key+".approvals", "must be between 1 and 10 (0 means confirmation.approvals)")
	}
	if _, err := confirm.ParseRisk(cfg.Risk); err != nil {
		return keyerr.Wrap(key+".risk", err)
	}
	if cfg.Preview != nil {
		if err := cfg.Preview.Validate(key + ".preview"); err != nil {
			return err
		}
	}
	if cfg.HTTP != nil {
		return cfg.HTTP.Validate(key + ".http")
	}
	return cfg.Exec.Validate(key + ".exec")
}

// newConfigTool compiles a tool that Validate accepted.
func newConfigTool(key string, cfg Config, opts Options) (*configTool, error) {
	cerr := func(sub string, err error) error { return keyerr.Wrap(key+sub, err) }
	t := &configTool{name: cfg.Name, description: cfg.Description, confirm: cfg.Confirm, approvals: cfg.Approvals, risk: confirm.Risk(cfg.Risk)}
	if b, err := json.Marshal(cfg); err == nil {
		sum := sha256.Sum256(b)
		t.definition = hex.EncodeToString(sum[:])
	}

	params, schema, err := compileSchema(cfg.Parameters)
	if err != nil {
		return nil, cerr(".parameters", fmt.Errorf("invalid JSON Schema: %w", err))
	}
	t.params, t.schema = params, schema
	if props, ok := cfg.Parameters["properties"].(map[string]any); ok {
		for name := range props {
			t.declared = append(t.declared, name)
		}
	}

	if cfg.Summary != "" {
		tmpl, err := parseTemplate("summary", cfg.Summary)
		if err != nil {
			return nil, cerr(".summary", err)
		}
		t.summary = tmpl
	}

	if cfg.ConfirmPhrase != "" {
		tmpl, err := parseTemplate("confirm_phrase", cfg.ConfirmPhrase)
		if err != nil {
			return nil, cerr(".confirm_phrase", err)
		}
		t.phrase = tmpl
	}

	if cfg.HTTP != nil {
		t.exec, err = newHTTPExecutor(key+".http", cfg.HTTP, opts)
	} else {
		t.exec, err = newExecExecutor(key+".exec", cfg.Exec, opts)
	}
	if err != nil {
		return nil, err
	}
	if cfg.Preview != nil {
		if t.preview, err = newPreview(key+".preview", cfg.Preview, opts); err != nil {
			return nil, err
		}
		t.recheck = cfg.Preview.Recheck
	}
	return t, nil
}

// compileSchema compiles the parameters schema once. Schemas must be self
// contained: nothing is loaded from files or the network.
func compileSchema(params map[string]any) (json.RawMessage, *jsonschema.Schema, error) {
	raw := []byte(emptySchema)
	if params != nil {
		b, err := json.Marshal(params)
		if err != nil {
			return nil, nil, err
		}
		raw = b
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, nil, err
	}
	if obj, ok := doc.(map[string]any); ok {
		if typ, ok := obj["type"]; ok && typ != "object" {
			return nil, nil, fmt.Errorf(`type must be "object", got %s`, compactJSON(typ))
		}
	}
	const loc = "mem:///parameters.json"
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.AssertFormat()
	c.UseLoader(jsonschema.SchemeURLLoader{})
	if err := c.AddResource(loc, doc); err != nil {
		return nil, nil, oneLine(err)
	}
	sch, err := c.Compile(loc)
	if err != nil {
		var sve *jsonschema.SchemaValidationError
		if errors.As(err, &sve) {
			return nil, nil, errors.New("not valid against its metaschema: " + schemaMessage(sve.Err))
		}
		return nil, nil, oneLine(err)
	}
	return raw, sch, nil
}

// oneLine flattens a multi-line error message.
func oneLine(err error) error {
	msg := err.Error()
	if !strings.Contains(msg, "\n") {
		return err
	}
	fields := strings.Split(msg, "\n")
	for i, f := range fields {
		fields[i] = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(f), "- "))
	}
	return errors.New(strings.Join(fields, "; "))
}

// templateFuncs are the functions summary and argv templates may call.
var templateFuncs = template.FuncMap{
	"json":  compactJSON,
	"quote": func(v any) string { return strconv.Quote(fmt.Sprint(v)) },
}

// parseTemplate parses a summary or argv template. A key the arguments lack
// is an error (missingkey=error); an optional argument is read with
// {{with index . "name"}}...{{end}}. Objects and arrays print as JSON.
func parseTemplate(name, text string) (*template.Template, error) {
	return template.New(name).Funcs(templateFuncs).Option("missingkey=error").Parse(text)
}

// Spec implements Tool.
func (t *configTool) Spec() model.ToolSpec {
	return model.ToolSpec{Name: t.name, Description: t.description, Parameters: bytes.Clone(t.params)}
}

// Confirm implements Tool.
func (t *configTool) Confirm() bool { return t.confirm }

// Approvals is how many distinct people must allow a gated call of the
// tool; 0 means the configured default.
func (t *configTool) Approvals() int { return t.approvals }

// Definition is a hash of the tool's config entry (see tools.Definition).
func (t *configTool) Definition() string { return t.definition }

// Risk is the tool's tier (tools[].risk); "": the default.
func (t *configTool) Risk() confirm.Risk { return t.risk }

// Validate implements Tool: the arguments must match the schema, and the
// executor's templates (URL, argv) must render from them into a request or a
// command run would accept. Every error wraps ErrInvalidArgs.
func (t *configTool) Validate(args json.RawMessage) error {
	obj, err := t.decode(args)
	if err != nil {
		return err
	}
	data := templateData(obj)
	if t.preview != nil {
		// The preview's templates render from the same arguments: a call
		// its preview would refuse is invalid.
		if err := t.preview.check(data); err != nil {
			return fmt.Errorf("preview: %w", err)
		}
	}
	return t.exec.check(data)
}

// decode validates the arguments and returns them decoded.
func (t *configTool) decode(args json.RawMessage) (map[string]any, error) {
	return decodeValid(t.schema, args)
}

// decodeValid decodes args as one JSON object (empty: {}) valid under
// schema; anything else is an error wrapping ErrInvalidArgs.
func decodeValid(schema *jsonschema.Schema, args json.RawMessage) (map[string]any, error) {
	obj, err := decodeObject(normalizeArgs(args))
	if err != nil {
		return nil, fmt.Errorf("%w: %s", ErrInvalidArgs, err)
	}
	if err := schema.Validate(obj); err != nil {
		return nil, fmt.Errorf("%w: %s", ErrInvalidArgs, schemaMessage(err))
	}
	return obj, nil
}

// Summary implements Tool.
func (t *configTool) Summary(args json.RawMessage) (string, error) {
	obj, err := t.decode(args)
	if err != nil {
		return "", err
	}
	if t.summary == nil {
		return capRunes(defaultSummary(t.name, obj), MaxSummaryRunes), nil
	}
	w := &limitWriter{max: 4*MaxSummaryRunes + 4}
	data := templateData(obj)
	for _, name := range t.declared {
		if _, ok := data[name]; !ok {
			data[name] = nil // an optional argument left out: {{if .x}} works; a misspelt key still fails
		}
	}
	if err := t.summary.Execute(w, data); err != nil && !errors.Is(err, errLimit) {
		return "", fmt.Errorf("summary: %w", err)
	}
	return capRunes(w.buf.String(), MaxSummaryRunes), nil
}

// MaxPhraseBytes caps what a confirm_phrase template may write; the bot
// cuts the phrase it shows far shorter.
const MaxPhraseBytes = 1024

// ConfirmPhrase is what an approver types to allow a critical call with
// these arguments: tools[].confirm_phrase rendered over them (at most
// MaxPhraseBytes), or the tool's name when it sets none. The text is
// the arguments' own (hostile): the bot makes it inert before showing it.
func (t *configTool) ConfirmPhrase(args json.RawMessage) (string, error) {
	if t.phrase == nil {
		return t.name, nil
	}
	obj, err := t.decode(args)
	if err != nil {
		return "", err
	}
	w := &limitWriter{max: MaxPhraseBytes}
	data := templateData(obj)
	for _, name := range t.declared {
		if _, ok := data[name]; !ok {
			data[name] = nil
		}
	}
	if err := t.phrase.Execute(w, data); err != nil && !errors.Is(err, errLimit) {
		return "", fmt.Errorf("confirm_phrase: %w", err)
	}
	return w.buf.String(), nil
}

// Run implements Tool.
func (t *configTool) Run(ctx context.Context, args json.RawMessage, idempotencyKey string) (string, error) {
	obj, err := t.decode(args)
	if err != nil {
		return "", err
	}
	return t.exec.run(ctx, normalizeArgs(args), templateData(obj), idempotencyKey)
}

// normalizeArgs treats empty arguments as an empty object.
func normalizeArgs(args []byte) []byte {
	if len(bytes.TrimSpace(args)) == 0 {
		return []byte("{}")
	}
	return args
}

// decodeObject decodes a single JSON object, numbers as json.Number. It
// rejects invalid UTF-8, duplicate keys and numbers out of a double's
// range, so what was validated is what any reader of the raw bytes sees.
func decodeObject(data []byte) (map[string]any, error) {
	if !utf8.Valid(data) {
		return nil, errors.New("not valid UTF-8")
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("not valid JSON: %w", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("not valid JSON: data after the object")
	}
	obj, ok := v.(map[string]any)
	if !ok {
		return nil, errors.New("must be a JSON object")
	}
	if err := checkKeysAndNumbers(data); err != nil {
		return nil, err
	}
	return obj, nil
}

// checkKeysAndNumbers rejects an object with a key twice, at any depth,
// and a number too large for a double (most JSON readers, Go's
// encoding/json into any among them, refuse it).
func checkKeysAndNumbers(data []byte) error {
	type frame struct {
		keys      map[string]bool // nil for an array
		expectKey bool
	}
	var stack []*frame
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return fmt.Errorf("not valid JSON: %w", err)
		}
		var top *frame
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		switch tok {
		case json.Delim('{'):
			stack = append(stack, &frame{keys: map[string]bool{}, expectKey: true})
			continue
		case json.Delim('['):
			stack = append(stack, &frame{})
			continue
		case json.Delim('}'), json.Delim(']'):
			stack = stack[:len(stack)-1]
			if len(stack) > 0 && stack[len(stack)-1].keys != nil {
				stack[len(stack)-1].expectKey = true
			}
			continue
		}
		if n, ok := tok.(json.Number); ok {
			if _, err := strconv.ParseFloat(string(n), 64); err != nil {
				return fmt.Errorf("number %s out of range", capRunes(string(n), 24))
			}
		}
		if top == nil || top.keys == nil {
			continue
		}
		if top.expectKey {
			k, _ := tok.(string)
			if top.keys[k] {
				return fmt.Errorf("duplicate key %q", k)
			}
			top.keys[k] = true
			top.expectKey = false
		} else {
			top.expectKey = true
		}
	}
}

// maxSchemaErrors is how many schema violations an error lists.
const maxSchemaErrors = 3

// schemaMessage turns a validation error into a short list of violations:
// "/count: got string, want integer".
func schemaMessage(err error) string {
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return err.Error()
	}
	var leaves []string
	var walk func(e *jsonschema.ValidationError)
	walk = func(e *jsonschema.ValidationError) {
		if len(e.Causes) == 0 {
			leaves = append(leaves, leafMessage(e))
			return
		}
		for _, c := range e.Causes {
			walk(c)
		}
	}
	walk(ve)
	sort.Strings(leaves)
	if len(leaves) > maxSchemaErrors {
		leaves = append(leaves[:maxSchemaErrors], fmt.Sprintf("and %d more", len(leaves)-maxSchemaErrors))
	}
	return strings.Join(leaves, "; ")
}

func leafMessage(e *jsonschema.ValidationError) string {
	loc := "/" + strings.Join(escapePointer(e.InstanceLocation), "/")
	msg := e.Error() // "at '<pointer>': <message>" for a leaf
	if i := strings.Index(msg, "': "); strings.HasPrefix(msg, "at '") && i >= 0 {
		msg = msg[i+3:]
	}
	return loc + ": " + msg
}

func escapePointer(tokens []string) []string {
	out := make([]string, len(tokens))
	for i, t := range tokens {
		out[i] = strings.ReplaceAll(strings.ReplaceAll(t, "~", "~0"), "/", "~1")
	}
	return out
}

// defaultSummary is "name(k1=v1, k2=v2)" with sorted keys and JSON values.
func defaultSummary(name string, obj map[string]any) string {
	keys := make([]string, 0, len(obj))
	for k := range obj {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	b.WriteString(name)
	b.WriteByte('(')
	for i, k := range keys {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(k)
		b.WriteByte('=')
		b.WriteString(compactJSON(obj[k]))
	}
	b.WriteByte(')')
	return b.String()
}

// compactJSON is v as compact JSON, without HTML escaping.
func compactJSON(v any) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return fmt.Sprint(v)
	}
	return strings.TrimSuffix(b.String(), "\n")
}

// jsonObject and jsonArray are the decoded arguments as templates see them:
// printed, they are compact JSON rather than Go syntax.
type (
	jsonObject map[string]any
	jsonArray  []any
)

func (o jsonObject) String() string { return compactJSON(map[string]any(o)) }

func (a jsonArray) String() string { return compactJSON([]any(a)) }

// templateData converts decoded arguments for templates.
func templateData(obj map[string]any) map[string]any {
	out := make(map[string]any, len(obj))
	for k, v := range obj {
		out[k] = templateValue(v)
	}
	return out
}

func templateValue(v any) any {
	switch v := v.(type) {
	case map[string]any:
		return jsonObject(templateData(v))
	case []any:
		a := make(jsonArray, len(v))
		for i, e := range v {
			a[i] = templateValue(e)
		}
		return a
	default:
		return v
	}
}

// capRunes cuts s to max runes, ending in "…" when cut.
func capRunes(s string, max int) string {
	if utf8.RuneCountInString(s) <= max {
		return s
	}
	n := 0
	for i := range s {
		if n == max-1 {
			return s[:i] + "…"
		}
		n++
	}
	return s
}

var errLimit = errors.New("output limit reached")

// limitWriter keeps the first max bytes written, then fails.
type limitWriter struct {
	buf bytes.Buffer
	max int
}

func (w *limitWriter) Write(p []byte) (int, error) {
	room := w.max - w.buf.Len()
	if len(p) > room {
		w.buf.Write(p[:max(room, 0)])
		return max(room, 0), errLimit
	}
	return w.buf.Write(p)
}
