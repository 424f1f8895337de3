package model

import (
	"context"
	"fmt"
	"time"
)

// WithRetry wraps p so that Generate retries Retryable errors (429, 5xx).
// It tries at most attempts times in all (at least once), waiting backoff,
// then 2*backoff, 4*backoff, ... between tries. Other errors come back at
// once, unchanged. When every try failed the last error is returned wrapped
// ("model: gave up after N attempts: ..."). sleep waits between tries; nil
// means a real timer. A cancelled ctx stops the retries.
func WithRetry(p Provider, attempts int, backoff time.Duration, sleep func(ctx context.Context, d time.Duration) error) Provider {
	if attempts < 1 {
		attempts = 1
	}
	if sleep == nil {
		sleep = sleepCtx
	}
	return &retrying{p: p, attempts: attempts, backoff: backoff, sleep: sleep}
}

type retrying struct {
	p        Provider
	attempts int
	backoff  time.Duration
	sleep    func(ctx context.Context, d time.Duration) error
}

func (r *retrying) Generate(ctx context.Context, req Request) (Message, error) {
	wait := r.backoff
	var lastErr error
	for i := range r.attempts {
		if i > 0 {
			if err := r.sleep(ctx, wait); err != nil {
				return Message{}, fmt.Errorf("model: retry stopped after %d attempts: %w (last error: %w)", i, err, lastErr)
			}
			wait *= 2
		}
		if err := ctx.Err(); err != nil {
			if lastErr == nil {
				return Message{}, err
			}
			return Message{}, fmt.Errorf("model: retry stopped after %d attempts: %w (last error: %w)", i, err, lastErr)
		}
		msg, err := r.p.Generate(ctx, req)
		if err == nil {
			return msg, nil
		}
		if !Retryable(err) {
			return Message{}, err
		}
		lastErr = err
	}
	return Message{}, fmt.Errorf("model: gave up after %d attempts: %w", r.attempts, lastErr)
}

// sleepCtx waits d or until ctx is done.
func sleepCtx(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
