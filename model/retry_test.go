package model_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/airlockhq/airlock/model"
)

// failing fails with errs in order, then answers "ok".
type failing struct {
	errs  []error
	calls int
}

func (f *failing) Generate(ctx context.Context, req model.Request) (model.Message, error) {
	f.calls++
	if f.calls <= len(f.errs) {
		return model.Message{}, f.errs[f.calls-1]
	}
	return model.Message{Role: model.RoleAssistant, Text: "ok"}, nil
}

type sleeps struct{ got []time.Duration }

func (s *sleeps) sleep(ctx context.Context, d time.Duration) error {
	s.got = append(s.got, d)
	return ctx.Err()
}

func TestRetryRecoversFrom429(t *testing.T) {
	f := &failing{errs: []error{&model.APIError{Status: 429}, &model.APIError{Status: 503}}}
	s := &sleeps{}
	p := model.WithRetry(f, 5, 100*time.Millisecond, s.sleep)
	msg, err := p.Generate(context.Background(), model.Request{})
	if err != nil {
		t.Fatal(err)
	}
	if msg.Text != "ok" || f.calls != 3 {
		t.Fatalf("text %q after %d calls, want ok after 3", msg.Text, f.calls)
	}
	if want := []time.Duration{100 * time.Millisecond, 200 * time.Millisecond}; !slices.Equal(s.got, want) {
		t.Fatalf("sleeps %v, want %v", s.got, want)
	}
}

func TestRetryNotOn400(t *testing.T) {
	e400 := &model.APIError{Status: 400, Message: "bad"}
	f := &failing{errs: []error{e400}}
	s := &sleeps{}
	_, err := model.WithRetry(f, 5, time.Second, s.sleep).Generate(context.Background(), model.Request{})
	if !errors.Is(err, e400) {
		t.Fatalf("err %v, want the 400", err)
	}
	if f.calls != 1 || len(s.got) != 0 {
		t.Fatalf("%d calls, %d sleeps; want 1, 0", f.calls, len(s.got))
	}
}

func TestRetryGivesUp(t *testing.T) {
	last := &model.APIError{Status: 500, Message: "third"}
	f := &failing{errs: []error{&model.APIError{Status: 500}, &model.APIError{Status: 429}, last, &model.APIError{Status: 500}}}
	s := &sleeps{}
	_, err := model.WithRetry(f, 3, time.Millisecond, s.sleep).Generate(context.Background(), model.Request{})
	if err == nil || !strings.Contains(err.Error(), "gave up after 3 attempts") {
		t.Fatalf("err %v, want gave up after 3 attempts", err)
	}
	if !errors.Is(err, last) || !model.Retryable(err) {
		t.Fatalf("err %v does not wrap the last error", err)
	}
	if f.calls != 3 || len(s.got) != 2 {
		t.Fatalf("%d calls, %d sleeps; want 3, 2", f.calls, len(s.got))
	}
}

func TestRetryAttemptsAtLeastOne(t *testing.T) {
	f := &failing{errs: []error{&model.APIError{Status: 500}}}
	_, err := model.WithRetry(f, 0, time.Millisecond, (&sleeps{}).sleep).Generate(context.Background(), model.Request{})
	if err == nil || f.calls != 1 {
		t.Fatalf("err %v after %d calls, want an error after 1", err, f.calls)
	}
}

func TestRetryStopsOnCancel(t *testing.T) {
	f := &failing{errs: []error{&model.APIError{Status: 429}, &model.APIError{Status: 429}}}
	ctx, cancel := context.WithCancel(context.Background())
	sleep := func(ctx context.Context, d time.Duration) error {
		cancel()
		return ctx.Err()
	}
	_, err := model.WithRetry(f, 5, time.Second, sleep).Generate(ctx, model.Request{})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err %v, want context.Canceled", err)
	}
	if f.calls != 1 {
		t.Fatalf("%d calls, want 1", f.calls)
	}
}

func TestRetryRealSleepHonoursContext(t *testing.T) {
	f := &failing{errs: []error{&model.APIError{Status: 429}, &model.APIError{Status: 429}}}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := model.WithRetry(f, 5, time.Hour, nil).Generate(ctx, model.Request{})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err %v, want deadline exceeded", err)
	}
	if time.Since(start) > 10*time.Second {
		t.Fatal("sleep ignored the context")
	}
}

func TestRetryRealSleepWaits(t *testing.T) {
	f := &failing{errs: []error{&model.APIError{Status: 502}}}
	msg, err := model.WithRetry(f, 2, time.Millisecond, nil).Generate(context.Background(), model.Request{})
	if err != nil || msg.Text != "ok" || f.calls != 2 {
		t.Fatalf("msg %q err %v after %d calls", msg.Text, err, f.calls)
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
}
