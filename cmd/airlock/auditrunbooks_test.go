package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/airlockhq/airlock/confirm"
)

// airlock audit shows runs and their steps: the start with its
// parameters, each step's outcome and result, the end.
func TestAuditPrintsRunbookRuns(t *testing.T) {
	at := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	events := []confirm.AuditEvent{
		{At: at, Kind: confirm.AuditToolCall, ConversationID: 1, BatchID: "b1", CallKey: "k", Tool: "x", Detail: `{}`},
		{At: at, Kind: confirm.AuditRunbookStarted, ConversationID: 1, Tool: "restart", Actor: "U-bob", Detail: `{"run_id":"r1abcdefgh","runbook":"restart","params":{"service":"api"}}`},
		{At: at, Kind: confirm.AuditRunbookStep, ConversationID: 1, BatchID: "b2", CallKey: "r1/before/1", Tool: "svc_status", Actor: "airlock", Detail: `{"run_id":"r1abcdefgh","runbook":"restart","step":"before","attempt":1,"outcome":"failed","result":"HTTP 500"}`},
		{At: at, Kind: confirm.AuditRunbookFinished, ConversationID: 1, Tool: "restart", Actor: "airlock", Detail: `{"run_id":"r1abcdefgh","outcome":"failed","failed_step":"before"}`},
	}
	var out bytes.Buffer
	printRunbookEvents(&out, events)
	got := out.String()
	for _, want := range []string{`started {"service":"api"}`, "step before (svc_status, attempt 1): failed: HTTP 500", "finished: failed at before", "U-bob", "restart"} {
		if !strings.Contains(got, want) {
			t.Errorf("audit output lacks %q:\n%s", want, got)
		}
	}
	out.Reset()
	printRunbookEvents(&out, events[:1])
	if out.Len() != 0 {
		t.Errorf("no runs, yet printed %q", out.String())
	}
}
