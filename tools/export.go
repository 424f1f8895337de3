package tools

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"text/template"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/airlockhq/airlock/redact"
)

// This file exports what config tools do for other tool sources (MCP
// servers): the same schema compilation, argument decoding, summaries and
// output cap, so every tool is held to the same rules.

// Schema is a compiled parameters schema.
type Schema struct {
	raw      json.RawMessage
	schema   *jsonschema.Schema
	declared []string // top-level properties, sorted
}

// CompileSchema compiles a tool's parameters schema as config tools'
// parameters are: a JSON object (empty or null means {"type":"object"})
// whose "type", when set, is "object"; draft 2020-12 unless its $schema says
// otherwise; formats asserted; self-contained: nothing is loaded from files
// or the network. The schema's own JSON must be valid UTF-8 without
// duplicate keys.
func CompileSchema(params json.RawMessage) (*Schema, error) {
	var obj map[string]any
	if t := bytes.TrimSpace(params); len(t) > 0 && !bytes.Equal(t, []byte("null")) {
		o, err := decodeObject(t)
		if err != nil {
			return nil, err
		}
		obj = o
	}
	raw, sch, err := compileSchema(obj)
	if err != nil {
		return nil, err
	}
	s := &Schema{raw: raw, schema: sch}
	if props, ok := obj["properties"].(map[string]any); ok {
		for name := range props {
			s.declared = append(s.declared, name)
		}
		sort.Strings(s.declared)
	}
	return s, nil
}

// JSON is the schema as JSON, for a tool's spec.
func (s *Schema) JSON() json.RawMessage { return bytes.Clone(s.raw) }

// Properties are the top-level properties the schema declares, sorted.
func (s *Schema) Properties() []string { return append([]string(nil), s.declared...) }

// Decode validates arguments as config tools do and returns them decoded,
// numbers as json.Number: empty arguments are an empty object; invalid
// UTF-8, duplicate keys, anything but one object, and a schema violation are
// errors wrapping ErrInvalidArgs.
func (s *Schema) Decode(args json.RawMessage) (map[string]any, error) {
	return decodeValid(s.schema, args)
}

// NormalizeArgs is args, or "{}" when args are empty.
func NormalizeArgs(args json.RawMessage) json.RawMessage { return normalizeArgs(args) }

// ParseSummary parses a summary template with the functions and options of
// tools[].summary: json and quote, missingkey=error.
func ParseSummary(text string) (*template.Template, error) {
	return parseTemplate("summary", text)
}

// RenderSummary renders the read-back of decoded arguments as config tools
// do: with tmpl (from ParseSummary), where a declared property left out reads
// as nil; without, "name(k1=v1, k2=v2)". The result is capped at
// MaxSummaryRunes.
func RenderSummary(name string, tmpl *template.Template, declared []string, args map[string]any) (string, error) {
	if tmpl == nil {
		return capRunes(defaultSummary(name, args), MaxSummaryRunes), nil
	}
	w := &limitWriter{max: 4*MaxSummaryRunes + 4}
	data := templateData(args)
	for _, name := range declared {
		if _, ok := data[name]; !ok {
			data[name] = nil
		}
	}
	if err := tmpl.Execute(w, data); err != nil && !errors.Is(err, errLimit) {
		return "", fmt.Errorf("summary: %w", err)
	}
	return capRunes(w.buf.String(), MaxSummaryRunes), nil
}

// CapRunes cuts s to max runes, ending in "…" when cut.
func CapRunes(s string, max int) string { return capRunes(s, max) }

// CapOutput scrubs out with r (nil: nothing), then keeps at most max bytes
// of it (DefaultMaxOutput when max <= 0), cut at a rune boundary and never
// inside a secret, noting a cut as config tools do.
func CapOutput(out []byte, max int, r *redact.Redactor) string {
	if max <= 0 {
		max = DefaultMaxOutput
	}
	return truncateOutput(out, max, int64(len(out)), r)
}

// ValidName reports whether name is a tool name every provider accepts
// (what Set.Add requires).
func ValidName(name string) bool { return namePattern.MatchString(name) }

// DecodeObject decodes tool arguments as validation does: one JSON object
// of valid UTF-8 with no key twice at any depth and nothing after it,
// numbers as json.Number. Rules use it so they judge the value the tool
// would run with.
func DecodeObject(data []byte) (map[string]any, error) { return decodeObject(data) }
