package metrics

import (
	"strings"
	"testing"
	"time"
)

// The runbook metrics are registered under their documented names and
// count by runbook and outcome.
func TestRunbookMetrics(t *testing.T) {
	m := New(nil)
	m.RunbookRun("restart", "succeeded")
	m.RunbookRun("restart", "succeeded")
	m.RunbookStep("restart", "succeeded", 2*time.Second)
	fams, err := m.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	found := map[string]string{}
	for _, f := range fams {
		if strings.HasPrefix(f.GetName(), "airlock_runbook_") {
			found[f.GetName()] = f.String()
		}
	}
	runs := found["airlock_runbook_runs_total"]
	if !strings.Contains(runs, `value:"restart"`) || !strings.Contains(runs, `value:"succeeded"`) || !strings.Contains(runs, "value:2") {
		t.Fatalf("airlock_runbook_runs_total = %s", runs)
	}
	if !strings.Contains(found["airlock_runbook_step_seconds"], "sample_count:1") {
		t.Fatalf("airlock_runbook_step_seconds = %s", found["airlock_runbook_step_seconds"])
	}
	var nilM *Metrics
	nilM.RunbookRun("x", "y") // a nil Metrics records nothing
}
