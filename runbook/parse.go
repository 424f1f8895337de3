package runbook

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
	"unicode"
	"unicode/utf8"
)

// MaxCommandBytes bounds a `run` command's text.
const MaxCommandBytes = 16 << 10

// ErrSyntax is wrapped by every error of ParseCommand.
var ErrSyntax = errors.New("run command")

var paramKeyPattern = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// ParseCommand parses the text of a `run` command after the word `run`
// (after the bot's mention, or the terminal's `/run`): a runbook's name,
// then parameters written key=value. A value may be quoted, "…" (with
// backslash escapes \" \\ \n \t) or '…' (as it is), and Slack's or a
// phone's curly quotes “…” count as "…". A key given twice, a word
// without =, an unclosed quote or text right after a closing quote is an
// error (wrapping ErrSyntax) saying what is wrong.
func ParseCommand(text string) (name string, args map[string]string, err error) {
	fail := func(format string, a ...any) (string, map[string]string, error) {
		return "", nil, fmt.Errorf("%w: %s", ErrSyntax, fmt.Sprintf(format, a...))
	}
	if len(text) > MaxCommandBytes {
		return fail("longer than %d bytes", MaxCommandBytes)
	}
	if !utf8.ValidString(text) {
		return fail("not valid UTF-8")
	}
	s := strings.TrimLeftFunc(text, unicode.IsSpace)
	end := strings.IndexFunc(s, unicode.IsSpace)
	if end < 0 {
		end = len(s)
	}
	name, s = s[:end], s[end:]
	switch {
	case name == "":
		return fail("which runbook? write run <name> key=value …")
	case strings.ContainsAny(name, "=\"'“”"):
		return fail("%q: write the runbook's name first, then its parameters as key=value", name)
	}
	args = map[string]string{}
	for {
		s = strings.TrimLeftFunc(s, unicode.IsSpace)
		if s == "" {
			return name, args, nil
		}
		eq := strings.IndexFunc(s, func(r rune) bool { return r == '=' || unicode.IsSpace(r) })
		if eq < 0 || s[eq] != '=' {
			word := s
			if eq >= 0 {
				word = s[:eq]
			}
			return fail("%q: write parameters as key=value", word)
		}
		key := s[:eq]
		if !paramKeyPattern.MatchString(key) {
			if key == "" {
				return fail("a value without its key: write key=value")
			}
			return fail("%q is not a parameter name (letters, digits, _ and -)", key)
		}
		if _, dup := args[key]; dup {
			return fail("%s is given twice", key)
		}
		s = s[eq+1:]
		val, rest, err := parseValue(s)
		if err != nil {
			return fail("%s: %v", key, err)
		}
		args[key], s = val, rest
	}
}

// parseValue reads one value at the start of s and returns the rest.
func parseValue(s string) (val, rest string, err error) {
	r, size := utf8.DecodeRuneInString(s)
	var closing rune
	switch r {
	case '"':
		closing = '"'
	case '“':
		closing = '”'
	case '\'':
		closing = '\''
	default:
		end := strings.IndexFunc(s, unicode.IsSpace)
		if end < 0 {
			end = len(s)
		}
		v := s[:end]
		if strings.ContainsAny(v, "\"'“”") {
			return "", "", fmt.Errorf("%q: quote the whole value, e.g. key=\"two words\"", v)
		}
		return v, s[end:], nil
	}
	var b strings.Builder
	i := size
	for i < len(s) {
		c, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case c == closing || (closing == '”' && c == '"'):
			rest = s[i+n:]
			if next, _ := utf8.DecodeRuneInString(rest); rest != "" && !unicode.IsSpace(next) {
				return "", "", errors.New("a closing quote must be followed by a space")
			}
			return b.String(), rest, nil
		case c == '\\' && closing != '\'':
			e, m := utf8.DecodeRuneInString(s[i+n:])
			if i+n >= len(s) {
				return "", "", errors.New("the value ends in a lone backslash")
			}
			switch e {
			case 'n':
				b.WriteByte('\n')
			case 't':
				b.WriteByte('\t')
			case '"', '\\', '\'', '”', '“':
				b.WriteRune(e)
			default:
				return "", "", fmt.Errorf(`\%c is not an escape (use \" \\ \n \t)`, e)
			}
			i += n + m
		default:
			b.WriteRune(c)
			i += n
		}
	}
	return "", "", errors.New("the quote is not closed")
}
