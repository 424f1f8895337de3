package model

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"
)

// Retries of model requests happen in one layer: WithRetryPolicy. The
// client libraries' own retries stay off (model/openai sets
// option.WithMaxRetries(0); model/gemini sets no HTTPOptions.RetryOptions,
// which means a single try), so a 429 is never retried by two layers. The
// libraries' retries do not fit: both sleep on their own timers (tests
// could not control time, and no notice could be posted before a long
// wait), genai ignores Gemini's RetryInfo, and openai-go gives up at once
// when Retry-After exceeds its limit instead of waiting the longest it may.

// Defaults of a RetryPolicy's zero fields.
const (
	DefaultAttempts    = 10
	DefaultBackoff     = time.Second
	DefaultMaxWait     = time.Minute
	DefaultBudget      = 3 * time.Minute
	DefaultNoticeAfter = 5 * time.Second
)

// RetryPolicy says how WithRetryPolicy retries. Its zero value is the
// default policy: up to 10 tries, backoff from 1 s, at most 60 s per wait
// and 3 min of waiting in all, notices for waits of 5 s or more.
//
// Between two tries of a Retryable error the wait is:
//
//   - when the provider asked for a delay h (RetryAfter: Retry-After,
//     retry-after-ms, Gemini's RetryInfo): h plus a jitter of up to
//     h/10 + 1 s, so somewhere in [h, h + h/10 + 1 s), cut to MaxWait. It
//     is never below h unless h itself is over MaxWait, when it is exactly
//     MaxWait (the next try then learns how long is left).
//   - otherwise full jitter on an exponential backoff: uniform in
//     [0, min(MaxWait, Backoff·2^n)) before the (n+2)th try.
//
// The waits add up to at most Budget: a wait is shortened to what is left
// of it, and when what is left is less than the provider's delay (or
// nothing), the retries stop with the last error. They also stop, at once,
// when the wait would pass ctx's deadline, and promptly when ctx is
// cancelled during a wait.
type RetryPolicy struct {
	// Attempts is the most tries in all, the first included; 0 means
	// DefaultAttempts, a negative value one try.
	Attempts int
	// Backoff is the ceiling of the first backoff wait, doubled for each
	// later one; 0 means DefaultBackoff.
	Backoff time.Duration
	// MaxWait caps every single wait, a provider's delay included; 0 means
	// DefaultMaxWait.
	MaxWait time.Duration
	// Budget bounds the sum of the waits; 0 means DefaultBudget.
	Budget time.Duration
	// NoticeAfter is the shortest wait reported to the WithWaitNotice hook
	// of the request's context; 0 means DefaultNoticeAfter.
	NoticeAfter time.Duration
	// Sleep waits d, or less when ctx is done, and then returns ctx.Err();
	// nil means a real timer. Tests inject their own.
	Sleep func(ctx context.Context, d time.Duration) error
	// Rand returns the jitter fraction, uniform in [0, 1); nil means
	// math/rand/v2. It must be safe for concurrent use.
	Rand func() float64
}

func (p RetryPolicy) withDefaults() RetryPolicy {
	if p.Attempts == 0 {
		p.Attempts = DefaultAttempts
	}
	if p.Attempts < 1 {
		p.Attempts = 1
	}
	if p.Backoff <= 0 {
		p.Backoff = DefaultBackoff
	}
	if p.MaxWait <= 0 {
		p.MaxWait = DefaultMaxWait
	}
	if p.Budget <= 0 {
		p.Budget = DefaultBudget
	}
	if p.NoticeAfter <= 0 {
		p.NoticeAfter = DefaultNoticeAfter
	}
	if p.Sleep == nil {
		p.Sleep = sleepCtx
	}
	if p.Rand == nil {
		p.Rand = rand.Float64
	}
	return p
}

