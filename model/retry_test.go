package model_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/airlockhq/airlock/model"
	"github.com/airlockhq/airlock/model/modeltest"
)

// failing fails with errs in order, then answers "ok".
type failing struct {
	mu    sync.Mutex
	errs  []error
	calls int
}

func (f *failing) Generate(ctx context.Context, req model.Request) (model.Message, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	if f.calls <= len(f.errs) {
		return model.Message{}, f.errs[f.calls-1]
	}
	return model.Message{Role: model.RoleAssistant, Text: "ok"}, nil
}

func fixed(j float64) func() float64 { return func() float64 { return j } }

type notice struct {
	wait time.Duration
	err  error
}

type notices struct {
	mu  sync.Mutex
	got []notice
}

func (n *notices) ctx(ctx context.Context) context.Context {
	return model.WithWaitNotice(ctx, func(wait time.Duration, err error) {
		n.mu.Lock()
		defer n.mu.Unlock()
		n.got = append(n.got, notice{wait, err})
	})
}

func (n *notices) list() []notice {
	n.mu.Lock()
	defer n.mu.Unlock()
	return slices.Clone(n.got)
}

func rateLimited(after time.Duration) error {
	return fmt.Errorf("prov: %w", &model.APIError{Status: 429, Message: "slow down", RetryAfter: after})
}

func TestRetryBackoffFullJitter(t *testing.T) {
	for _, tc := range []struct {
		j    float64
		want []time.Duration
	}{
		{0, []time.Duration{0, 0, 0}},
		{0.5, []time.Duration{50 * time.Millisecond, 100 * time.Millisecond, 125 * time.Millisecond}},
		// The ceiling doubles, capped by MaxWait.
		{0.75, []time.Duration{75 * time.Millisecond, 150 * time.Millisecond, 187500 * time.Microsecond}},
	} {
		f := &failing{errs: []error{&model.APIError{Status: 429}, &model.APIError{Status: 503}, &model.APIError{Status: 500}}}
		s := &modeltest.Sleeper{}
		p := model.WithRetryPolicy(f, model.RetryPolicy{Backoff: 100 * time.Millisecond, MaxWait: 250 * time.Millisecond, Sleep: s.Sleep, Rand: fixed(tc.j)})
		msg, err := p.Generate(context.Background(), model.Request{})
		if err != nil || msg.Text != "ok" || f.calls != 4 {
			t.Fatalf("jitter %v: %q %v after %d calls", tc.j, msg.Text, err, f.calls)
		}
		if got := s.Waits(); !slices.Equal(got, tc.want) {
			t.Errorf("jitter %v: waits %v, want %v", tc.j, got, tc.want)
		}
	}
}

func TestRetryDefaultJitterWithinBounds(t *testing.T) {
	errs := make([]error, 9)
	for i := range errs {
		errs[i] = &model.APIError{Status: 502}
	}
	f := &failing{errs: errs}
	s := &modeltest.Sleeper{}
	if _, err := model.WithRetryPolicy(f, model.RetryPolicy{Sleep: s.Sleep, Budget: time.Hour}).Generate(context.Background(), model.Request{}); err != nil {
		t.Fatal(err)
	}
	waits := s.Waits()
	if len(waits) != 9 {
		t.Fatalf("%d waits, want 9", len(waits))
	}
	ceiling := model.DefaultBackoff
	for i, w := range waits {
		if w < 0 || w >= ceiling {
			t.Errorf("wait %d: %v outside [0, %v)", i, w, ceiling)
		}
		ceiling = min(2*ceiling, model.DefaultMaxWait)
	}
}

