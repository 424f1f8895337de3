package modeltest

import (
	"context"
	"sync"
	"time"
)

// Sleeper is a RetryPolicy.Sleep that does not sleep: it records each wait
// and returns at once (ctx's error if ctx is done). Safe for concurrent
// use; the zero value is ready.
type Sleeper struct {
	mu    sync.Mutex
	waits []time.Duration
}

// Sleep records d and returns ctx.Err().
func (s *Sleeper) Sleep(ctx context.Context, d time.Duration) error {
	s.mu.Lock()
	s.waits = append(s.waits, d)
	s.mu.Unlock()
	return ctx.Err()
}

// Waits returns the waits asked for so far, in order.
func (s *Sleeper) Waits() []time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]time.Duration(nil), s.waits...)
}
