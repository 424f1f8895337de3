package discord

import (
	"strings"
	"unicode/utf8"

	"github.com/airlockhq/airlock/adapters/internal/visible"
)

// Escaping: everything a model, a tool or a chat message wrote is shown
// as inert text. Discord markdown is neutralised by escaping: a backslash
// before any ASCII punctuation mark shows the mark itself, so escaped text
// reads exactly as written while nothing in it is markup: no bold,
// spoilers (||x||), quotes, headings, lists, masked links ([x](url)),
// mentions (<@…>, <@&…>, @everyone, @here), timestamps, custom emoji,
// :shortcodes:, and no autolinked URL (the ":" of "https:" is escaped).
// Characters that would act unseen (bidi controls, zero-width and other
// format characters, controls) are first written as visible escapes such
// as \u202e (package visible).
//
// Inside a code block Discord parses nothing (no markdown, no mentions)
// and shows backslashes as they are, so arguments go in a ```json block
// unescaped, except that a backtick is written \u0060: in JSON that
// escape means the same character, and no backtick run can close the
// block.

// escapeMarkdown makes s inert Discord markdown.
func escapeMarkdown(s string) string {
	var b strings.Builder
	b.Grow(len(s) + len(s)/4)
	for _, r := range visible.Reveal(s) {
		b.WriteString(escapeRune(r))
	}
	return b.String()
}

// escapeClip is escapeMarkdown keeping at most n characters of the
// result: it cuts between source characters (never inside an escape) and
// ends a cut text with "…".
func escapeClip(s string, n int) string {
	return visible.ClipPieces(visible.Reveal(s), n, escapeRune)
}

// escapeRune is one revealed character as escaped markdown.
func escapeRune(r rune) string {
	if r < utf8.RuneSelf && isASCIIPunct(byte(r)) {
		return `\` + string(r)
	}
	return string(r)
}

func isASCIIPunct(c byte) bool {
	return (c >= '!' && c <= '/') || (c >= ':' && c <= '@') || (c >= '[' && c <= '`') || (c >= '{' && c <= '~')
}

// codeSafe is one source character as it shows in a code block: hidden
// characters escaped, a backtick as \u0060.
func codeSafe(r rune) string {
	switch {
	case r == '`':
		return `\u0060`
	case visible.Hidden(r):
		return visible.Escape(r)
	}
	return string(r)
}

// codeText is s as it shows in a code block (see codeSafe).
func codeText(s string) string {
	var b strings.Builder
	b.Grow(len(s))
	for _, r := range s {
		b.WriteString(codeSafe(r))
	}
	return b.String()
}
