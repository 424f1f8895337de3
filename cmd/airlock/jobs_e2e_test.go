package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"

	"github.com/airlockhq/airlock/internal/testkit"
	"github.com/airlockhq/airlock/model/modeltest"
)

// TestRunServesJobMetrics: a running `airlock run` does its background
// work as named jobs, and /metrics shows airlock_job_seconds and
// airlock_job_errors_total for each: the bot's, the clock sync and the
// webhooks' delivery, the ones that run at start or every second already
// counted.
func TestRunServesJobMetrics(t *testing.T) {
	hook := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	t.Cleanup(hook.Close)
	model := modeltest.NewOpenAIServer(t, func(modeltest.OpenAIRequest) modeltest.OpenAIReply { return modeltest.TextReply("hi") })
	dir := t.TempDir()
	addr := freeAddr(t)
	cfgPath := filepath.Join(dir, "airlock.yaml")
	cfg := fmt.Sprintf(`
listen: %s
storage: {dsn: %q}
model: {provider: openai, name: fake, base_url: %q}
events: {webhooks: [{url: %q, secret: webhook-secret-0123456789}]}
`, addr, filepath.Join(dir, "airlock.db"), model.BaseURL(), hook.URL)
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var stderr testkit.Buffer
	done := make(chan int, 1)
	go func() { done <- run(ctx, []string{"run", "-config", cfgPath}, nil, &testkit.Buffer{}, &stderr) }()
	t.Cleanup(func() {
		cancel()
		if code := <-done; code != 0 {
			t.Errorf("airlock run exited %d:\n%s", code, stderr.String())
		}
	})
	waitReady(t, addr)

	value := func(body, series string) (float64, bool) {
		m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(series) + ` (\S+)$`).FindStringSubmatch(body)
		if m == nil {
			return 0, false
		}
		v, err := strconv.ParseFloat(m[1], 64)
		return v, err == nil
	}
	scrape := func() string {
		resp, err := http.Get("http://" + addr + "/metrics")
		if err != nil {
			return ""
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b)
	}
	ran := map[string]bool{"sweep": true, "escalate": true, "prune-events": true, "inbox": true, "webhooks": true, "recover": false, "clock-sync": false}
	var body string
	waitUntil(t, "the jobs that run at start or every second to have run", func() bool {
		body = scrape()
		for job, soon := range ran {
			if n, _ := value(body, fmt.Sprintf(`airlock_job_seconds_count{job=%q}`, job)); soon && n < 1 {
				return false
			}
		}
		return true
	})
	for job := range ran {
		if _, ok := value(body, fmt.Sprintf(`airlock_job_seconds_count{job=%q}`, job)); !ok {
			t.Errorf("/metrics lacks airlock_job_seconds for %s", job)
		}
		if n, ok := value(body, fmt.Sprintf(`airlock_job_errors_total{job=%q}`, job)); !ok || n != 0 {
			t.Errorf("airlock_job_errors_total{job=%q}: %v (present %v), want 0", job, n, ok)
		}
	}
	if t.Failed() {
		t.Logf("/metrics:\n%s\nlog:\n%s", body, stderr.String())
	}
}
