package gemini_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/airlockhq/airlock/model"
	"github.com/airlockhq/airlock/model/modeltest"
)

// The real genai client against the fake, through the one retry layer.

var hi = model.Request{Messages: []model.Message{{Role: model.RoleUser, Text: "hi"}}}

// exhausted is Gemini's per-minute quota answer: the wait is in a
// RetryInfo detail, not in a header.
func exhausted(quotaID, delay string) answer {
	return answer{Status: 429, Body: `{"error":{"code":429,
		"message":"You exceeded your current quota, please check your plan and billing details. Please retry in ` + delay + `.",
		"status":"RESOURCE_EXHAUSTED",
		"details":[
			{"@type":"type.googleapis.com/google.rpc.Help","links":[{"description":"Learn more about Gemini API quotas","url":"https://ai.google.dev/gemini-api/docs/rate-limits"}]},
			{"@type":"type.googleapis.com/google.rpc.QuotaFailure","violations":[{"quotaMetric":"generativelanguage.googleapis.com/generate_content_free_tier_requests","quotaId":"` + quotaID + `","quotaDimensions":{"location":"global","model":"gemini-test"},"quotaValue":"10"}]},
			{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"` + delay + `"}]}}`}
}

const perMinute = "GenerateRequestsPerMinutePerProjectPerModel-FreeTier"

func TestRetryInfoHonoured(t *testing.T) {
	f := newFake(t, exhausted(perMinute, "33s"), exhausted(perMinute, "12.5s"), reply(`{"role":"model","parts":[{"text":"finally"}]}`))
	s := &modeltest.Sleeper{}
	n := &modeltest.Notices{}
	msg, err := model.WithRetryPolicy(f.provider(t), model.RetryPolicy{Sleep: s.Sleep}).Generate(n.Ctx(context.Background()), hi)
	if err != nil || msg.Text != "finally" {
		t.Fatalf("%q %v", msg.Text, err)
	}
	if n := len(f.requests()); n != 3 {
		t.Fatalf("%d requests, want 3 (one retry layer)", n)
	}
	w := s.Waits()
	// [h, h + h/10 + 1s)
	if len(w) != 2 || w[0] < 33*time.Second || w[0] >= 37300*time.Millisecond || w[1] < 12500*time.Millisecond || w[1] >= 14750*time.Millisecond {
		t.Fatalf("waits %v", w)
	}
	if len(n.Waits) != 2 || n.Waits[0] != w[0] || n.Waits[1] != w[1] {
		t.Fatalf("notices %v, want one per wait", n.Waits)
	}
	if d, ok := model.RetryAfter(n.Errs[0]); !ok || d != 33*time.Second || !model.RateLimited(n.Errs[0]) {
		t.Errorf("notice error %v: retry after %v %v", n.Errs[0], d, ok)
	}
}

func TestRetryInfoOverCap(t *testing.T) {
	f := newFake(t, exhausted(perMinute, "120s"), reply(`{"role":"model","parts":[{"text":"ok"}]}`))
	s := &modeltest.Sleeper{}
	if _, err := model.WithRetryPolicy(f.provider(t), model.RetryPolicy{Sleep: s.Sleep}).Generate(context.Background(), hi); err != nil {
		t.Fatal(err)
	}
	if w := s.Waits(); len(w) != 1 || w[0] != model.DefaultMaxWait {
		t.Fatalf("waits %v, want [%v]", w, model.DefaultMaxWait)
	}
}

func TestRetryWithoutRetryInfo(t *testing.T) {
	f := newFake(t,
		answer{Status: 429, Body: `{"error":{"code":429,"message":"Resource has been exhausted","status":"RESOURCE_EXHAUSTED"}}`},
		answer{Status: 503, Body: `{"error":{"code":503,"message":"The model is overloaded. Please try again later.","status":"UNAVAILABLE"}}`},
		answer{Status: 429, Body: `{"error":{"code":429,"message":"x","status":"RESOURCE_EXHAUSTED","details":[{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"soon"}]}}`},
		reply(`{"role":"model","parts":[{"text":"ok"}]}`))
	s := &modeltest.Sleeper{}
	if _, err := model.WithRetryPolicy(f.provider(t), model.RetryPolicy{Sleep: s.Sleep}).Generate(context.Background(), hi); err != nil {
		t.Fatal(err)
	}
	w := s.Waits()
	if len(w) != 3 {
		t.Fatalf("waits %v", w)
	}
	ceiling := model.DefaultBackoff
	for i, d := range w {
		if d < 0 || d >= ceiling {
			t.Errorf("wait %d: %v outside the backoff [0, %v)", i, d, ceiling)
		}
		ceiling *= 2
	}
}

func TestNoRetry(t *testing.T) {
	for name, a := range map[string]answer{
		"400":         {Status: 400, Body: `{"error":{"code":400,"message":"Invalid JSON payload","status":"INVALID_ARGUMENT"}}`},
		"daily quota": exhausted("GenerateRequestsPerDayPerProjectPerModel-FreeTier", "20s"),
	} {
		f := newFake(t, a)
		s := &modeltest.Sleeper{}
		_, err := model.WithRetryPolicy(f.provider(t), model.RetryPolicy{Sleep: s.Sleep}).Generate(context.Background(), hi)
		var ae *model.APIError
		if !errors.As(err, &ae) || ae.Status != a.Status || model.Retryable(err) {
			t.Errorf("%s: err %v", name, err)
		}
		if n := len(f.requests()); n != 1 || len(s.Waits()) != 0 {
			t.Errorf("%s: %d requests, waits %v; want 1, none", name, n, s.Waits())
		}
	}
}

func TestCancelDuringRateLimitWait(t *testing.T) {
	f := newFake(t, exhausted(perMinute, "30s"))
	modeltest.CancelDuringRateLimitWait(t, func(rp model.RetryPolicy) model.Provider {
		return model.WithRetryPolicy(f.provider(t), rp)
	}, func() int { return len(f.requests()) })
}
