package jobs

import (
	"errors"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metric names: a contract with operators' dashboards, as metrics/ keeps.
const (
	SecondsMetric = "airlock_job_seconds"
	ErrorsMetric  = "airlock_job_errors_total"
)

// metrics are a runner's collectors.
type metrics struct {
	seconds *prometheus.HistogramVec
	errors  *prometheus.CounterVec
}

// newMetrics makes the collectors and registers them with reg (when not
// nil); collectors reg already holds under these names are shared.
func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		seconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: SecondsMetric, Help: "Duration of background jobs' runs, by job.",
			Buckets: []float64{0.001, 0.005, 0.025, 0.1, 0.5, 1, 5, 15, 60, 300, 1800},
		}, []string{"job"}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: ErrorsMetric, Help: "Background jobs' runs that failed, timed out or panicked, by job.",
		}, []string{"job"}),
	}
	if reg != nil {
		m.seconds = register(reg, m.seconds)
		m.errors = register(reg, m.errors)
	}
	return m
}

// register registers c, or returns the collector of its kind reg already
// has under its name.
func register[C prometheus.Collector](reg prometheus.Registerer, c C) C {
	err := reg.Register(c)
	var dup prometheus.AlreadyRegisteredError
	if errors.As(err, &dup) {
		if old, ok := dup.ExistingCollector.(C); ok {
			return old
		}
	}
	if err != nil {
		panic(err)
	}
	return c
}

// declare makes a job's series exist from its start, at zero.
func (m *metrics) declare(job string) {
	m.seconds.WithLabelValues(job)
	m.errors.WithLabelValues(job)
}

func (m *metrics) observe(job string, d time.Duration) {
	m.seconds.WithLabelValues(job).Observe(d.Seconds())
}

func (m *metrics) failed(job string) { m.errors.WithLabelValues(job).Inc() }
