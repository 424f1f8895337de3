// Package visible makes characters that would act unseen show as text:
// controls (a terminal's escape sequences, carriage returns), Unicode
// bidi controls that reorder what a reader sees (U+202A–U+202E,
// U+2066–U+2069), zero-width and other format characters (category Cf),
// line and paragraph separators, and the invisible Hangul fillers. Each
// becomes a JSON-style escape such as `\u202e`, so it is seen and does
// nothing; in JSON text the escape also means the same character, so
// escaped arguments are still the exact arguments.
//
// The adapters use it on everything a model, a tool or a chat message
// wrote before platform escaping (Slack, Discord) or printing (terminal).
package visible

import (
	"strings"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"
)

// Hidden reports whether r is shown escaped: C0 and C1 controls other
// than newline and tab, DEL, format characters (Cf), the line and
// paragraph separators, and the invisible Hangul fillers.
func Hidden(r rune) bool {
	switch {
	case r == '\n' || r == '\t':
		return false
	case r < 0x20 || (r >= 0x7f && r <= 0x9f):
		return true
	case r < 0xad:
		return false
	case r == '\u2028' || r == '\u2029':
		return true
	case r == '\u115f' || r == '\u1160' || r == '\u3164' || r == '\uffa0':
		return true
	}
	return unicode.Is(unicode.Cf, r)
}

// Bidi reports whether r is a bidi embedding, override or isolate
// control, the characters that reverse or reorder displayed text.
func Bidi(r rune) bool {
	return (r >= '\u202a' && r <= '\u202e') || (r >= '\u2066' && r <= '\u2069')
}

// Reveal replaces every Hidden character of s by its escape.
func Reveal(s string) string { return reveal(s, Hidden) }

// RevealProse is Reveal for free text such as a model's answer: it keeps
// the zero-width joiner and non-joiner (U+200D, U+200C), which emoji
// sequences and some scripts need and which reorder nothing.
func RevealProse(s string) string {
	return reveal(s, func(r rune) bool { return r != '\u200d' && r != '\u200c' && Hidden(r) })
}

// Escape is the escape Reveal writes for r: `\u202e`, or a surrogate pair
// such as `\udb40\udc41` beyond the Basic Multilingual Plane.
func Escape(r rune) string {
	const hex = "0123456789abcdef"
	one := func(b *strings.Builder, u rune) {
		b.WriteString(`\u`)
		for shift := 12; shift >= 0; shift -= 4 {
			b.WriteByte(hex[(u>>shift)&0xf])
		}
	}
	var b strings.Builder
	if r > 0xffff {
		hi, lo := utf16.EncodeRune(r)
		one(&b, hi)
		one(&b, lo)
		return b.String()
	}
	one(&b, r)
	return b.String()
}

// Contains reports whether s holds a Hidden character.
func Contains(s string) bool { return strings.IndexFunc(s, Hidden) >= 0 }

func reveal(s string, hide func(rune) bool) string {
	i := strings.IndexFunc(s, hide)
	if i < 0 {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 16)
	b.WriteString(s[:i])
	for _, r := range s[i:] {
		if hide(r) {
			b.WriteString(Escape(r))
		} else {
			b.WriteRune(r)
		}
	}
	return b.String()
}

// Preview is the start of s for a card, hidden characters escaped: at most
// maxChars characters (counting escapes as shown) and maxLines lines, with
// trailing newlines trimmed. hidden is how many of s's characters it
// leaves out.
func Preview(s string, maxChars, maxLines int) (text string, hidden int) {
	s = strings.TrimSpace(s)
	total := utf8.RuneCountInString(s)
	var b strings.Builder
	n, lines, shown := 0, 1, 0
	for _, r := range s {
		p := string(r)
		if Hidden(r) {
			p = Escape(r)
		}
		if r == '\n' {
			lines++
		}
		if n+utf8.RuneCountInString(p) > maxChars || lines > maxLines {
			break
		}
		b.WriteString(p)
		n += utf8.RuneCountInString(p)
		shown++
	}
	return strings.TrimRight(b.String(), "\n"), total - shown
}

// Clip keeps at most n characters of s, ending a cut text with "…"
// (which counts as one of the n).
func Clip(s string, n int) string {
	return ClipPieces(s, n, nil)
}

// ClipPieces writes s with each character replaced by piece(r) (an
// escape, say) and keeps at most n characters of the result: it cuts
// between source characters, never inside a piece, and ends a cut text
// with "…" (which counts as one of the n). A nil piece keeps characters
// as they are.
func ClipPieces(s string, n int, piece func(rune) string) string {
	if n <= 0 {
		return ""
	}
	var b strings.Builder
	count := 0 // characters written
	cut := -1  // bytes of b that fit before a "…", once known
	for _, r := range s {
		var p string
		if piece != nil {
			p = piece(r)
		} else {
			p = string(r)
		}
		pl := utf8.RuneCountInString(p)
		if cut < 0 && count+pl > n-1 {
			cut = b.Len()
		}
		if count+pl > n {
			return b.String()[:cut] + "…"
		}
		b.WriteString(p)
		count += pl
	}
	return b.String()
}
