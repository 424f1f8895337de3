// Package redact removes secrets from text meant for people, logs and the
// model: a Redactor replaces known secret values (e.g. what ${ENV} expanded
// to in the config) with "[redacted]", and URLs strips the userinfo, query
// string and fragment of http(s) URLs found in free text, such as error
// messages from other libraries.
package redact

import (
	"cmp"
	"regexp"
	"slices"
	"strings"
	"unicode/utf8"
)

// Marker replaces every secret.
const Marker = "[redacted]"

// MinLen is the length in characters below which a value is not treated as a
// secret: redacting short values would mangle ordinary text.
const MinLen = 6

// Redactor replaces known secret values in text, as written and in the
// encodings a secret travels in (see Forms). A nil *Redactor redacts
// nothing. It is safe for concurrent use.
type Redactor struct {
	secrets []string // every form, deduplicated, longest first
}

// New returns a Redactor of the secrets at least MinLen characters long,
// each with its encoded forms (Forms); shorter ones are ignored.
func New(secrets []string) *Redactor {
	r := &Redactor{}
	for _, s := range secrets {
		if utf8.RuneCountInString(s) >= MinLen {
			r.secrets = append(r.secrets, Forms(s)...)
		}
	}
	slices.SortFunc(r.secrets, func(a, b string) int {
		if c := cmp.Compare(len(b), len(a)); c != 0 {
			return c
		}
		return strings.Compare(a, b)
	})
	r.secrets = slices.Compact(r.secrets)
	return r
}

// String returns s with every occurrence of a secret replaced by Marker.
// Overlapping or adjacent occurrences become one Marker, so no part of a
// secret is left next to it. The result contains no secret, and redacting it
// again changes nothing.
func (r *Redactor) String(s string) string {
	if r == nil || len(r.secrets) == 0 || s == "" {
		return s
	}
	out, found := r.mark(s)
	if !found {
		return s
	}
	if !r.contains(out) {
		return out
	}
	// A secret that shares text with the marker (e.g. "redacted" or
	// "xx[red") can reappear around it. Then drop the secrets instead, until
	// none is left: each pass shortens the text, so this ends.
	out = s
	for r.contains(out) {
		for _, sec := range r.secrets {
			out = strings.ReplaceAll(out, sec, "")
		}
	}
	return out
}

// mark replaces each maximal run of bytes covered by secret occurrences with
// Marker, and reports whether there was any.
func (r *Redactor) mark(s string) (string, bool) {
	runs := r.runs(s)
	if len(runs) == 0 {
		return s, false
	}
	return apply(s, runs), true
}

// runs returns the maximal runs of bytes of s covered by secret
// occurrences, in order: overlapping or adjacent occurrences are one run.
func (r *Redactor) runs(s string) [][2]int {
	if r == nil {
		return nil
	}
	var iv [][2]int
	for _, sec := range r.secrets {
		for i := 0; i <= len(s)-len(sec); {
			j := strings.Index(s[i:], sec)
			if j < 0 {
				break
			}
			iv = append(iv, [2]int{i + j, i + j + len(sec)})
			i += j + 1
		}
	}
	return merge(iv)
}

// merge sorts intervals and joins those that overlap or touch.
func merge(iv [][2]int) [][2]int {
	if len(iv) == 0 {
		return nil
	}
	slices.SortFunc(iv, func(a, b [2]int) int { return cmp.Compare(a[0], b[0]) })
	out := iv[:1]
	for _, x := range iv[1:] {
		last := &out[len(out)-1]
		if x[0] <= last[1] {
			last[1] = max(last[1], x[1])
			continue
		}
		out = append(out, x)
	}
	return out
}

// apply replaces each run of s with Marker.
func apply(s string, runs [][2]int) string {
	var b strings.Builder
	b.Grow(len(s))
	at := 0
	for _, run := range runs {
		b.WriteString(s[at:run[0]])
		b.WriteString(Marker)
		at = run[1]
	}
	b.WriteString(s[at:])
	return b.String()
}

