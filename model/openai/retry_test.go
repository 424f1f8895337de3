package openai_test

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/airlockhq/airlock/model"
	"github.com/airlockhq/airlock/model/modeltest"
	"github.com/airlockhq/airlock/model/openai"
)

// The real client against the fake, through the one retry layer.

var hi = model.Request{Messages: []model.Message{{Role: model.RoleUser, Text: "hi"}}}

func retrying(t *testing.T, srv *modeltest.OpenAIServer, pol model.RetryPolicy) model.Provider {
	t.Helper()
	p, err := openai.New(openai.Config{APIKey: "sk-fake", BaseURL: srv.BaseURL(), Model: "gpt-fake", HTTPClient: srv.Client()})
	if err != nil {
		t.Fatal(err)
	}
	return model.WithRetryPolicy(p, pol)
}

func TestRetryAfterHonoured(t *testing.T) {
	srv := modeltest.NewOpenAIServer(t, modeltest.OpenAIScript(t,
		modeltest.RateLimitReply("30", "Rate limit reached for requests"),
		modeltest.RateLimitReply("30", "Rate limit reached for requests"),
		modeltest.TextReply("finally"),
	))
	s := &modeltest.Sleeper{}
	n := &modeltest.Notices{}
	msg, err := retrying(t, srv, model.RetryPolicy{Sleep: s.Sleep}).Generate(n.Ctx(context.Background()), hi)
	if err != nil || msg.Text != "finally" {
		t.Fatalf("%q %v", msg.Text, err)
	}
	reqs := srv.Requests()
	if len(reqs) != 3 {
		t.Fatalf("%d requests, want 3 (one retry layer)", len(reqs))
	}
	for i, r := range reqs {
		if got := r.Header.Get("X-Stainless-Retry-Count"); got != "0" && got != "" {
			t.Errorf("request %d: the client retried itself (retry count %q)", i, got)
		}
	}
	waits := s.Waits()
	if len(waits) != 2 {
		t.Fatalf("waits %v, want 2", waits)
	}
	for _, w := range waits {
		// [h, h + h/10 + 1s), h = 30s
		if w < 30*time.Second || w >= 34*time.Second {
			t.Errorf("wait %v outside [30s, 34s)", w)
		}
	}
	if !slices.Equal(n.Waits, waits) {
		t.Errorf("notices %v, want one per wait %v", n.Waits, waits)
	}
	for _, e := range n.Errs {
		if d, ok := model.RetryAfter(e); !model.RateLimited(e) || !ok || d != 30*time.Second {
			t.Errorf("notice error %v: rate limited %v, retry after %v %v", e, model.RateLimited(e), d, ok)
		}
	}
}

func TestRetryAfterHeaders(t *testing.T) {
	date := func(d time.Duration) string { return time.Now().Add(d).UTC().Format(http.TimeFormat) }
	for _, tc := range []struct {
		name     string
		header   http.Header
		min, max time.Duration
	}{
		{"over the cap", http.Header{"Retry-After": {"300"}}, time.Minute, time.Minute},
		{"ms", http.Header{"Retry-After-Ms": {"1500"}}, 1500 * time.Millisecond, 2650 * time.Millisecond},
		{"date", http.Header{"Retry-After": {date(45 * time.Second)}}, 43 * time.Second, 50*time.Second + 500*time.Millisecond},
		{"none: backoff", nil, 0, model.DefaultBackoff},
	} {
		srv := modeltest.NewOpenAIServer(t, modeltest.OpenAIScript(t,
			modeltest.OpenAIReply{Status: http.StatusTooManyRequests, ErrorMessage: "slow down", Header: tc.header},
			modeltest.TextReply("ok"),
		))
		s := &modeltest.Sleeper{}
		if _, err := retrying(t, srv, model.RetryPolicy{Sleep: s.Sleep}).Generate(context.Background(), hi); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		w := s.Waits()
		if len(w) != 1 || w[0] < tc.min || w[0] > tc.max {
			t.Errorf("%s: waits %v, want one in [%v, %v]", tc.name, w, tc.min, tc.max)
		}
	}
}

