package card

import (
	"testing"
	"time"

	"github.com/airlockhq/airlock/confirm"
)

// Each audit row of a request reads as a sentence of Airlock's, with
// people as Person parts and tools as Code parts; a kind this version
// does not know is named as code.
func TestHistoryLines(t *testing.T) {
	at := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		e    HistoryEvent
		want string
	}{
		{HistoryEvent{Kind: confirm.AuditToolCall, Actor: "U1", Call: 2, Tool: "deploy"}, "U1 asked for call 2, deploy (the agent's call)"},
		{HistoryEvent{Kind: confirm.AuditApproval, Actor: "U2", Call: 1, Tool: "deploy", Votes: 1, Required: 2, Via: confirm.AssurancePasskey},
			"U2 approved call 1, deploy with a passkey (1 of 2 approvals)"},
		{HistoryEvent{Kind: confirm.AuditDecision, Actor: "U2", Call: 1, Tool: "deploy", Status: "denied"}, "U2 denied call 1, deploy"},
		{HistoryEvent{Kind: confirm.AuditDecision, Actor: SystemActor, Call: 1, Status: "expired"}, "call 1 expired: nobody decided in time"},
		{HistoryEvent{Kind: confirm.AuditDecision, Actor: "U1", Call: 1, Status: "denied", Abandoned: true}, "call 1 not run: the requester moved on"},
		{HistoryEvent{Kind: confirm.AuditDecision, Actor: "rule:no-drops", Call: 1, Status: "denied_by_rule"}, "call 1: denied_by_rule by rule no-drops"},
		{HistoryEvent{Kind: confirm.AuditRejectedClick, Actor: "U3", Call: 1, Why: "not an approver"}, "U3's click on call 1 changed nothing: not an approver"},
		{HistoryEvent{Kind: "future_kind", Actor: "U3"}, "future_kind by U3"},
	} {
		tc.e.At = at
		l := tc.e.Line()
		if got := PlainText(l.Parts); got != "at 12:00:00 UTC "+tc.want {
			t.Errorf("%s: %q, want %q", tc.e.Kind, got, "at 12:00:00 UTC "+tc.want)
		}
		for _, p := range l.Parts {
			if p.Kind == Words && (p.Text == tc.e.Actor && tc.e.Actor != "" || p.Text == tc.e.Tool && tc.e.Tool != "") {
				t.Errorf("%s: %q as words", tc.e.Kind, p.Text)
			}
		}
	}
}
