package card

import (
	"testing"

	"github.com/airlockhq/airlock/confirm"
)

// A run message offers Stop run while the run goes, Mark done, Retry and
// Stop while it is halted, nothing once it ended; every button carries
// the run's reference only.
func TestRunActions(t *testing.T) {
	want := map[confirm.RunbookStatus][]ActionKind{
		confirm.RunbookRunning:   {ActRunStop},
		confirm.RunbookHalted:    {ActRunMarkDone, ActRunRetry, ActRunStop},
		confirm.RunbookSucceeded: nil, confirm.RunbookFailed: nil, confirm.RunbookDenied: nil,
		confirm.RunbookExpired: nil, confirm.RunbookStopped: nil,
	}
	for st, kinds := range want {
		acts := Run{ID: "abc123", Runbook: "restart", Status: st, HaltedAt: "x"}.Actions()
		if len(acts) != len(kinds) {
			t.Fatalf("%s: %+v", st, acts)
		}
		for i, a := range acts {
			if a.Kind != kinds[i] || a.Ref != confirm.RunRef("abc123") || a.Label == "" {
				t.Fatalf("%s: action %d: %+v", st, i, a)
			}
		}
	}
}
