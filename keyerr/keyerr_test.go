package keyerr

import (
	"errors"
	"fmt"
	"io"
	"testing"
)

func TestErrorNamesTheKeyAndUnwraps(t *testing.T) {
	err := fmt.Errorf("outer: %w", Wrap("tools[0].url", io.EOF))
	var ke *Error
	if !errors.As(err, &ke) || ke.Key != "tools[0].url" || !errors.Is(err, io.EOF) {
		t.Fatalf("%v: As %v, Is %v", err, errors.As(err, &ke), errors.Is(err, io.EOF))
	}
	if got := New("a.b", "%q is not one of %s", "x", "y").Error(); got != `a.b: "x" is not one of y` {
		t.Fatalf("message %q", got)
	}
}

func TestListNamesTheItemAndTheEarlierOne(t *testing.T) {
	check := func(s, key string) error {
		if s == "" {
			return New(key, "empty")
		}
		return nil
	}
	id := func(s string) string { return s }
	dup := func(s, key string, first int) error { return New(key+".name", "%q is also s[%d]", s, first) }
	if err := List("s", []string{"a", "b"}, check, id, dup); err != nil {
		t.Fatal(err)
	}
	if err := List("s", []string{"a", "b", "a"}, check, id, dup); err == nil || err.Error() != `s[2].name: "a" is also s[0]` {
		t.Fatalf("duplicate: %v", err)
	}
	if err := List("s", []string{"a", "", "a"}, check, id, dup); err == nil || err.Error() != "s[1]: empty" {
		t.Fatalf("the first problem: %v", err)
	}
}
