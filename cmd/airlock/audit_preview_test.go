package main

import (
	"strings"
	"testing"
	"time"

	"github.com/airlockhq/airlock/confirm"
)

// airlock audit tells the preview's hash the approver saw and what the
// recheck found.
func TestAuditRecordsPreviewAndRecheck(t *testing.T) {
	at := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	approved, now := confirm.PreviewHash("v1"), confirm.PreviewHash("v2")
	rs := auditRecords([]confirm.AuditEvent{
		{At: at, Kind: confirm.AuditToolCall, BatchID: "b", CallKey: "k", Tool: "apply", Actor: "U1", Detail: `{"args":{}}`},
		{At: at, Kind: confirm.AuditToolResult, BatchID: "b", CallKey: "k", Tool: "apply", Actor: "airlock",
			Detail: `{"status":"failed","result":"Not executed: the preview changed","preview_hash":"` + approved + `","recheck":"changed","recheck_hash":"` + now + `"}`},
	})
	if len(rs) != 1 || rs[0].PreviewHash != approved || rs[0].Recheck != "changed" || rs[0].RecheckHash != now {
		t.Fatalf("records %+v", rs)
	}
	var out strings.Builder
	printRecords(&out, rs)
	if want := "sha256 " + approved[:12] + "; recheck changed (sha256 " + now[:12] + ")"; !strings.Contains(out.String(), want) {
		t.Fatalf("audit output lacks %q:\n%s", want, out.String())
	}
}
