package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/airlockhq/airlock/confirm"
	"github.com/airlockhq/airlock/storage"
)

// `airlock audit` tells how each vote of a quorum was made: the table
// names it after the voter ("U-alice (passkey)"), -json as approved_by's
// via; a chat vote names nothing.
func TestAuditTellsHowEachVoteWasMade(t *testing.T) {
	ctx := context.Background()
	dsn := filepath.Join(t.TempDir(), "a.db")
	db, err := storage.Open(ctx, "sqlite", dsn)
	if err != nil {
		t.Fatal(err)
	}
	conv, err := db.Conversation(ctx, "slack", "C1", "t1", false)
	if err != nil {
		t.Fatal(err)
	}
	b := &confirm.Batch{ConversationID: conv.ID, RequestedBy: "U-req", Calls: []confirm.Call{{
		Key: "k", CallID: "c", Tool: "deploy", Args: json.RawMessage(`{}`), Summary: "deploy", Flagged: true, Approvals: 3,
	}}}
	if err := db.CreateBatch(ctx, b, confirm.Message{Role: "assistant", Body: json.RawMessage(`{"calls":[]}`)}); err != nil {
		t.Fatal(err)
	}
	for _, v := range []struct {
		by  string
		via confirm.Assurance
	}{{"U-alice", confirm.AssurancePasskey}, {"U-bob", ""}, {"U-carol", confirm.AssuranceSSO}} {
		if _, err := db.Decide(ctx, confirm.Decide{BatchID: b.ID, Key: "k", Status: confirm.DecisionAllowed, By: v.by, Assurance: v.via}); err != nil {
			t.Fatal(err)
		}
	}
	db.Close()
	cfg := writeFile(t, "c.yaml", fmt.Sprintf("storage: {driver: sqlite, dsn: '%s'}\nmodel: {provider: openai, name: m}\n", dsn))
	var out, errOut bytes.Buffer
	if code := run(ctx, []string{"audit", "-config", cfg, "-json"}, nil, &out, &errOut); code != 0 {
		t.Fatalf("audit -json: %d %s", code, errOut.String())
	}
	var recs []struct {
		ApprovedBy []struct{ By, Via string } `json:"approved_by"`
		DecidedVia string                     `json:"decided_via"`
	}
	if err := json.Unmarshal(out.Bytes(), &recs); err != nil || len(recs) != 1 {
		t.Fatalf("%v:\n%s", err, out.String())
	}
	rec := recs[0]
	if got := fmt.Sprint(rec.ApprovedBy); got != "[{U-alice passkey} {U-bob } {U-carol sso}]" || rec.DecidedVia != "sso" {
		t.Fatalf("approved_by %s, decided_via %q", got, rec.DecidedVia)
	}
	out.Reset()
	if code := run(ctx, []string{"audit", "-config", cfg}, nil, &out, &errOut); code != 0 {
		t.Fatalf("audit: %d %s", code, errOut.String())
	}
	for _, want := range []string{"U-alice (passkey)", "U-carol (sso)"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the table lacks %q:\n%s", want, out.String())
		}
	}
	if strings.Contains(out.String(), "U-bob (") {
		t.Errorf("a chat vote named a proof:\n%s", out.String())
	}
}
