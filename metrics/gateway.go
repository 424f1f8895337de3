package metrics

import (
	"github.com/airlockhq/airlock/gateway"
	"github.com/prometheus/client_golang/prometheus"
)

// GatewayUnauthorizedMetric counts the approval API's requests refused
// for their token.
const GatewayUnauthorizedMetric = "airlock_gateway_unauthorized_total"

var _ gateway.Metrics = (*Metrics)(nil)

func newGatewayUnauthorized() prometheus.Counter {
	return prometheus.NewCounter(prometheus.CounterOpts{
		Name: GatewayUnauthorizedMetric, Help: "Requests to the approval API (/v1/approvals) refused for a missing or wrong token.",
	})
}

// GatewayUnauthorized counts a request refused for its token.
func (m *Metrics) GatewayUnauthorized() {
	if m == nil {
		return
	}
	m.gwUnauthorized.Inc()
}
