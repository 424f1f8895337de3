package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Names of the card-sync metrics (see bot/cardsync.go).
const (
	CardSyncBehindMetric      = "airlock_card_sync_behind"
	CardSyncSecondsMetric     = "airlock_card_sync_seconds"
	PlatformRateLimitedMetric = "airlock_platform_rate_limited_total"
)

// cardSyncCollectors are the card-sync job's metrics.
type cardSyncCollectors struct {
	behind      prometheus.Gauge
	seconds     prometheus.Histogram
	rateLimited *prometheus.CounterVec
}

func newCardSyncCollectors() cardSyncCollectors {
	return cardSyncCollectors{
		behind: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: CardSyncBehindMetric, Help: "Card messages (cards, copies, pointers) whose platform rendering is behind their batch's state, as the card-sync job last counted.",
		}),
		seconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: CardSyncSecondsMetric, Help: "Time from a change of a batch's state to its card message showing it on the platform.",
			Buckets: []float64{0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60, 120, 300, 900},
		}),
		rateLimited: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: PlatformRateLimitedMetric, Help: "Platform answers that rate-limited a card update, by platform and method.",
		}, []string{"platform", "method"}),
	}
}

func (c cardSyncCollectors) all() []prometheus.Collector {
	return []prometheus.Collector{c.behind, c.seconds, c.rateLimited}
}

// CardsBehind records how many card messages are behind.
func (m *Metrics) CardsBehind(n int) {
	if m == nil {
		return
	}
	m.cs.behind.Set(float64(n))
}

// CardSynced records a card message rendered d after its batch changed.
func (m *Metrics) CardSynced(d time.Duration) {
	if m == nil || d < 0 {
		return
	}
	m.cs.seconds.Observe(d.Seconds())
}

// PlatformRateLimited counts a platform's rate limit of a method.
func (m *Metrics) PlatformRateLimited(platform, method string) {
	if m == nil {
		return
	}
	m.cs.rateLimited.WithLabelValues(platform, method).Inc()
}
