package web_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// The console's templates lay out words and choose none: outside their
// actions, tags and attributes, no text of theirs holds a letter (the
// words are card.ConsoleWords, the card's, or a request's).
func TestTemplatesChooseNoWords(t *testing.T) {
	files, err := filepath.Glob("templates/*.html")
	if err != nil || len(files) == 0 {
		t.Fatalf("templates: %v %v", files, err)
	}
	actions := regexp.MustCompile(`(?s)\{\{.*?\}\}`)
	tags := regexp.MustCompile(`(?s)<[^>]*>`)
	letters := regexp.MustCompile(`\pL{2,}`)
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		text := tags.ReplaceAllString(actions.ReplaceAllString(string(b), " "), " ")
		text = strings.ReplaceAll(text, "&amp;", " ")
		if w := letters.FindAllString(text, -1); len(w) > 0 {
			t.Errorf("%s writes words of its own: %q", f, w)
		}
	}
}
