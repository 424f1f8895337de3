// Package testkit holds small helpers the tests of several packages
// share: polling for a condition, a buffer safe for concurrent writers,
// and checking that a text holds every expected piece.
package testkit

import (
	"bytes"
	"strings"
	"sync"
	"testing"
	"time"
)

// Eventually polls cond until it holds, failing t when within passes
// first; what names the awaited condition in the failure.
func Eventually(t testing.TB, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// Buffer is a bytes.Buffer safe for concurrent use, e.g. a log written
// by a server under test and read by the test.
type Buffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// String returns what was written so far.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// ContainsAll reports, as an error of t each, every want that got does
// not contain; what names got in the message ("output", "the card").
func ContainsAll(t testing.TB, what, got string, wants ...string) {
	t.Helper()
	for _, want := range wants {
		if !strings.Contains(got, want) {
			t.Errorf("%s lacks %q:\n%s", what, want, got)
		}
	}
}
