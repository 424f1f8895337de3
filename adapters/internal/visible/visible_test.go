package visible

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

func TestReveal(t *testing.T) {
	for in, want := range map[string]string{
		"plain text\n\twith tabs":       "plain text\n\twith tabs",
		"evil\u202egnp.exe":             `evil\u202egnp.exe`,
		"a\u2066b\u2069c":               `a\u2066b\u2069c`,
		"zero\u200bwidth\ufeff":         `zero\u200bwidth\ufeff`,
		"\x1b[2J\x1b]0;title\x07\r":     `\u001b[2J\u001b]0;title\u0007\u000d`,
		"c1 \u009b31m":                  `c1 \u009b31m`,
		"tag \U000e0041\U000e007f":      `tag \udb40\udc41\udb40\udc7f`,
		"soft\u00adhyphen \u3164filler": `soft\u00adhyphen \u3164filler`,
		"line\u2028sep":                 `line\u2028sep`,
		"emoji 👩\u200d💻 and é ok":       `emoji 👩\u200d💻 and é ok`,
		"nothing hidden: ±×÷ ¡ ¬ « » ẞ": "nothing hidden: ±×÷ ¡ ¬ « » ẞ",
	} {
		if got := Reveal(in); got != want {
			t.Errorf("Reveal(%q) = %q, want %q", in, got, want)
		}
		if Contains(Reveal(in)) {
			t.Errorf("Reveal(%q) still hides something", in)
		}
	}
	if got := RevealProse("👩\u200d💻 \u200c \u202e"); got != "👩\u200d💻 \u200c \\u202e" {
		t.Errorf("RevealProse: %q", got)
	}
}

// In a JSON string the escapes mean the characters they replace, so
// revealed arguments are still the same arguments.
func TestRevealKeepsJSONMeaning(t *testing.T) {
	raw := "{\"name\":\"a\u202eb\u200bc\U000e0041d\"}"
	var a, b map[string]string
	if err := json.Unmarshal([]byte(raw), &a); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(Reveal(raw)), &b); err != nil {
		t.Fatalf("revealed JSON does not parse: %v", err)
	}
	if a["name"] != b["name"] {
		t.Fatalf("meaning changed: %q vs %q", a["name"], b["name"])
	}
}

func FuzzReveal(f *testing.F) {
	f.Add("a\u202eb\u200b\x1b[31m\U000e0041")
	f.Fuzz(func(t *testing.T, s string) {
		out := Reveal(s)
		for _, r := range out {
			if Hidden(r) || Bidi(r) || unicode.Is(unicode.Cf, r) {
				t.Fatalf("Reveal left %U in %q", r, out)
			}
		}
		if !Contains(s) && out != s {
			t.Fatalf("changed text without hidden characters: %q -> %q", s, out)
		}
		if strings.Count(out, "\n") != strings.Count(s, "\n") {
			t.Fatal("line breaks changed")
		}
	})
}

func TestClipPieces(t *testing.T) {
	esc := func(r rune) string {
		if r == '<' {
			return "&lt;"
		}
		return string(r)
	}
	for _, tc := range []struct {
		in    string
		n     int
		piece func(rune) string
		want  string
	}{
		{"", 5, nil, ""},
		{"abc", 0, nil, ""},
		{"abc", 3, nil, "abc"},
		{"abcd", 3, nil, "ab…"},
		{"abcd", 1, nil, "…"},
		{"héllo wörld", 6, nil, "héllo…"},
		{"a<b", 6, esc, "a&lt;b"},  // fits exactly
		{"a<bc", 6, esc, "a&lt;…"}, // the cut after a whole piece
		{"ab<c", 6, esc, "ab…"},    // never inside "&lt;"
		{"<<", 8, esc, "&lt;&lt;"}, // pieces only
		{"<<<", 8, esc, "&lt;…"},
	} {
		if got := ClipPieces(tc.in, tc.n, tc.piece); got != tc.want {
			t.Errorf("ClipPieces(%q, %d) = %q, want %q", tc.in, tc.n, got, tc.want)
		}
		if got := ClipPieces(tc.in, tc.n, tc.piece); utf8.RuneCountInString(got) > max(tc.n, 0) {
			t.Errorf("ClipPieces(%q, %d) = %q: longer than %d", tc.in, tc.n, got, tc.n)
		}
	}
	if got := Clip("abcdef", 4); got != "abc…" {
		t.Errorf("Clip = %q", got)
	}
}