func TestRetryHonoursRetryAfter(t *testing.T) {
	for _, j := range []float64{0, 0.5, 0.999} {
		f := &failing{errs: []error{rateLimited(30 * time.Second), rateLimited(30 * time.Second)}}
		s := &modeltest.Sleeper{}
		n := &notices{}
		p := model.WithRetryPolicy(f, model.RetryPolicy{Sleep: s.Sleep, Rand: fixed(j)})
		msg, err := p.Generate(n.ctx(context.Background()), model.Request{})
		if err != nil || msg.Text != "ok" || f.calls != 3 {
			t.Fatalf("%q %v after %d calls", msg.Text, err, f.calls)
		}
		want := 30*time.Second + time.Duration(j*float64(4*time.Second)) // h + j·(h/10 + 1s)
		if got := s.Waits(); !slices.Equal(got, []time.Duration{want, want}) {
			t.Errorf("jitter %v: waits %v, want 2×%v", j, got, want)
		}
		got := n.list()
		if len(got) != 2 || got[0].wait != want || !model.RateLimited(got[0].err) {
			t.Errorf("jitter %v: notices %+v", j, got)
		}
	}
}

func TestRetryAfterOverCapIsCapped(t *testing.T) {
	f := &failing{errs: []error{rateLimited(5 * time.Minute)}}
	s := &modeltest.Sleeper{}
	if _, err := model.WithRetryPolicy(f, model.RetryPolicy{Sleep: s.Sleep, Rand: fixed(0.9)}).Generate(context.Background(), model.Request{}); err != nil {
		t.Fatal(err)
	}
	if got := s.Waits(); !slices.Equal(got, []time.Duration{model.DefaultMaxWait}) {
		t.Fatalf("waits %v, want [%v]", got, model.DefaultMaxWait)
	}
	// Jitter never takes a wait past the cap either.
	f = &failing{errs: []error{rateLimited(59 * time.Second)}}
	s = &modeltest.Sleeper{}
	if _, err := model.WithRetryPolicy(f, model.RetryPolicy{Sleep: s.Sleep, Rand: fixed(0.9)}).Generate(context.Background(), model.Request{}); err != nil {
		t.Fatal(err)
	}
	if got := s.Waits(); !slices.Equal(got, []time.Duration{model.DefaultMaxWait}) {
		t.Fatalf("waits %v, want [%v]", got, model.DefaultMaxWait)
	}
}

// A per-minute quota that keeps answering 429 is waited out for up to the
// budget, then the last error comes back.
func TestRetryBudget(t *testing.T) {
	errs := make([]error, 10)
	for i := range errs {
		errs[i] = rateLimited(50 * time.Second)
	}
	f := &failing{errs: errs}
	s := &modeltest.Sleeper{}
	_, err := model.WithRetryPolicy(f, model.RetryPolicy{Sleep: s.Sleep, Rand: fixed(0)}).Generate(context.Background(), model.Request{})
	if err == nil || !strings.Contains(err.Error(), "retry budget") || !errors.Is(err, errs[3]) {
		t.Fatalf("err %v, want the 4th error, over budget", err)
	}
	if got := s.Waits(); !slices.Equal(got, []time.Duration{50 * time.Second, 50 * time.Second, 50 * time.Second}) || f.calls != 4 {
		t.Fatalf("waits %v after %d calls", got, f.calls)
	}

	// A backoff wait is cut to what is left of the budget.
	f = &failing{errs: []error{&model.APIError{Status: 500}, &model.APIError{Status: 500}, &model.APIError{Status: 500}}}
	s = &modeltest.Sleeper{}
	_, err = model.WithRetryPolicy(f, model.RetryPolicy{Backoff: time.Second, Budget: 1500 * time.Millisecond, Sleep: s.Sleep, Rand: fixed(0.75)}).Generate(context.Background(), model.Request{})
	if err == nil || !strings.Contains(err.Error(), "retry budget") || f.calls != 3 {
		t.Fatalf("err %v after %d calls", err, f.calls)
	}
	if got := s.Waits(); !slices.Equal(got, []time.Duration{750 * time.Millisecond, 750 * time.Millisecond}) {
		t.Fatalf("waits %v", got)
	}
}

