package metrics_test

import (
	"strings"
	"testing"
	"time"

	"github.com/airlockhq/airlock/bot"
	"github.com/airlockhq/airlock/metrics"
	"github.com/prometheus/client_golang/prometheus"
)

var _ bot.Metrics = (*metrics.Metrics)(nil)

// The card-sync metrics are registered under their documented names.
func TestCardSyncMetrics(t *testing.T) {
	m := metrics.New(nil)
	m.CardsBehind(3)
	m.CardSynced(1500 * time.Millisecond)
	m.PlatformRateLimited("slack", "chat.update")
	m.PlatformRateLimited("slack", "chat.update")
	fams, err := m.Registerer().(prometheus.Gatherer).Gather()
	if err != nil {
		t.Fatal(err)
	}
	found := map[string]string{}
	for _, f := range fams {
		found[f.GetName()] = f.String()
	}
	if s := found["airlock_card_sync_behind"]; !strings.Contains(s, "value:3") {
		t.Fatalf("airlock_card_sync_behind = %s", s)
	}
	if s := found["airlock_card_sync_seconds"]; !strings.Contains(s, "sample_count:1") {
		t.Fatalf("airlock_card_sync_seconds = %s", s)
	}
	if s := found["airlock_platform_rate_limited_total"]; !strings.Contains(s, `value:"chat.update"`) || !strings.Contains(s, "value:2") {
		t.Fatalf("airlock_platform_rate_limited_total = %s", s)
	}
	var nilM *metrics.Metrics
	nilM.CardsBehind(1) // a nil Metrics records nothing
}
