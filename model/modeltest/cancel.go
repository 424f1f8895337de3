package modeltest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/airlockhq/airlock/model"
)

// CancelDuringRateLimitWait checks a provider end to end against its fake
// answering "rate limited, retry in 30 s": retrying returns the moment its
// context is cancelled during that wait, with an error that is both
// context.Canceled and model.RateLimited, after one request. provider
// wraps the provider under test with the given retry policy; requests
// counts the fake's requests.
func CancelDuringRateLimitWait(t *testing.T, provider func(model.RetryPolicy) model.Provider, requests func() int) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	waiting := make(chan struct{})
	block := func(ctx context.Context, d time.Duration) error {
		close(waiting)
		<-ctx.Done() // stands for the 30 s timer
		return ctx.Err()
	}
	p := provider(model.RetryPolicy{Sleep: block})
	done := make(chan error, 1)
	go func() {
		_, err := p.Generate(ctx, model.Request{Messages: []model.Message{{Role: model.RoleUser, Text: "hi"}}})
		done <- err
	}()
	<-waiting
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) || !model.RateLimited(err) {
			t.Fatalf("err %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Generate did not return after the cancel")
	}
	if n := requests(); n != 1 {
		t.Fatalf("%d requests", n)
	}
}