func TestRetryNotices(t *testing.T) {
	f := &failing{errs: []error{
		&model.APIError{Status: 503},               // backoff 1s·0.5: no notice
		rateLimited(4 * time.Second),               // 4s + 0.5·1.4s: no notice
		rateLimited(5 * time.Second),               // 5s + 0.5·1.5s: notice
		&model.APIError{Status: 500, Message: "x"}, // backoff 8s·0.5 = 4s: no notice
		&model.APIError{Status: 500},               // 16s·0.5 = 8s: notice
	}}
	s := &modeltest.Sleeper{}
	n := &notices{}
	p := model.WithRetryPolicy(f, model.RetryPolicy{Sleep: s.Sleep, Rand: fixed(0.5)})
	if _, err := p.Generate(n.ctx(context.Background()), model.Request{}); err != nil {
		t.Fatal(err)
	}
	want := []time.Duration{500 * time.Millisecond, 4700 * time.Millisecond, 5750 * time.Millisecond, 4 * time.Second, 8 * time.Second}
	if got := s.Waits(); !slices.Equal(got, want) {
		t.Fatalf("waits %v, want %v", got, want)
	}
	got := n.list()
	if len(got) != 2 || got[0].wait != 5750*time.Millisecond || got[1].wait != 8*time.Second {
		t.Fatalf("notices %+v", got)
	}
	if !model.RateLimited(got[0].err) || model.RateLimited(got[1].err) {
		t.Errorf("RateLimited %v %v", got[0].err, got[1].err)
	}

	// A nil hook removes an outer one; NoticeAfter sets the threshold.
	f = &failing{errs: []error{rateLimited(10 * time.Second)}}
	p = model.WithRetryPolicy(f, model.RetryPolicy{Sleep: s.Sleep, Rand: fixed(0.5)})
	if _, err := p.Generate(model.WithWaitNotice(n.ctx(context.Background()), nil), model.Request{}); err != nil {
		t.Fatal(err)
	}
	if len(n.list()) != 2 {
		t.Fatalf("notices %+v after the hook was removed", n.list())
	}
	f = &failing{errs: []error{&model.APIError{Status: 500}}}
	n = &notices{}
	p = model.WithRetryPolicy(f, model.RetryPolicy{NoticeAfter: time.Millisecond, Sleep: s.Sleep, Rand: fixed(0.5)})
	if _, err := p.Generate(n.ctx(context.Background()), model.Request{}); err != nil {
		t.Fatal(err)
	}
	if got := n.list(); len(got) != 1 || got[0].wait != 500*time.Millisecond {
		t.Fatalf("notices %+v", got)
	}
}

func TestRetryNotOn400OrNoRetry(t *testing.T) {
	for _, e := range []error{
		&model.APIError{Status: 400, Message: "bad"},
		&model.APIError{Status: 429, Message: "insufficient_quota", NoRetry: true, RetryAfter: time.Second},
		errors.New("decode reply"),
	} {
		f := &failing{errs: []error{e}}
		s := &modeltest.Sleeper{}
		_, err := model.WithRetryPolicy(f, model.RetryPolicy{Sleep: s.Sleep}).Generate(context.Background(), model.Request{})
		if err != e {
			t.Fatalf("err %v, want %v unchanged", err, e)
		}
		if f.calls != 1 || len(s.Waits()) != 0 {
			t.Fatalf("%v: %d calls, %d sleeps; want 1, 0", e, f.calls, len(s.Waits()))
		}
	}
}

func TestRetryGivesUp(t *testing.T) {
	last := &model.APIError{Status: 500, Message: "third"}
	f := &failing{errs: []error{&model.APIError{Status: 500}, &model.APIError{Status: 429}, last, &model.APIError{Status: 500}}}
	s := &modeltest.Sleeper{}
	_, err := model.WithRetryPolicy(f, model.RetryPolicy{Attempts: 3, Sleep: s.Sleep}).Generate(context.Background(), model.Request{})
	if err == nil || !strings.Contains(err.Error(), "gave up after 3 attempts") {
		t.Fatalf("err %v, want gave up after 3 attempts", err)
	}
	if !errors.Is(err, last) || !model.Retryable(err) {
		t.Fatalf("err %v does not wrap the last error", err)
	}
	if f.calls != 3 || len(s.Waits()) != 2 {
		t.Fatalf("%d calls, %d sleeps; want 3, 2", f.calls, len(s.Waits()))
	}
}