// Join returns parts joined with sep, redacted as one text: a secret is
// found within a part, in the joined text, and across the boundary of
// parts as if they were joined with nothing (a secret a server split in
// two). Such a secret becomes one Marker, the separator inside it gone.
func (r *Redactor) Join(parts []string, sep string) string {
	joined := strings.Join(parts, sep)
	if r == nil || len(r.secrets) == 0 {
		return joined
	}
	concat := strings.Join(parts, "")
	runs := r.runs(joined)
	if across := r.runs(concat); len(across) > 0 {
		// at[i] is where byte i of concat is in joined.
		at := make([]int, 0, len(concat))
		j := 0
		for k, p := range parts {
			if k > 0 {
				j += len(sep)
			}
			for range len(p) {
				at = append(at, j)
				j++
			}
		}
		for _, run := range across {
			runs = append(runs, [2]int{at[run[0]], at[run[1]-1] + 1})
		}
		runs = merge(runs)
	}
	if len(runs) == 0 {
		return joined
	}
	// Marker-like secrets may reappear: String handles them.
	return r.String(apply(joined, runs))
}

// MaxLen is the length in bytes of the longest secret form; 0 without any.
// A text cut from a longer one must extend MaxLen bytes past the cut for
// Prefix to see a secret that crosses it.
func (r *Redactor) MaxLen() int {
	if r == nil || len(r.secrets) == 0 {
		return 0
	}
	return len(r.secrets[0])
}

// Prefix returns s redacted and cut to at most max bytes: the cut never
// falls inside a secret (one crossing it is a whole Marker if that fits,
// else dropped, never left in part), a Marker or a rune. When s is the start of a longer text, it must
// hold at least max+MaxLen() bytes (or all of the text).
func (r *Redactor) Prefix(s string, max int) string {
	if max < 0 {
		max = 0
	}
	if len(s) > max {
		c := runeCut(s, max)
		for _, run := range r.runs(s) {
			if run[0] < c && c < run[1] {
				c = run[1]
				break
			}
		}
		s = s[:c]
	}
	out := r.String(s)
	if len(out) <= max {
		return out
	}
	c := runeCut(out, max)
	from := c - len(Marker) + 1
	if from < 0 {
		from = 0
	}
	if k := strings.Index(out[from:], Marker); k >= 0 && from+k < c {
		c = from + k
	}
	return out[:c]
}

// runeCut is the largest cut of s at most max that does not split a rune.
func runeCut(s string, max int) int {
	if max >= len(s) {
		return len(s)
	}
	c := max
	for c > 0 && c > max-utf8.UTFMax && !utf8.RuneStart(s[c]) {
		c--
	}
	return c
}

func (r *Redactor) contains(s string) bool {
	for _, sec := range r.secrets {
		if strings.Contains(s, sec) {
			return true
		}
	}
	return false
}

// urlPattern matches an http(s) URL in free text: the scheme, then anything
// up to white space, a quote or an angle bracket.
var urlPattern = regexp.MustCompile("(?i)https?://[^\\s\"'`<>]*")

// URLs returns s with the userinfo, query string and fragment removed from
// every http(s) URL in it: "https://u:p@h/x?key=v#f" becomes "https://h/x".
// Everything of a URL from its first "?" or "#" on is dropped, up to white
// space, a quote or an angle bracket.
func URLs(s string) string {
	return urlPattern.ReplaceAllStringFunc(s, stripURL)
}

// stripURL strips one URL matched by urlPattern.
func stripURL(u string) string {
	if i := strings.IndexAny(u, "?#"); i >= 0 {
		u = u[:i]
	}
	scheme := strings.Index(u, "://") + len("://")
	authority := u[scheme:]
	if i := strings.IndexByte(authority, '/'); i >= 0 {
		authority = authority[:i]
	}
	if at := strings.LastIndexByte(authority, '@'); at >= 0 {
		u = u[:scheme] + u[scheme+at+1:]
	}
	return u
}