func TestRetryServerErrors(t *testing.T) {
	srv := modeltest.NewOpenAIServer(t, modeltest.OpenAIScript(t,
		modeltest.OpenAIReply{Status: http.StatusServiceUnavailable, ErrorMessage: "overloaded", Header: http.Header{"Retry-After": {"7"}}},
		modeltest.ErrorReply(http.StatusBadGateway, "bad gateway"),
		modeltest.TextReply("ok"),
	))
	s := &modeltest.Sleeper{}
	n := &modeltest.Notices{}
	if _, err := retrying(t, srv, model.RetryPolicy{Sleep: s.Sleep}).Generate(n.Ctx(context.Background()), hi); err != nil {
		t.Fatal(err)
	}
	w := s.Waits()
	if len(w) != 2 || w[0] < 7*time.Second || w[0] >= 8700*time.Millisecond || w[1] >= 2*model.DefaultBackoff {
		t.Fatalf("waits %v", w)
	}
	if len(n.Errs) != 1 || model.RateLimited(n.Errs[0]) {
		t.Fatalf("notices %v", n.Errs)
	}
}

func TestNoRetry(t *testing.T) {
	for name, r := range map[string]modeltest.OpenAIReply{
		"400":            modeltest.ErrorReply(http.StatusBadRequest, "bad"),
		"401":            modeltest.ErrorReply(http.StatusUnauthorized, "who"),
		"x-should-retry": {Status: http.StatusTooManyRequests, ErrorMessage: "no", Header: http.Header{"X-Should-Retry": {"false"}, "Retry-After": {"1"}}},
	} {
		srv := modeltest.NewOpenAIServer(t, modeltest.OpenAIScript(t, r))
		s := &modeltest.Sleeper{}
		_, err := retrying(t, srv, model.RetryPolicy{Sleep: s.Sleep}).Generate(context.Background(), hi)
		var ae *model.APIError
		if !errors.As(err, &ae) || ae.Status != r.Status {
			t.Errorf("%s: err %v", name, err)
		}
		if n := len(srv.Requests()); n != 1 || len(s.Waits()) != 0 {
			t.Errorf("%s: %d requests, waits %v; want 1, none", name, n, s.Waits())
		}
	}
}

// An account out of credit answers 429 insufficient_quota: no wait mends it.
func TestInsufficientQuotaNotRetried(t *testing.T) {
	f := newFake(t, answer{429, `{"error":{"message":"You exceeded your current quota, please check your plan and billing details.","type":"insufficient_quota","param":null,"code":"insufficient_quota"}}`})
	p, err := openai.New(openai.Config{BaseURL: f.srv.URL + "/v1", Model: "gpt-test", HTTPClient: f.srv.Client()})
	if err != nil {
		t.Fatal(err)
	}
	s := &modeltest.Sleeper{}
	_, err = model.WithRetryPolicy(p, model.RetryPolicy{Sleep: s.Sleep}).Generate(context.Background(), hi)
	var ae *model.APIError
	if !errors.As(err, &ae) || ae.Status != 429 || !ae.NoRetry || model.Retryable(err) {
		t.Fatalf("err %v (%+v)", err, ae)
	}
	if len(f.requests()) != 1 || len(s.Waits()) != 0 {
		t.Fatalf("%d requests, waits %v", len(f.requests()), s.Waits())
	}
}

func TestCancelDuringRateLimitWait(t *testing.T) {
	srv := modeltest.NewOpenAIServer(t, modeltest.OpenAIScript(t, modeltest.RateLimitReply("30", "slow down")))
	modeltest.CancelDuringRateLimitWait(t, func(rp model.RetryPolicy) model.Provider {
		return retrying(t, srv, rp)
	}, func() int { return len(srv.Requests()) })
}