func TestRetryAttempts(t *testing.T) {
	for _, tc := range []struct{ attempts, calls int }{{-1, 1}, {0, model.DefaultAttempts}, {1, 1}, {2, 2}} {
		errs := make([]error, 20)
		for i := range errs {
			errs[i] = &model.APIError{Status: 500}
		}
		f := &failing{errs: errs}
		_, err := model.WithRetryPolicy(f, model.RetryPolicy{Attempts: tc.attempts, Sleep: (&modeltest.Sleeper{}).Sleep, Budget: time.Hour}).Generate(context.Background(), model.Request{})
		if err == nil || f.calls != tc.calls {
			t.Errorf("attempts %d: err %v after %d calls, want an error after %d", tc.attempts, err, f.calls, tc.calls)
		}
	}
}

// A cancel during a wait ends Generate promptly, with both errors.
func TestRetryCancelDuringWait(t *testing.T) {
	f := &failing{errs: []error{rateLimited(30 * time.Second), rateLimited(30 * time.Second)}}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	waiting := make(chan time.Duration, 1)
	block := func(ctx context.Context, d time.Duration) error {
		waiting <- d
		<-ctx.Done() // stands for a 30 s timer
		return ctx.Err()
	}
	done := make(chan error, 1)
	go func() {
		_, err := model.WithRetryPolicy(f, model.RetryPolicy{Sleep: block}).Generate(ctx, model.Request{})
		done <- err
	}()
	if d := <-waiting; d < 30*time.Second {
		t.Errorf("wait %v", d)
	}
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) || !model.RateLimited(err) || model.Retryable(err) {
			t.Fatalf("err %v, want context.Canceled wrapping the 429", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Generate did not return after the cancel")
	}
	if f.calls != 1 {
		t.Fatalf("%d calls, want 1", f.calls)
	}
}

func TestRetryCancelledBeforeFirstTry(t *testing.T) {
	f := &failing{}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := model.WithRetryPolicy(f, model.RetryPolicy{}).Generate(ctx, model.Request{})
	if !errors.Is(err, context.Canceled) || f.calls != 0 {
		t.Fatalf("err %v after %d calls", err, f.calls)
	}
}

// A wait that would pass the deadline is not begun.
func TestRetryStopsBeforeDeadline(t *testing.T) {
	f := &failing{errs: []error{rateLimited(30 * time.Second)}}
	s := &modeltest.Sleeper{}
	n := &notices{}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := model.WithRetryPolicy(f, model.RetryPolicy{Sleep: s.Sleep}).Generate(n.ctx(ctx), model.Request{})
	if !errors.Is(err, context.DeadlineExceeded) || !model.RateLimited(err) {
		t.Fatalf("err %v, want deadline exceeded wrapping the 429", err)
	}
	if f.calls != 1 || len(s.Waits()) != 0 || len(n.list()) != 0 {
		t.Fatalf("%d calls, waits %v, notices %v", f.calls, s.Waits(), n.list())
	}
}

// The real timer: returns when ctx is cancelled mid-wait, and waits.
func TestRetryRealSleep(t *testing.T) {
	f := &failing{errs: []error{&model.APIError{Status: 429}, &model.APIError{Status: 429}}}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	n := &notices{}
	ctx = model.WithWaitNotice(ctx, func(time.Duration, error) { n.got = append(n.got, notice{}); cancel() })
	start := time.Now()
	_, err := model.WithRetryPolicy(f, model.RetryPolicy{Backoff: time.Hour, MaxWait: time.Hour, Budget: 2 * time.Hour, Rand: fixed(0.5)}).Generate(ctx, model.Request{})
	if !errors.Is(err, context.Canceled) || len(n.got) != 1 {
		t.Fatalf("err %v, %d notices", err, len(n.got))
	}
	if time.Since(start) > 10*time.Second {
		t.Fatal("sleep ignored the context")
	}

	f = &failing{errs: []error{&model.APIError{Status: 502}}}
	msg, err := model.WithRetryPolicy(f, model.RetryPolicy{Backoff: time.Millisecond}).Generate(context.Background(), model.Request{})
	if err != nil || msg.Text != "ok" || f.calls != 2 {
		t.Fatalf("msg %q err %v after %d calls", msg.Text, err, f.calls)
	}
}

