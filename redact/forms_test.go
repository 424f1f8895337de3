package redact

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"testing"
)

// secret has characters every encoding changes: / + = < > & " \ and a space.
const secret = `tok/en+x=1<a>&"q"\ z`

// TestEncodedFormsAreRedacted: each encoding of a secret a tool might echo
// (an attacker's server decoding nothing, just encoding) is redacted.
func TestEncodedFormsAreRedacted(t *testing.T) {
	r := New([]string{secret})
	goJSON, _ := json.Marshal(secret)
	var noHTML bytes.Buffer
	enc := json.NewEncoder(&noHTML)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(secret)
	basic := base64.StdEncoding.EncodeToString([]byte("user:" + secret))
	for name, in := range map[string]string{
		"base64 std":         base64.StdEncoding.EncodeToString([]byte(secret)),
		"base64 std raw":     base64.RawStdEncoding.EncodeToString([]byte(secret)),
		"base64 url":         base64.URLEncoding.EncodeToString([]byte(secret)),
		"base64 url raw":     base64.RawURLEncoding.EncodeToString([]byte(secret)),
		"query escape":       url.QueryEscape(secret),
		"path escape":        url.PathEscape(secret),
		"lower hex":          strings.ToLower(url.QueryEscape(secret)),
		"go json":            string(goJSON),
		"go json no html":    noHTML.String(),
		"json slash":         strings.ReplaceAll(string(goJSON), "/", `\/`),
		"json twice":         func() string { b, _ := json.Marshal(string(goJSON)); return string(b) }(),
		"base64 in url":      url.QueryEscape(base64.StdEncoding.EncodeToString([]byte(secret))),
		"base64 inside text": basic,
	} {
		out := r.String("got: " + in + " end")
		if strings.Contains(out, strings.Trim(strings.TrimSpace(in), `"`)) || !strings.Contains(out, Marker) {
			t.Errorf("%s: %q -> %q", name, in, out)
		}
	}
	// Base64 of a longer text: at every alignment, at most the two
	// characters beside the secret's bits stay.
	for _, pre := range []string{"", "a", "ab", "abc"} {
		e := base64.StdEncoding.EncodeToString([]byte(pre + secret + "tail"))
		out := r.String(e)
		if !strings.Contains(out, Marker) || len(out)-len(Marker) > len(e)-(len(secret)*8/6-2) {
			t.Errorf("prefix %q: %q -> %q", pre, e, out)
		}
	}
}

func TestJoinAcrossParts(t *testing.T) {
	r := New([]string{"sk-live-123456"})
	for _, tc := range []struct {
		parts []string
		want  string
	}{
		{[]string{"key sk-live-", "123456 end"}, "key [redacted] end"},
		{[]string{"a", "sk-live-123456", "b"}, "a\n[redacted]\nb"},
		{[]string{"sk-li", "ve-12", "3456"}, "[redacted]"},
		{[]string{"plain", "text"}, "plain\ntext"},
		{[]string{"sk-live-123456"[:7], "", "sk-live-123456"[7:]}, "[redacted]"},
	} {
		if got := r.Join(tc.parts, "\n"); got != tc.want {
			t.Errorf("Join(%q) = %q, want %q", tc.parts, got, tc.want)
		}
	}
	if got := (*Redactor)(nil).Join([]string{"a", "b"}, "\n"); got != "a\nb" {
		t.Errorf("nil: %q", got)
	}
}

func TestPrefixNeverLeavesPartOfASecret(t *testing.T) {
	const sec = "sk-live-abcdefghij"
	r := New([]string{sec})
	for cut := 0; cut < len(sec)+2; cut++ {
		pad := strings.Repeat("x", 100-cut)
		s := pad + sec + strings.Repeat("y", 100)
		out := r.Prefix(s, 100)
		if len(out) > 100 || strings.Contains(out, "sk-") {
			t.Fatalf("cut %d: %q", cut, out)
		}
	}
	// Markers longer than the secrets they replace still fit, uncut.
	short := New([]string{"abcdef"})
	out := short.Prefix(strings.Repeat("abcdef", 10), 25)
	if out != "[redacted]" {
		t.Errorf("short: %q", out)
	}
	out = short.Prefix("1234567890123abcdef", 15)
	if out != "1234567890123" {
		t.Errorf("marker cut: %q", out)
	}
	if got := (*Redactor)(nil).Prefix("héllo", 2); got != "h" {
		t.Errorf("nil rune cut: %q", got)
	}
}

type stringer struct{ s string }

func (s stringer) String() string { return s.s }

type valuer struct{ s string }

func (v valuer) LogValue() slog.Value { return slog.StringValue(v.s) }

func TestHandlerRedactsEveryPart(t *testing.T) {
	const sec = "sk-live-123456"
	r := New([]string{sec, "98765432"})
	for _, format := range []string{"text", "json"} {
		var buf bytes.Buffer
		var h slog.Handler = slog.NewTextHandler(&buf, nil)
		if format == "json" {
			h = slog.NewJSONHandler(&buf, nil)
		}
		log := slog.New(NewHandler(h, r))
		log = log.With("with", "w:"+sec).WithGroup("g-" + sec)
		log.Info("msg "+sec,
			"str", sec,
			"err", fmt.Errorf("wrapped: %w", errors.New(sec)),
			"stringer", stringer{sec},
			"valuer", valuer{sec},
			"num", 98765432,
			"map", map[string]string{"k": sec},
			"bytes", []byte(sec),
			sec, "as key",
			slog.Group("grp", "inner", sec),
			"b64", base64.StdEncoding.EncodeToString([]byte(sec)),
		)
		out := buf.String()
		if strings.Contains(out, sec) || strings.Contains(out, "98765432") || strings.Contains(out, "c2stbGl2ZS0xMjM0NTY") {
			t.Errorf("%s log holds a secret:\n%s", format, out)
		}
		if !strings.Contains(out, Marker) {
			t.Errorf("%s: no marker:\n%s", format, out)
		}
	}
	// A clean value keeps its kind.
	var buf bytes.Buffer
	slog.New(NewHandler(slog.NewJSONHandler(&buf, nil), r)).Info("m", "map", map[string]int{"a": 1})
	if !strings.Contains(buf.String(), `"map":{"a":1}`) {
		t.Errorf("structure lost: %s", buf.String())
	}
}

func TestJSONStaysValid(t *testing.T) {
	r := New([]string{"sk-live-123456", "12345678"})
	for _, in := range []string{
		`{"token":"sk-live-123456","n":1}`,
		`{"pin":12345678,"list":["a","x sk-live-123456 y"]}`,
		`{"sk-live-123456":true}`,
		`{"esc":"sk-live-123456\u003c"}`,
	} {
		out := JSON([]byte(in), r.String)
		if !json.Valid(out) || bytes.Contains(out, []byte("sk-live-123456")) || bytes.Contains(out, []byte("12345678")) {
			t.Errorf("JSON(%s) = %s", in, out)
		}
	}
	clean := []byte(`{"a": 1}`)
	if out := JSON(clean, r.String); string(out) != string(clean) {
		t.Errorf("clean changed: %s", out)
	}
}
