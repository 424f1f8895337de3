package main

import (
	"testing"
	"time"

	"github.com/airlockhq/airlock/confirm"
)

// airlock audit tells who marked an unknown outcome checked.
func TestAuditRecordsChecked(t *testing.T) {
	at := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	rs := auditRecords([]confirm.AuditEvent{
		{At: at, Kind: confirm.AuditToolCall, BatchID: "b", CallKey: "k", Tool: "charge", Actor: "U1", Detail: `{"args":{"amount":10}}`},
		{At: at, Kind: confirm.AuditToolResult, BatchID: "b", CallKey: "k", Tool: "charge", Actor: "airlock", Detail: `{"status":"unknown"}`},
		{At: at.Add(time.Minute), Kind: confirm.AuditUnknownChecked, BatchID: "b", CallKey: "k", Tool: "charge", Actor: "U2"},
	})
	if len(rs) != 1 || rs[0].Outcome != "unknown" || rs[0].Checked == nil || rs[0].Checked.By != "U2" || !rs[0].Checked.At.Equal(at.Add(time.Minute)) {
		t.Fatalf("records %+v", rs)
	}
}