func TestRetryConcurrent(t *testing.T) {
	f := &failing{errs: []error{rateLimited(time.Second), rateLimited(time.Second), rateLimited(time.Second)}}
	s := &modeltest.Sleeper{}
	p := model.WithRetryPolicy(f, model.RetryPolicy{Sleep: s.Sleep})
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			if _, err := p.Generate(context.Background(), model.Request{}); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	for _, w := range s.Waits() {
		if w < time.Second || w >= 2100*time.Millisecond {
			t.Errorf("wait %v outside [1s, 2.1s)", w)
		}
	}
}

func TestRetryableClassifiesNetworkAndContextErrors(t *testing.T) {
	netErr := fmt.Errorf("generate: %w", &url.Error{Op: "Post", URL: "http://127.0.0.1:1", Err: &net.OpError{Op: "dial", Err: errors.New("connection refused")}})
	if !model.Retryable(netErr) {
		t.Error("a connection error should be retried")
	}
	if model.Retryable(fmt.Errorf("generate: %w", context.Canceled)) {
		t.Error("a cancelled request must not be retried")
	}
	if model.Retryable(&model.APIError{Status: 400}) {
		t.Error("400 must not be retried")
	}
	if model.Retryable(&model.APIError{Status: 429, NoRetry: true}) {
		t.Error("NoRetry must not be retried")
	}
	if model.RateLimited(&model.APIError{Status: 503}) || !model.RateLimited(rateLimited(0)) || model.RateLimited(netErr) {
		t.Error("RateLimited")
	}
}

func TestRetryAfterOfErrors(t *testing.T) {
	if d, ok := model.RetryAfter(rateLimited(30 * time.Second)); !ok || d != 30*time.Second {
		t.Errorf("got %v %v", d, ok)
	}
	for _, err := range []error{rateLimited(0), errors.New("x"), nil} {
		if d, ok := model.RetryAfter(err); ok {
			t.Errorf("%v: got %v", err, d)
		}
	}
	if s := rateLimited(30 * time.Second).Error(); !strings.Contains(s, "retry after 30s") {
		t.Errorf("Error() %q", s)
	}
}

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		h    http.Header
		want time.Duration
		ok   bool
	}{
		{http.Header{"Retry-After": {"30"}}, 30 * time.Second, true},
		{http.Header{"Retry-After": {" 1.5 "}}, 1500 * time.Millisecond, true},
		{http.Header{"Retry-After": {"0"}}, 0, true},
		{http.Header{"Retry-After": {now.Add(42 * time.Second).Format(http.TimeFormat)}}, 42 * time.Second, true},
		{http.Header{"Retry-After": {now.Add(-time.Minute).Format(http.TimeFormat)}}, 0, true},
		{http.Header{"Retry-After": {now.Add(42 * time.Second).Format(time.RFC850)}}, 42 * time.Second, true},
		{http.Header{"Retry-After-Ms": {"1500"}, "Retry-After": {"2"}}, 1500 * time.Millisecond, true},
		{http.Header{"Retry-After-Ms": {"junk"}, "Retry-After": {"2"}}, 2 * time.Second, true},
		{http.Header{"Retry-After": {"-1"}}, 0, false},
		{http.Header{"Retry-After": {"NaN"}}, 0, false},
		{http.Header{"Retry-After": {"soon"}}, 0, false},
		{http.Header{"Retry-After": {"1e12"}}, 0, false},
		{http.Header{"Retry-After": {now.Add(48 * time.Hour).Format(http.TimeFormat)}}, 0, false},
		{http.Header{}, 0, false},
	} {
		got, ok := model.ParseRetryAfter(tc.h, now)
		if got != tc.want || ok != tc.ok {
			t.Errorf("%v: got %v %v, want %v %v", tc.h, got, ok, tc.want, tc.ok)
		}
	}
}
