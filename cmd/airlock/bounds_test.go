package main

import (
	"testing"

	"github.com/airlockhq/airlock/confirm"
)

// A coalesced rejected click's count reaches `airlock audit`.
func TestAuditShowsSuppressedRejectedClicks(t *testing.T) {
	rs := auditRecords([]confirm.AuditEvent{
		{Kind: confirm.AuditToolCall, BatchID: "b", CallKey: "k", Tool: "deploy", Detail: `{}`},
		{Kind: confirm.AuditRejectedClick, BatchID: "b", CallKey: "k", Actor: "U-mallory", Detail: `{"why":"not an approver"}`},
		{Kind: confirm.AuditRejectedClick, BatchID: "b", CallKey: "k", Actor: "U-mallory", Detail: `{"why":"not an approver","suppressed":41}`},
	})
	if len(rs) != 1 || len(rs[0].RejectedClicks) != 2 || rs[0].RejectedClicks[1].Suppressed != 41 || rs[0].RejectedClicks[0].Suppressed != 0 {
		t.Fatalf("records: %+v", rs)
	}
}
