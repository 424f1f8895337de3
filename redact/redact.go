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

// Redactor replaces known secret values in text. A nil *Redactor redacts
// nothing. It is safe for concurrent use.
type Redactor struct {
	secrets []string // deduplicated, longest first
}

// New returns a Redactor of the secrets at least MinLen characters long;
// shorter ones are ignored.
func New(secrets []string) *Redactor {
	r := &Redactor{}
	for _, s := range secrets {
		if utf8.RuneCountInString(s) >= MinLen {
			r.secrets = append(r.secrets, s)
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
	// depth[i] counts the occurrences starting at i minus those ending at i.
	var depth []int
	for _, sec := range r.secrets {
		for i := 0; i <= len(s)-len(sec); {
			j := strings.Index(s[i:], sec)
			if j < 0 {
				break
			}
			if depth == nil {
				depth = make([]int, len(s)+1)
			}
			depth[i+j]++
			depth[i+j+len(sec)]--
			i += j + 1
		}
	}
	if depth == nil {
		return s, false
	}
	var b strings.Builder
	b.Grow(len(s))
	open := 0
	for i := 0; i < len(s); i++ {
		was := open
		open += depth[i]
		switch {
		case open > 0 && was == 0:
			b.WriteString(Marker)
		case open == 0:
			b.WriteByte(s[i])
		}
	}
	return b.String(), true
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
