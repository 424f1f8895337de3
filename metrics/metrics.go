// Package metrics owns Airlock's Prometheus metrics: their names (a
// contract with operators' dashboards), the registry served on
// GET /metrics, and small recorders the bot, the model providers, the
// platforms and the webhook deliverer call. Background jobs' metrics live
// in jobs/ and join this registry. A nil *Metrics records nothing.
package metrics

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/airlockhq/airlock/model"
)

// Metrics holds the collectors. Create it with New.
type Metrics struct {
	reg *prometheus.Registry

	decisions         *prometheus.CounterVec
	decisionWait      prometheus.Histogram
	toolRuns          *prometheus.CounterVec
	toolRunSeconds    *prometheus.HistogramVec
	modelRequests     *prometheus.CounterVec
	modelSeconds      *prometheus.HistogramVec
	webhookDeliveries *prometheus.CounterVec
	ackSeconds        *prometheus.HistogramVec
	decisionSeconds   *prometheus.HistogramVec
	callsDecided      *prometheus.CounterVec
	callsExpired      *prometheus.CounterVec
	auditForeignHeads prometheus.Counter
	rb                runbookCollectors
	cs                cardSyncCollectors
	gwUnauthorized    prometheus.Counter
}

// New registers Airlock's metrics, plus the Go runtime's and the
// process's. pending, when not nil, is read at each scrape for
// airlock_pending_approvals (calls waiting for a decision).
func New(pending func() float64) *Metrics {
	reg := prometheus.NewRegistry()
	m := &Metrics{
		reg:            reg,
		rb:             newRunbookCollectors(),
		cs:             newCardSyncCollectors(),
		gwUnauthorized: newGatewayUnauthorized(),
		decisions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "airlock_decisions_total", Help: "Decisions on calls that needed a person, by outcome (allowed, denied, expired, abandoned).",
		}, []string{"outcome"}),
		decisionWait: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "airlock_decision_wait_seconds", Help: "Time from the pause to a call's decision.",
			Buckets: []float64{1, 5, 15, 30, 60, 120, 300, 600, 1200, 1800, 3600, 7200},
		}),
		toolRuns: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "airlock_tool_runs_total", Help: "Tool runs by tool and outcome (succeeded, failed, unknown).",
		}, []string{"tool", "status"}),
		toolRunSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "airlock_tool_run_seconds", Help: "Duration of tool runs.", Buckets: prometheus.DefBuckets,
		}, []string{"tool"}),
		modelRequests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "airlock_model_requests_total", Help: "Model requests by provider and outcome (ok, error).",
		}, []string{"provider", "status"}),
		modelSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "airlock_model_request_seconds", Help: "Duration of model requests, retries included.",
			Buckets: []float64{0.25, 0.5, 1, 2, 4, 8, 15, 30, 60, 120},
		}, []string{"provider"}),
		webhookDeliveries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "airlock_webhook_deliveries_total", Help: "Webhook delivery attempts by outcome (delivered, failed, dead).",
		}, []string{"status"}),
		ackSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "airlock_ack_seconds", Help: "Time to acknowledge a platform's event or click.",
			Buckets: []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 3},
		}, []string{"platform"}),
		decisionSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "airlock_decision_seconds", Help: "Time from the pause to a person's decision of a call, by tool and outcome (allowed, denied).",
			Buckets: []float64{1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 1800, 3600},
		}, []string{"tool", "outcome"}),
		callsDecided: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "airlock_calls_decided_total", Help: "Calls a person decided, by tool, outcome (allowed, denied) and surface (thread, approvals_channel, dm, terminal, edit_modal, web).",
		}, []string{"tool", "outcome", "surface"}),
		callsExpired: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "airlock_calls_expired_total", Help: "Calls that expired without a decision, by tool.",
		}, []string{"tool"}),
		auditForeignHeads: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "airlock_audit_foreign_heads_total", Help: "Times Airlock found the audit chain's head at a row it did not write (its MAC does not verify) and chained around it.",
		}),
	}
	reg.MustRegister(m.decisions, m.decisionWait, m.toolRuns, m.toolRunSeconds, m.modelRequests, m.modelSeconds,
		m.webhookDeliveries, m.ackSeconds, m.decisionSeconds, m.callsDecided, m.callsExpired, m.auditForeignHeads, m.rb.runs, m.rb.stepSeconds,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	reg.MustRegister(m.cs.all()...)
	reg.MustRegister(m.gwUnauthorized)
	if pending != nil {
		reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "airlock_pending_approvals", Help: "Calls waiting for a person's decision.",
		}, pending))
	}
	return m
}

