package redact

import (
	"encoding/base64"
	"net/url"
	"slices"
	"strings"
	"unicode/utf8"
)

// Forms returns s and the encodings it reaches a tool's output, a log or a
// webhook in, deduplicated:
//   - base64, standard and URL alphabets, with and without padding, and the
//     part of its encoding that does not depend on its neighbours at each of
//     the three alignments in a longer encoded text (a secret inside
//     "user:secret" in a Basic auth header);
//   - URL-escaped: url.QueryEscape and url.PathEscape, with upper and lower
//     case hex;
//   - JSON-escaped: as Go's encoding/json writes it (\u003c, \u003e, \u0026;
//     \" and \\), without HTML escaping, with "/" as \/, with non-ASCII as
//     \uXXXX, in upper and lower case hex; and escaped twice (JSON in a JSON
//     string);
//   - the URL- and JSON-escaped forms of its base64 forms.
func Forms(s string) []string {
	out := []string{s}
	b64 := base64Forms(s)
	out = append(out, b64...)
	out = append(out, urlForms(s)...)
	js := jsonForms(s)
	out = append(out, js...)
	for _, j := range js {
		out = append(out, jsonForms(j)...)
	}
	for _, b := range b64 {
		out = append(out, urlForms(b)...)
		out = append(out, jsonForms(b)...)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

func base64Forms(s string) []string {
	b := []byte(s)
	var out []string
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		out = append(out, enc.EncodeToString(b))
	}
	// In a longer encoded text the secret starts at byte offset 0, 1 or 2
	// of a 3-byte group. Character j of the encoding holds bits 6j..6j+5;
	// those wholly inside the secret's bits are the same whatever
	// surrounds it.
	n := len(b)
	for shift := range 3 {
		lo := (8*shift + 5) / 6
		hi := 8 * (shift + n) / 6
		for _, enc := range []*base64.Encoding{base64.RawStdEncoding, base64.RawURLEncoding} {
			e := enc.EncodeToString(append(make([]byte, shift), b...))
			if hi <= len(e) && hi-lo >= MinLen {
				out = append(out, e[lo:hi])
			}
		}
	}
	return out
}

func urlForms(s string) []string {
	var out []string
	for _, e := range []string{url.QueryEscape(s), url.PathEscape(s)} {
		out = append(out, e, lowerHex(e))
	}
	return out
}

// lowerHex writes the hex digits of %XX escapes in lower case.
func lowerHex(s string) string {
	b := []byte(s)
	for i := 0; i+2 < len(b); i++ {
		if b[i] == '%' {
			for k := i + 1; k <= i+2; k++ {
				if b[k] >= 'A' && b[k] <= 'F' {
					b[k] += 'a' - 'A'
				}
			}
			i += 2
		}
	}
	return string(b)
}

// jsonForms are the contents of JSON strings holding s, as encoders write
// them: every combination of HTML escaping, "\/", ASCII only and hex case.
func jsonForms(s string) []string {
	var out []string
	for flags := range 16 {
		out = append(out, jsonEscape(s, flags&1 != 0, flags&2 != 0, flags&4 != 0, flags&8 != 0))
	}
	return out
}

func jsonEscape(s string, html, slash, ascii, upper bool) string {
	digits := "0123456789abcdef"
	if upper {
		digits = "0123456789ABCDEF"
	}
	var b strings.Builder
	u := func(r rune) {
		b.WriteString(`\u`)
		for shift := 12; shift >= 0; shift -= 4 {
			b.WriteByte(digits[r>>shift&0xf])
		}
	}
	for _, r := range s {
		switch {
		case r == '"':
			b.WriteString(`\"`)
		case r == '\\':
			b.WriteString(`\\`)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r == '\b':
			b.WriteString(`\b`)
		case r == '\f':
			b.WriteString(`\f`)
		case r < 0x20, r == 0x2028, r == 0x2029:
			u(r)
		case html && (r == '<' || r == '>' || r == '&'):
			u(r)
		case slash && r == '/':
			b.WriteString(`\/`)
		case ascii && r > 0x7f:
			if r > 0xffff {
				r -= 0x10000
				u(0xd800 + r>>10)
				u(0xdc00 + r&0x3ff)
			} else {
				u(r)
			}
		case r == utf8.RuneError:
			u(r)
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}
