package tools

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"
)

// fuzzTools are tools of every kind whose Validate FuzzValidate calls.
func fuzzTools(t testing.TB) []Tool {
	s, err := New([]Config{
		{Name: "deploy", Parameters: deploySchema(), HTTP: &HTTPConfig{URL: "https://api.example/deploy/{{.env}}?s={{with index . \"s\"}}{{.}}{{end}}"}},
		{Name: "free", HTTP: &HTTPConfig{URL: "http://h.example/"}},
		{Name: "cmd", Parameters: shellSchemaFuzz, Exec: &ExecConfig{Command: []string{"prog", "{{.x}}", "--n={{.n}}"}}},
	}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	var out []Tool
	for _, name := range s.Names() {
		tool, _ := s.Get(name)
		out = append(out, tool)
	}
	return out
}

var shellSchemaFuzz = map[string]any{
	"type":       "object",
	"properties": map[string]any{"x": map[string]any{"type": "string"}, "n": map[string]any{"type": "integer"}},
	"required":   []any{"x", "n"},
}

// noDuplicateKeys reports whether no object in the JSON value v has a key
// twice. It is written apart from checkKeysAndNumbers, recursively.
func noDuplicateKeys(v []byte) bool {
	dec := json.NewDecoder(bytes.NewReader(v))
	tok, err := dec.Token()
	if err != nil {
		return false
	}
	switch tok {
	case json.Delim('{'):
		seen := map[string]bool{}
		for dec.More() {
			k, err := dec.Token()
			if err != nil {
				return false
			}
			key := k.(string)
			if seen[key] {
				return false
			}
			seen[key] = true
			var raw json.RawMessage
			if dec.Decode(&raw) != nil || !noDuplicateKeys(raw) {
				return false
			}
		}
	case json.Delim('['):
		for dec.More() {
			var raw json.RawMessage
			if dec.Decode(&raw) != nil || !noDuplicateKeys(raw) {
				return false
			}
		}
	}
	return true
}

func FuzzValidate(f *testing.F) {
	for _, seed := range []string{
		``, `{}`, `{"env":"prod"}`, `{"env":"prod","env":"staging"}`, `{"env":"prod","meta":{"a":1,"b":{"a":2},"a":3}}`,
		`{"env":"staging","count":10000000000,"tags":["a","b"],"s":"x/../y"}`, `{"env":"prod"} {}`, `[]`, `null`,
		"{\"env\":\"prod\",\"s\":\"\xff\"}", `{"x":"-rf","n":1}`, `{"x":"a","n":-5}`, `{"x":"a\u0000","n":1}`,
		`{"\u0065nv":"prod","env":"prod"}`, `{"env":"prod","meta":[[[[{"a":[{"a":1,"a":2}]}]]]]}`, ` {"x" : "v", "n": 1e2} `,
	} {
		f.Add([]byte(seed))
	}
	tools := fuzzTools(f)
	f.Fuzz(func(t *testing.T, args []byte) {
		for _, tool := range tools {
			err := tool.Validate(json.RawMessage(args))
			if err != nil {
				if !errors.Is(err, ErrInvalidArgs) {
					t.Fatalf("%s: Validate(%q) = %v does not wrap ErrInvalidArgs", tool.Spec().Name, args, err)
				}
				continue
			}
			if len(bytes.TrimSpace(args)) == 0 {
				continue // empty arguments are {}
			}
			var obj map[string]any
			switch {
			case !utf8.Valid(args):
				t.Fatalf("%s: accepted invalid UTF-8 %q", tool.Spec().Name, args)
			case !json.Valid(args) || json.Unmarshal(args, &obj) != nil || obj == nil:
				t.Fatalf("%s: accepted %q, not a JSON object", tool.Spec().Name, args)
			case !noDuplicateKeys(args):
				t.Fatalf("%s: accepted %q with a duplicate key", tool.Spec().Name, args)
			}
		}
	})
}

// urlCase is a URL template and what its rendering must keep.
type urlCase struct {
	tmpl   string
	scheme string
	host   string
	user   string
}

var fuzzURLCases = []urlCase{
	{"https://api.example.com:8443/v1/{{.a}}/x?q={{.b}}&r=1#{{.a}}", "https", "api.example.com:8443", ""},
	{"http://bot:s3cr3tpass@h.example/{{.a}}{{.b}}", "http", "h.example", "bot:s3cr3tpass"},
	{"https://h.example?{{.a}}={{.b}}", "https", "h.example", ""},
	{"https://h.example/{{if .a}}{{.a}}{{else}}none{{end}}/{{json .b}}", "https", "h.example", ""},
	{"http://[::1]:8080/{{.b}}/{{.a}}", "http", "[::1]:8080", ""},
}

func FuzzURLTemplate(f *testing.F) {
	for _, seed := range [][2]string{
		{"a", "b"}, {"../", "../../admin"}, {"@evil.example", "x@y"}, {"#frag", "?q=1&r=2"}, {"%2F..%2F", "%00"},
		{"..", "."}, {"", ""}, {"//evil.example/x", "http://evil.example/"}, {"a:b@c", ":8080"}, {"\\\\evil", "\xff\xfe"},
		{"x/../../y", "a b"}, {"s3cr3tpass", "bot:s3cr3tpass@"},
	} {
		f.Add(seed[0], seed[1])
	}
	var hs []*httpExecutor
	for _, c := range fuzzURLCases {
		h, err := newHTTPExecutor("t", &HTTPConfig{URL: c.tmpl}, Options{})
		if err != nil {
			f.Fatalf("%s: %v", c.tmpl, err)
		}
		hs = append(hs, h)
	}
	f.Fuzz(func(t *testing.T, a, b string) {
		data := map[string]any{"a": a, "b": b}
		for i, h := range hs {
			c := fuzzURLCases[i]
			rendered, err := h.renderURL(data)
			if err != nil {
				if !errors.Is(err, ErrInvalidArgs) {
					t.Fatalf("%s with a=%q b=%q: %v does not wrap ErrInvalidArgs", c.tmpl, a, b, err)
				}
				if c.user != "" && strings.Contains(err.Error(), "s3cr3tpass") && !strings.Contains(a+b, "s3cr3tpass") {
					t.Fatalf("%s: error %q shows the userinfo", c.tmpl, err)
				}
				continue
			}
			u, err := url.Parse(rendered)
			if err != nil {
				t.Fatalf("%s with a=%q b=%q: rendered %q does not parse: %v", c.tmpl, a, b, rendered, err)
			}
			if u.Scheme != c.scheme || u.Host != c.host || u.User.String() != c.user {
				t.Fatalf("%s with a=%q b=%q: rendered %q has scheme %q host %q user %q", c.tmpl, a, b, rendered, u.Scheme, u.Host, u.User.String())
			}
			if i == 0 { // the values stay where the template put them
				segs := strings.Split(u.EscapedPath(), "/")
				q := u.Query()
				if len(segs) != 4 || segs[1] != "v1" || segs[3] != "x" || len(q) != 2 || !slices.Equal(q["q"], []string{b}) || q.Get("r") != "1" || u.Fragment != a {
					t.Fatalf("a=%q b=%q: rendered %q moved a value", a, b, rendered)
				}
				if seg, _ := url.PathUnescape(segs[2]); seg != a {
					t.Fatalf("a=%q b=%q: rendered %q path value %q", a, b, rendered, seg)
				}
			}
			if i == 2 {
				if q := u.Query(); len(q) != 1 || !slices.Equal(q[a], []string{b}) {
					t.Fatalf("a=%q b=%q: rendered %q query %v", a, b, rendered, q)
				}
			}
		}
		// A plain path value is never refused.
		if a != "" && a != "." && a != ".." && !strings.Contains(a, "/") {
			if _, err := hs[0].renderURL(data); err != nil {
				t.Fatalf("a=%q b=%q refused: %v", a, b, err)
			}
		}
	})
}

var fuzzArgv = []string{"prog", "{{.x}}", "--flag={{.y}}", "-{{.x}}", "a{{.y}}", "{{.x}}{{.y}}", "lit", "{{/* c */}}{{.y}}", "{{.n}}", "--n={{.n}}"}

func FuzzExecArgv(f *testing.F) {
	for _, seed := range []struct {
		x, y string
		n    int64
	}{
		{"a", "b", 1}, {"-rf", "x", 2}, {"", "--help", 3}, {"ok", "ok", -1}, {" -a", "\x00", 0}, {"\xff", "日本", 1 << 62}, {"", "", 0},
	} {
		f.Add(seed.x, seed.y, seed.n)
	}
	e, err := newExecExecutor("t", &ExecConfig{Command: fuzzArgv}, Options{})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, x, y string, n int64) {
		num := strconv.FormatInt(n, 10)
		data := map[string]any{"x": x, "y": y, "n": json.Number(num)}
		want := []string{"prog", x, "--flag=" + y, "-" + x, "a" + y, x + y, "lit", y, num, "--n=" + num}
		refuse := false
		for i, v := range want {
			if !strings.HasPrefix(fuzzArgv[i], "-") && strings.HasPrefix(v, "-") || strings.ContainsRune(v, 0) {
				refuse = true
			}
		}
		argv, err := e.argv(data)
		switch {
		case err != nil && !errors.Is(err, ErrInvalidArgs):
			t.Fatalf("x=%q y=%q n=%d: %v does not wrap ErrInvalidArgs", x, y, n, err)
		case err != nil && !refuse:
			t.Fatalf("x=%q y=%q n=%d: refused: %v", x, y, n, err)
		case err == nil && refuse:
			t.Fatalf("x=%q y=%q n=%d: accepted %q", x, y, n, argv)
		case err == nil && !slices.Equal(argv, want):
			t.Fatalf("x=%q y=%q n=%d: argv %q, want %q", x, y, n, argv, want)
		}
		for i, v := range argv {
			if !strings.HasPrefix(fuzzArgv[i], "-") && strings.HasPrefix(v, "-") {
				t.Fatalf("command[%d] = %q became an option", i, v)
			}
		}
	})
}