// WithRetryPolicy wraps p so that Generate retries Retryable errors (429,
// 5xx, network errors) as pol says. Other errors come back at once,
// unchanged. When the retries run out the last error comes back wrapped
// ("model: gave up after N attempts: ..."); when ctx ends them, an error
// wrapping both ctx's error and the last one.
//
// Before each wait of at least pol.NoticeAfter it calls the hook that
// WithWaitNotice put in the request's context, once per wait.
func WithRetryPolicy(p Provider, pol RetryPolicy) Provider {
	return &retrying{p: p, pol: pol.withDefaults()}
}

type waitNoticeKey struct{}

// WithWaitNotice returns a ctx whose model requests, when a
// WithRetryPolicy provider is about to wait at least its NoticeAfter
// (default 5 s) before a retry, call notify first: once per wait, with the
// wait (jitter included) and the error that caused it (RateLimited tells a
// rate limit from a server error). notify runs on the goroutine calling
// Generate, before the wait begins; it should not block for long. A nil
// notify removes an outer hook.
//
// The bot uses it to tell the thread, e.g. "Waiting 42s for the model's
// rate limit…".
func WithWaitNotice(ctx context.Context, notify func(wait time.Duration, err error)) context.Context {
	return context.WithValue(ctx, waitNoticeKey{}, notify)
}

func waitNotice(ctx context.Context) func(time.Duration, error) {
	f, _ := ctx.Value(waitNoticeKey{}).(func(time.Duration, error))
	return f
}

type retrying struct {
	p   Provider
	pol RetryPolicy
}

func (r *retrying) Generate(ctx context.Context, req Request) (Message, error) {
	var (
		lastErr error
		waited  time.Duration
	)
	for attempt := 1; ; attempt++ {
		if err := ctx.Err(); err != nil {
			if lastErr == nil {
				return Message{}, err
			}
			return Message{}, fmt.Errorf("model: retry stopped after %d attempts: %w (last error: %w)", attempt-1, err, lastErr)
		}
		msg, err := r.p.Generate(ctx, req)
		if err == nil {
			return msg, nil
		}
		if !Retryable(err) {
			return Message{}, err
		}
		lastErr = err
		if attempt >= r.pol.Attempts {
			return Message{}, fmt.Errorf("model: gave up after %d attempts: %w", attempt, err)
		}
		wait, least := r.wait(attempt, err)
		left := r.pol.Budget - waited
		if left <= 0 || least > left {
			return Message{}, fmt.Errorf("model: gave up after %d attempts (waited %s, the retry budget is %s): %w", attempt, waited, r.pol.Budget, err)
		}
		wait = min(wait, left)
		if dl, ok := ctx.Deadline(); ok && time.Until(dl) <= wait {
			return Message{}, fmt.Errorf("model: retry stopped after %d attempts: a wait of %s would pass the deadline: %w (last error: %w)", attempt, wait.Round(time.Millisecond), context.DeadlineExceeded, err)
		}
		if wait >= r.pol.NoticeAfter {
			if notify := waitNotice(ctx); notify != nil {
				notify(wait, err)
			}
		}
		if serr := r.pol.Sleep(ctx, wait); serr != nil {
			return Message{}, fmt.Errorf("model: retry stopped after %d attempts: %w (last error: %w)", attempt, serr, err)
		}
		waited += wait
	}
}

// wait is the wait after the attempt-th try failed with err, and the least
// wait that honours the provider's delay (0 without one).
func (r *retrying) wait(attempt int, err error) (wait, least time.Duration) {
	j := r.pol.Rand()
	if j < 0 || j >= 1 {
		j = 0
	}
	if h, ok := RetryAfter(err); ok {
		if h >= r.pol.MaxWait {
			return r.pol.MaxWait, r.pol.MaxWait
		}
		spread := h/10 + time.Second
		return min(h+time.Duration(j*float64(spread)), r.pol.MaxWait), h
	}
	ceiling := r.pol.Backoff
	for i := 1; i < attempt && ceiling < r.pol.MaxWait; i++ {
		if ceiling > r.pol.MaxWait/2 {
			ceiling = r.pol.MaxWait
			break
		}
		ceiling *= 2
	}
	ceiling = min(ceiling, r.pol.MaxWait)
	return time.Duration(j * float64(ceiling)), 0
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