// Registerer is the registry GET /metrics serves, for collectors other
// packages keep beside their code (jobs/); nil for a nil *Metrics.
func (m *Metrics) Registerer() prometheus.Registerer {
	if m == nil {
		return nil
	}
	return m.reg
}

// Handler serves the metrics in the Prometheus text format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{})
}

// Decision records a decision on a call that needed a person, and how long
// it waited since the pause.
func (m *Metrics) Decision(outcome string, wait time.Duration) {
	if m == nil {
		return
	}
	m.decisions.WithLabelValues(outcome).Inc()
	if wait >= 0 {
		m.decisionWait.Observe(wait.Seconds())
	}
}

// CallDecided records a person's decision of a call of tool (outcome
// allowed or denied) from surface, wait after its pause.
func (m *Metrics) CallDecided(tool, outcome, surface string, wait time.Duration) {
	if m == nil {
		return
	}
	m.callsDecided.WithLabelValues(tool, outcome, surface).Inc()
	if wait >= 0 {
		m.decisionSeconds.WithLabelValues(tool, outcome).Observe(wait.Seconds())
	}
}

// CallExpired records a call of tool that expired undecided.
func (m *Metrics) CallExpired(tool string) {
	if m == nil {
		return
	}
	m.callsExpired.WithLabelValues(tool).Inc()
}

// AuditForeignHead records that the audit chain's head was a row Airlock
// did not write (storage.AuditAlarm).
func (m *Metrics) AuditForeignHead() {
	if m == nil {
		return
	}
	m.auditForeignHeads.Inc()
}

// ToolRun records one tool run and its duration.
func (m *Metrics) ToolRun(tool, status string, d time.Duration) {
	if m == nil {
		return
	}
	m.toolRuns.WithLabelValues(tool, status).Inc()
	m.toolRunSeconds.WithLabelValues(tool).Observe(d.Seconds())
}

// WebhookDelivery records one delivery attempt's outcome.
func (m *Metrics) WebhookDelivery(status string) {
	if m == nil {
		return
	}
	m.webhookDeliveries.WithLabelValues(status).Inc()
}

// Ack records how long a platform's event or click took to acknowledge.
func (m *Metrics) Ack(platform string, d time.Duration) {
	if m == nil {
		return
	}
	m.ackSeconds.WithLabelValues(platform).Observe(d.Seconds())
}

// Provider wraps a model provider so each request is counted and timed.
func (m *Metrics) Provider(p model.Provider, name string) model.Provider {
	if m == nil {
		return p
	}
	return &timedProvider{p: p, name: name, m: m}
}

type timedProvider struct {
	p    model.Provider
	name string
	m    *Metrics
}

var _ model.Provider = (*timedProvider)(nil)

func (t *timedProvider) Generate(ctx context.Context, req model.Request) (model.Message, error) {
	start := time.Now()
	msg, err := t.p.Generate(ctx, req)
	status := "ok"
	switch {
	case errors.Is(err, context.Canceled):
		status = "canceled"
	case err != nil:
		status = "error"
	}
	t.m.modelRequests.WithLabelValues(t.name, status).Inc()
	t.m.modelSeconds.WithLabelValues(t.name).Observe(time.Since(start).Seconds())
	return msg, err
}
