package deploy

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode"
)

// The Markdown files the docs check reads: the repository's root pages
// and docs/.
func markdownFiles(t *testing.T, root string) []string {
	t.Helper()
	var files []string
	for _, pattern := range []string{"*.md", "docs/*.md"} {
		m, err := filepath.Glob(filepath.Join(root, pattern))
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, m...)
	}
	if len(files) < 2 {
		t.Fatalf("found %d Markdown files under %s", len(files), root)
	}
	return files
}

var (
	fence      = regexp.MustCompile("^\\s*(```|~~~)")
	codeSpan   = regexp.MustCompile("`+[^`]*`+")
	mdLink     = regexp.MustCompile(`\]\(([^()\s]*(?:\([^()\s]*\)[^()\s]*)*)\)`)
	heading    = regexp.MustCompile(`^(#{1,6})\s+(.*?)\s*#*\s*$`)
	linkInText = regexp.MustCompile(`\[([^\]]*)\]\([^)]*\)`)
)

// prose is a Markdown text's lines outside fenced code blocks, with code
// spans blanked: a link or a heading in code is no link or heading.
func prose(text string) []string {
	var out []string
	in := false
	for _, line := range strings.Split(text, "\n") {
		if fence.MatchString(line) {
			in = !in
			out = append(out, "")
			continue
		}
		if in {
			out = append(out, "")
			continue
		}
		out = append(out, line)
	}
	return out
}

// anchors are the ids GitHub gives a Markdown file's headings: the
// heading's text, lower case, without punctuation, spaces made hyphens;
// a repeated one gets -1, -2, ….
func anchors(text string) map[string]bool {
	ids := map[string]bool{}
	seen := map[string]int{}
	for _, line := range prose(text) {
		m := heading.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		h := linkInText.ReplaceAllString(m[2], "$1")
		var b strings.Builder
		for _, r := range strings.ToLower(h) {
			switch {
			case r == ' ':
				b.WriteRune('-')
			case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
				b.WriteRune(r)
			}
		}
		id := b.String()
		if n := seen[id]; n > 0 {
			ids[id+"-"+strconv.Itoa(n)] = true
		} else {
			ids[id] = true
		}
		seen[id]++
	}
	return ids
}

// Every relative link in the README, the root pages and docs/ resolves:
// the file or directory exists, and a #fragment names a heading of the
// Markdown file it points at. A page moved or a heading renamed without
// its links fails here.
func TestDocsLinksResolve(t *testing.T) {
	root := repoRoot(t)
	texts := map[string]string{}
	for _, f := range markdownFiles(t, root) {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		texts[f] = string(data)
	}
	anchorsOf := func(path string) (map[string]bool, bool) {
		text, ok := texts[path]
		if !ok {
			data, err := os.ReadFile(path)
			if err != nil {
				return nil, false
			}
			text = string(data)
		}
		return anchors(text), true
	}
	links := 0
	for f, text := range texts {
		rel, _ := filepath.Rel(root, f)
		for i, line := range prose(text) {
			line = codeSpan.ReplaceAllString(line, "")
			for _, m := range mdLink.FindAllStringSubmatch(line, -1) {
				target := m[1]
				if target == "" || strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
					continue
				}
				links++
				file, frag, _ := strings.Cut(target, "#")
				path := f
				if file != "" {
					path = filepath.Join(filepath.Dir(f), filepath.FromSlash(file))
					if _, err := os.Stat(path); err != nil {
						t.Errorf("%s:%d: link %q: %s does not exist", rel, i+1, target, file)
						continue
					}
				}
				if frag == "" {
					continue
				}
				if !strings.HasSuffix(path, ".md") {
					t.Errorf("%s:%d: link %q: a #fragment on a file that is not Markdown", rel, i+1, target)
					continue
				}
				ids, ok := anchorsOf(path)
				if !ok || !ids[frag] {
					t.Errorf("%s:%d: link %q: no heading with the id %q", rel, i+1, target, frag)
				}
			}
		}
	}
	if links < 50 {
		t.Errorf("checked %d relative links; the docs hold more, so the link pattern is broken", links)
	}
}

// The anchor ids the link check expects are GitHub's.
func TestAnchors(t *testing.T) {
	got := anchors("# Where cards go: approvals channel, DMs, escalation, Extend, Edit…\n" +
		"## Allow all / Deny all\n## Edit… (allow with edit)\n```\n# not a heading\n```\n" +
		"## The `card-sync` job\n## Rules\n## Rules\n")
	for _, want := range []string{
		"where-cards-go-approvals-channel-dms-escalation-extend-edit",
		"allow-all--deny-all", "edit-allow-with-edit", "the-card-sync-job", "rules", "rules-1",
	} {
		if !got[want] {
			t.Errorf("no anchor %q in %v", want, got)
		}
	}
	if got["not-a-heading"] {
		t.Error("a line in a code block made an anchor")
	}
}
