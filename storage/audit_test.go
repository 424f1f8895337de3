package storage

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/airlockhq/airlock/confirm"
)

func testAuditEvents(t *testing.T, db *DB) {
	ctx := t.Context()
	conv := newConversation(t, db)
	other := newConversation(t, db)
	t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	events := []confirm.AuditEvent{
		{At: t0.Add(2 * time.Second), Kind: confirm.AuditRejectedClick, ConversationID: conv.ID, BatchID: "b1", CallKey: "k", Actor: "U-mallory", Detail: `{"reason":"not allowed"}`},
		{At: t0, Kind: confirm.AuditDecision, ConversationID: other.ID, Actor: "U"},
		{At: t0.Add(time.Second), Kind: confirm.AuditToolResult, ConversationID: conv.ID, Tool: "deploy", Actor: "airlock", Detail: `{}`},
		{Kind: confirm.AuditApprovalRequest, ConversationID: conv.ID}, // At now: before t0
	}
	before := time.Now().UTC()
	for _, e := range events {
		if err := db.Audit(ctx, e); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Audit(ctx, confirm.AuditEvent{}); err == nil {
		t.Error("Audit without kind succeeded")
	}
	all, err := db.AuditEvents(ctx, confirm.AuditFilter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 4 {
		t.Fatalf("got %d events, want 4", len(all))
	}
	if b1, err := db.AuditEvents(ctx, confirm.AuditFilter{ConversationID: conv.ID, BatchID: "b1"}); err != nil || len(b1) != 1 || b1[0].Actor != "U-mallory" {
		t.Fatalf("the rows of request b1: %+v, %v", b1, err)
	}
	for i, e := range all {
		if e.Kind != events[i].Kind || (i > 0 && e.ID <= all[i-1].ID) {
			t.Errorf("event %d = %+v, want kind %s in id order", i, e, events[i].Kind)
		}
	}
	if e := all[0]; !e.At.Equal(events[0].At) || e.BatchID != "b1" || e.CallKey != "k" || e.Actor != "U-mallory" || e.Detail != events[0].Detail {
		t.Errorf("event 0 = %+v", e)
	}
	if at := all[3].At; at.Before(before.Add(-time.Second)) || at.Location() != time.UTC {
		t.Errorf("zero At stored as %v, want now in UTC", at)
	}
	mine, err := db.AuditEvents(ctx, confirm.AuditFilter{ConversationID: conv.ID})
	if err != nil || len(mine) != 3 {
		t.Fatalf("filtered by conversation: %d events, %v", len(mine), err)
	}
	since, err := db.AuditEvents(ctx, confirm.AuditFilter{ConversationID: conv.ID, Since: t0.Add(time.Second)})
	if err != nil {
		t.Fatal(err)
	}
	var kinds []confirm.AuditKind
	for _, e := range since {
		kinds = append(kinds, e.Kind)
	}
	if fmt.Sprint(kinds) != fmt.Sprint([]confirm.AuditKind{confirm.AuditRejectedClick, confirm.AuditToolResult}) {
		t.Errorf("since filter kinds = %v", kinds)
	}
}

func testAuditAppendOnly(t *testing.T, db *DB) {
	ctx := t.Context()
	if err := db.Audit(ctx, confirm.AuditEvent{Kind: confirm.AuditDecision, Actor: "U"}); err != nil {
		t.Fatal(err)
	}
	if _, err := db.x.ExecContext(ctx, `UPDATE audit SET actor = 'someone else'`); err == nil {
		t.Error("UPDATE of audit succeeded")
	}
	if _, err := db.x.ExecContext(ctx, `DELETE FROM audit`); err == nil {
		t.Error("DELETE from audit succeeded")
	}
	evs, err := db.AuditEvents(ctx, confirm.AuditFilter{})
	if err != nil || len(evs) != 1 || evs[0].Actor != "U" {
		t.Fatalf("audit after refused changes = %+v, %v", evs, err)
	}
}

func testExactArgsInAudit(t *testing.T, db *DB) {
	ctx := t.Context()
	conv := newConversation(t, db)
	const args = `{"cmd": "a && b <c>",  "n": 1}` // two spaces, and <>& json.Marshal would escape
	b := &confirm.Batch{ConversationID: conv.ID, RequestedBy: "U", ExpiresAt: later(), Calls: []confirm.Call{
		{Key: "exact", Position: 0, CallID: "c1", Tool: "shell", Args: json.RawMessage(args), Flagged: true, Summary: "run <it> & see"},
		{Key: "bad", Position: 1, Tool: "shell", Args: json.RawMessage(`{not json`), Decision: confirm.DecisionInvalid},
		{Key: "empty", Position: 2, Tool: "shell", Decision: confirm.DecisionAllowedByPolicy},
	}}
	if err := db.CreateBatch(ctx, b, confirm.Message{Role: "assistant", Body: json.RawMessage(`1`)}); err != nil {
		t.Fatal(err)
	}
	if got := callByKey(t, loadBatch(t, db, b.ID), "exact").Args; string(got) != args {
		t.Errorf("Batch args = %q, want exactly %q", got, args)
	}
	evs, err := db.AuditEvents(ctx, confirm.AuditFilter{ConversationID: conv.ID})
	if err != nil {
		t.Fatal(err)
	}
	// Parsed the way `airlock audit` parses a tool_call detail.
	type toolCallDetail struct {
		CallID   string          `json:"call_id"`
		Args     json.RawMessage `json:"args"`
		Flagged  bool            `json:"flagged"`
		Decision string          `json:"decision"`
		Summary  string          `json:"summary"`
	}
	details := map[string]toolCallDetail{}
	for _, e := range evs {
		if e.Kind != confirm.AuditToolCall {
			continue
		}
		var d toolCallDetail
		if err := json.Unmarshal([]byte(e.Detail), &d); err != nil {
			t.Fatalf("tool_call detail of %s is not a JSON object: %s (%v)", e.CallKey, e.Detail, err)
		}
		details[e.CallKey] = d
		if e.CallKey == "exact" && !strings.Contains(e.Detail, `"args":`+args) {
			t.Errorf("detail = %s, want the args spliced in verbatim", e.Detail)
		}
	}
	if d := details["exact"]; string(d.Args) != args || d.CallID != "c1" || !d.Flagged || d.Decision != "pending" || d.Summary != "run <it> & see" {
		t.Errorf("exact detail = %+v (args %q, want %q)", d, d.Args, args)
	}
	var s string
	if err := json.Unmarshal(details["bad"].Args, &s); err != nil || s != `{not json` {
		t.Errorf("invalid args in detail = %s (%v), want the JSON string of the bytes", details["bad"].Args, err)
	}
	if err := json.Unmarshal(details["empty"].Args, &s); err != nil || s != "" {
		t.Errorf("empty args in detail = %s (%v), want \"\"", details["empty"].Args, err)
	}
}
