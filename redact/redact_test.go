package redact

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestRedactorString(t *testing.T) {
	r := New([]string{"hunter2", "sk-live-123456", "short", "", "sk-live-123456", "sk-live-123456-extra", "日本語の秘密"})
	cases := []struct{ in, want string }{
		{"", ""},
		{"nothing here", "nothing here"},
		{"pw=hunter2", "pw=[redacted]"},
		{"hunter2hunter2 and hunter2", "[redacted] and [redacted]"},
		{"key sk-live-123456-extra!", "key [redacted]!"},     // longest first
		{"key sk-live-123456-extrb", "key [redacted]-extrb"}, // the shorter one still matches
		{"short stays", "short stays"},                       // under MinLen
		{"sk-live-hunter2", "sk-live-[redacted]"},            // no false prefix match
		{"x日本語の秘密y", "x[redacted]y"},                         // six characters, more bytes
		{"sk-live-123456hunter2 end", "[redacted] end"},      // adjacent runs merge
		{"Bearer sk-live-123456\nhunter2", "Bearer [redacted]\n[redacted]"},
	}
	for _, tc := range cases {
		if got := r.String(tc.in); got != tc.want {
			t.Errorf("String(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestRedactorOverlap(t *testing.T) {
	// Neither secret may survive in part: the union of their occurrences
	// is one redacted run.
	r := New([]string{"abcdefgh", "efghijkl"})
	if got := r.String("<abcdefghijkl>"); got != "<[redacted]>" {
		t.Errorf("overlap: %q", got)
	}
	if got := r.String("aaabcdefghh efghijklabcdefgh"); got != "aa[redacted]h [redacted]" {
		t.Errorf("overlap: %q", got)
	}
	// Overlapping occurrences of one secret.
	if got := New([]string{"aaaaaa"}).String("baaaaaaaab"); got != "b[redacted]b" {
		t.Errorf("self overlap: %q", got)
	}
}

func TestRedactorSecretLikeMarker(t *testing.T) {
	// A secret that the marker itself would spell out must not come back.
	for _, secrets := range [][]string{
		{"redact"},
		{"[redacted]"},
		{"xx[red", "yyyyyyyy"},
		{"acted]zz", "yyyyyyyy"},
	} {
		r := New(secrets)
		for _, in := range []string{"redact", "[redacted]", "xx" + "yyyyyyyy", "yyyyyyyy" + "zz", "a redact b [redacted] c"} {
			out := r.String(in)
			for _, s := range secrets {
				if strings.Contains(out, s) {
					t.Errorf("New(%q).String(%q) = %q still contains %q", secrets, in, out, s)
				}
			}
			if again := r.String(out); again != out {
				t.Errorf("not idempotent: %q then %q", out, again)
			}
		}
	}
}

func TestNilAndEmptyRedactor(t *testing.T) {
	var r *Redactor
	if got := r.String("hunter2"); got != "hunter2" {
		t.Errorf("nil: %q", got)
	}
	if got := New(nil).String("hunter2"); got != "hunter2" {
		t.Errorf("empty: %q", got)
	}
	if got := New([]string{"abc", "12345"}).String("abc 12345"); got != "abc 12345" {
		t.Errorf("only short secrets: %q", got)
	}
}

func TestURLs(t *testing.T) {
	cases := []struct{ in, want string }{
		{"plain text", "plain text"},
		{`Post "http://user:pass@127.0.0.1:9/x?api_key=sk-live-123456": dial tcp: refused`, `Post "http://127.0.0.1:9/x": dial tcp: refused`},
		{"see https://h.example/a/b#access_token=abc then", "see https://h.example/a/b then"},
		{"HTTPS://Tok@H/p?q", "HTTPS://H/p"},
		{"https://a@b:c@h.example:8443/x/y", "https://h.example:8443/x/y"},
		{"two: http://x/1?a=1 and http://u:p@y/2?b=2.", "two: http://x/1 and http://y/2"},
		{"<http://h/?k=v>", "<http://h/>"},
		{"url=http://h/p@q", "url=http://h/p@q"}, // "@" in the path is not userinfo
		{"http://h", "http://h"},
		{"ftp://u:p@h/?x=1", "ftp://u:p@h/?x=1"}, // only http(s)
		{"xhttps://u:p@h/?x", "xhttps://h/"},
	}
	for _, tc := range cases {
		if got := URLs(tc.in); got != tc.want {
			t.Errorf("URLs(%q)\n got %q\nwant %q", tc.in, got, tc.want)
		}
	}
}

func FuzzRedact(f *testing.F) {
	f.Add("token=sk-live-123456&x=1", "sk-live-123456", "123456", "")
	f.Add("abcdefghijkl", "abcdefgh", "efghijkl", "cdefgh")
	f.Add("[redacted] redact", "redact", "[redacted]", "acted]")
	f.Add("aaaaaaaaaaaaa", "aaaaaa", "aaaaaaa", "b")
	f.Add("日本語の秘密です", "日本語の秘密", "秘密です", "\xff\xfe\xfd\xfc\xfb\xfa")
	f.Fuzz(func(t *testing.T, s, a, b, c string) {
		secrets := []string{a, b, c}
		r := New(secrets)
		out := r.String(s)
		for _, sec := range secrets {
			if utf8.RuneCountInString(sec) >= MinLen && strings.Contains(out, sec) {
				t.Fatalf("String(%q) = %q contains secret %q", s, out, sec)
			}
		}
		if again := r.String(out); again != out {
			t.Fatalf("not idempotent: %q -> %q -> %q", s, out, again)
		}
		half := len(s) / 2
		cut := r.Prefix(s, half)
		joined := r.Join([]string{s[:half], s[half:]}, "\n")
		for _, sec := range secrets {
			if utf8.RuneCountInString(sec) < MinLen {
				continue
			}
			if strings.Contains(cut, sec) || strings.Contains(joined, sec) || strings.Contains(strings.ReplaceAll(joined, "\n", ""), sec) && !strings.Contains(sec, "\n") && !strings.Contains(s, "\n") {
				t.Fatalf("Prefix %q / Join %q of %q holds %q", cut, joined, s, sec)
			}
		}
		if len(cut) > half {
			t.Fatalf("Prefix(%q, %d) = %q, longer", s, half, cut)
		}
		u := URLs(s)
		if again := URLs(u); again != u {
			t.Fatalf("URLs not idempotent: %q -> %q -> %q", s, u, again)
		}
	})
}
