package bot_test

import (
	"context"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/airlockhq/airlock/bot"
	"github.com/airlockhq/airlock/metrics"
)

// A person's decision counts by tool, outcome and the surface clicked,
// with its time to decide; an expiry counts by tool.
func TestCallMetricsByToolOutcomeAndSurface(t *testing.T) {
	m := metrics.New(nil)
	h, r := routed(t, bot.Channel{Approvers: []string{"alice", "carol"}, Notify: []string{bot.NotifyDM}}, func(c *bot.Config) { c.Metrics = m })
	h.push(calls(tc("a", "deploy", `{}`)), text("done"))
	h.turn("bob", "deploy")
	ref := r.card(r.refsIn("C1")[0]).Calls[0].Ref
	var carolCopy string
	for _, d := range r.refsIn("D-") {
		if r.where[d].Channel == "D-carol" {
			carolCopy = d
		}
	}
	h.now.Add(int64(3 * time.Second))
	if err := clickOn(h, "carol", ref, carolCopy, true); err != nil {
		t.Fatal(err)
	}
	h.push(calls(tc("b", "deploy", `{"again":true}`)), text("expired"))
	h.turn("bob", "deploy again")
	h.now.Add(int64(11 * time.Minute))
	if err := h.bot.Sweep(context.Background()); err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	body := rec.Body.String()
	for _, want := range []string{
		`airlock_calls_decided_total{outcome="allowed",surface="dm",tool="deploy"} 1`,
		`airlock_decision_seconds_bucket{outcome="allowed",tool="deploy",le="2"} 0`,
		`airlock_decision_seconds_bucket{outcome="allowed",tool="deploy",le="5"} 1`,
		`airlock_calls_expired_total{tool="deploy"} 1`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
}