func FuzzSummary(f *testing.F) {
	for _, seed := range []struct{ tmpl, args string }{
		{"", `{"env":"prod","count":3}`},
		{"Deploy {{.env}} x{{.count}}{{with .tags}} tags {{json .}}{{end}} ({{quote .env}})", `{"env":"prod","count":10000000000,"tags":["a","<b>"]}`},
		{"{{.s}}{{.s}}{{.s}}{{.s}}{{.s}}", `{"env":"prod","s":"` + strings.Repeat("é", 400) + `"}`},
		{`{{printf "%0999999d" 1}}`, `{"env":"prod"}`},
		{"{{json .meta}} {{.meta}} {{index .meta \"k\"}}", `{"env":"prod","meta":{"k":[1,{"z":null}]}}`},
		{"{{.missing}}", `{"env":"prod"}`},
		{"{{if .s}}{{slice .s 1 2}}{{end}}", `{"env":"prod","s":"日本語"}`},
		{"{{len .tags}} {{index .tags 5}}", `{"env":"prod","tags":["a"]}`},
		{"\xff{{.env}}\xfe", `{"env":"staging"}`},
	} {
		f.Add(seed.tmpl, []byte(seed.args))
	}
	s, err := New([]Config{{Name: "deploy", Parameters: deploySchema(), HTTP: &HTTPConfig{URL: "http://h/"}}}, Options{})
	if err != nil {
		f.Fatal(err)
	}
	base := mustGetTB(f, s, "deploy").(*configTool)
	f.Fuzz(func(t *testing.T, tmpl string, args []byte) {
		// Loops and template calls can run long without printing; the
		// config's author writes them, not the model.
		if len(tmpl) > 512 || strings.Contains(tmpl, "range") || strings.Contains(tmpl, "template") || strings.Contains(tmpl, "block") {
			return
		}
		tool := *base
		if tmpl != "" {
			parsed, err := parseTemplate("summary", tmpl)
			if err != nil {
				return
			}
			tool.summary = parsed
		}
		out, err := tool.Summary(json.RawMessage(args))
		if err != nil {
			if tool.Validate(json.RawMessage(args)) != nil && !errors.Is(err, ErrInvalidArgs) {
				t.Fatalf("Summary of invalid arguments: %v does not wrap ErrInvalidArgs", err)
			}
			return
		}
		if n := utf8.RuneCountInString(out); n > MaxSummaryRunes {
			t.Fatalf("summary of %d runes", n)
		}
	})
}

func mustGetTB(tb testing.TB, s *Set, name string) Tool {
	tb.Helper()
	tool, ok := s.Get(name)
	if !ok {
		tb.Fatalf("no tool %q", name)
	}
	return tool
}
