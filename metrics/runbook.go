package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// runbookCollectors are the runbook runs' metrics.
type runbookCollectors struct {
	runs        *prometheus.CounterVec
	stepSeconds *prometheus.HistogramVec
}

func newRunbookCollectors() runbookCollectors {
	return runbookCollectors{
		runs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "airlock_runbook_runs_total", Help: "Runbook runs ended, by runbook and outcome (succeeded, failed, denied, expired, stopped).",
		}, []string{"runbook", "outcome"}),
		stepSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "airlock_runbook_step_seconds", Help: "Duration of runbook steps, from their start to their outcome (waits for a person included).",
			Buckets: []float64{0.1, 0.5, 1, 5, 15, 60, 300, 900, 1800, 3600},
		}, []string{"runbook", "outcome"}),
	}
}

// RunbookRun records one ended run.
func (m *Metrics) RunbookRun(runbook, outcome string) {
	if m == nil {
		return
	}
	m.rb.runs.WithLabelValues(runbook, outcome).Inc()
}

// RunbookStep records one step's outcome and duration.
func (m *Metrics) RunbookStep(runbook, outcome string, d time.Duration) {
	if m == nil {
		return
	}
	m.rb.stepSeconds.WithLabelValues(runbook, outcome).Observe(d.Seconds())
}
