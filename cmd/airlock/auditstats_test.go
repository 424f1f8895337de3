package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/airlockhq/airlock/confirm"
	"github.com/airlockhq/airlock/storage"
)

func TestAuditStatsSQLite(t *testing.T) {
	testAuditStats(t, "sqlite", filepath.Join(t.TempDir(), "a.db"))
}

func TestAuditStatsPostgres(t *testing.T) {
	pg := os.Getenv("AIRLOCK_TEST_POSTGRES_DSN")
	if pg == "" {
		t.Skip("AIRLOCK_TEST_POSTGRES_DSN not set")
	}
	testAuditStats(t, "postgres", freshSchema(t, pg))
}

// statsHistory scripts a history on the store's clock:
//
//	deploy, 20 cards: 19 allowed by U-alice after 1,2,3,4,5,1,2,… s (1–4 s four
//	times each, 5 s three times), the first with a grant that a later call
//	uses; 1 denied by U-bob after 40 s. Sorted: 1×4 2×4 3×4 4×4 5×3 40:
//	median (10th+11th)/2 = 3 s, p90 (18th) = 5 s, 19 of 20 allowed within
//	10 s (95%): rubber-stamped.
//	restart, 4 cards: allowed by U-bob after 20 s; denied by U-alice after
//	6 s; expired after 30 m; edited by U-bob after 5 s (an approver's edit
//	allows the call). Decided 5, 6, 20: median 6 s, p90 (3rd) 20 s, 1 of 4
//	allowed within 10 s.
//	status: allowed by policy, no card.
//	restart, 2 more cards: one abandoned (the requester moved on), one still
//	waiting: 6 cards = 2 allowed + 1 denied + 1 expired + 1 abandoned + 1
//	waiting; 1 of 6 allowed within 10 s.
//
// Approvers: U-alice 20 decisions (1×4 … 5×3 and 6: median 3 s); U-bob 3
// (40, 20, 5: median 20 s), the restart allowed with a passkey and the
// edit made after a fresh sign-in.
func statsHistory(t *testing.T, driver, dsn string) {
	ctx := context.Background()
	now := time.Date(2026, 5, 1, 9, 0, 0, 0, time.UTC)
	db, err := storage.Open(ctx, driver, dsn, storage.WithClock(func() time.Time { return now }))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	thread := 0
	card := func(tool string, d confirm.DecisionStatus) *confirm.Batch {
		t.Helper()
		thread++
		conv, err := db.Conversation(ctx, "slack", "C1", fmt.Sprint("t", thread), false)
		if err != nil {
			t.Fatal(err)
		}
		b := &confirm.Batch{ConversationID: conv.ID, RequestedBy: "U-req", ExpiresAt: now.Add(30 * time.Minute), Calls: []confirm.Call{{
			Key: "k", CallID: "c", Tool: tool, Args: json.RawMessage(`{}`), Summary: tool, Flagged: d == confirm.DecisionPending, Decision: d,
		}}}
		if err := db.CreateBatch(ctx, b, confirm.Message{Role: "assistant", Body: json.RawMessage(`{"calls":[]}`)}); err != nil {
			t.Fatal(err)
		}
		return b
	}
	var via confirm.Assurance // how the next decision is made ("": a chat click)
	decide := func(b *confirm.Batch, after time.Duration, s confirm.DecisionStatus, by string, rev int, g *confirm.Grant) {
		t.Helper()
		now = now.Add(after)
		if _, err := db.Decide(ctx, confirm.Decide{BatchID: b.ID, Key: "k", Status: s, By: by, Surface: confirm.SurfaceThread, Revision: rev, Grant: g, Assurance: via}); err != nil {
			t.Fatal(err)
		}
		now = now.Add(time.Minute)
	}
	var granted *confirm.Batch
	for k := range 19 {
		b := card("deploy", confirm.DecisionPending)
		var g *confirm.Grant
		if k == 0 {
			granted, g = b, &confirm.Grant{ID: "g1", Tool: "deploy", CreatedBy: "U-alice", ExpiresAt: now.Add(2 * time.Hour)}
		}
		decide(b, time.Duration(k%5+1)*time.Second, confirm.DecisionAllowed, "U-alice", 0, g)
	}
	decide(card("deploy", confirm.DecisionPending), 40*time.Second, confirm.DecisionDenied, "U-bob", 0, nil)
	// The grant covers a later call of its thread: no card.
	used := &confirm.Batch{ConversationID: granted.ConversationID, RequestedBy: "U-req", Calls: []confirm.Call{{
		Key: "k", CallID: "c2", Tool: "deploy", Args: json.RawMessage(`{}`), Summary: "deploy", Flagged: true, Decision: confirm.DecisionAllowedByGrant, GrantID: "g1",
	}}}
	if err := db.CreateBatch(ctx, used, confirm.Message{Role: "assistant", Body: json.RawMessage(`{"calls":[]}`)}); err != nil {
		t.Fatal(err)
	}

	via = confirm.AssurancePasskey
	decide(card("restart", confirm.DecisionPending), 20*time.Second, confirm.DecisionAllowed, "U-bob", 0, nil)
	via = ""
	decide(card("restart", confirm.DecisionPending), 6*time.Second, confirm.DecisionDenied, "U-alice", 0, nil)
	exp := card("restart", confirm.DecisionPending)
	now = now.Add(30 * time.Minute)
	if _, err := db.ExpirePending(ctx, exp.ID, "airlock", "expired"); err != nil {
		t.Fatal(err)
	}
	ed := card("restart", confirm.DecisionPending)
	now = now.Add(5 * time.Second)
	if _, err := db.EditCall(ctx, confirm.EditCall{BatchID: ed.ID, Key: "k", Args: json.RawMessage(`{"x":1}`), Summary: "restart x", By: "U-bob", Revision: 0, Approvals: 1, Grantable: true,
		Assurance: confirm.AssuranceSSO}); err != nil {
		t.Fatal(err)
	}
	card("status", confirm.DecisionAllowedByPolicy)
	ab := card("restart", confirm.DecisionPending)
	now = now.Add(3 * time.Second)
	if _, err := db.AbandonPending(ctx, ab.ID, "U-req", "the requester moved on"); err != nil {
		t.Fatal(err)
	}
	card("restart", confirm.DecisionPending)
}

func testAuditStats(t *testing.T, driver, dsn string) {
	statsHistory(t, driver, dsn)
	cfg := writeFile(t, "c.yaml", fmt.Sprintf("storage: {driver: %s, dsn: '%s'}\nmodel: {provider: openai, name: m}\n", driver, dsn))
	stats := func(args ...string) string {
		t.Helper()
		var out, errOut bytes.Buffer
		if code := run(context.Background(), append([]string{"audit", "stats", "-config", cfg}, args...), nil, &out, &errOut); code != 0 {
			t.Fatalf("audit stats %v: exit %d: %s", args, code, errOut.String())
		}
		return out.String()
	}
	var got struct {
		Tools         []storage.ToolStats     `json:"tools"`
		Approvers     []storage.ApproverStats `json:"approvers"`
		RubberStamped []struct {
			Tool    string `json:"tool"`
			Setting string `json:"setting"`
		} `json:"rubber_stamped"`
	}
	if err := json.Unmarshal([]byte(stats("-since", "0", "-json")), &got); err != nil {
		t.Fatal(err)
	}
	want := []storage.ToolStats{
		{Tool: "deploy", Cards: 20, Allowed: 19, Denied: 1, MedianSeconds: 3, P90Seconds: 5, AllowedWithin10s: 0.95, GrantsMade: 1, GrantsUsed: 1},
		{Tool: "restart", Cards: 6, Allowed: 2, Denied: 1, Expired: 1, Abandoned: 1, Waiting: 1, Edited: 1, MedianSeconds: 6, P90Seconds: 20, AllowedWithin10s: 1.0 / 6},
	}
	if fmt.Sprintf("%+v", got.Tools) != fmt.Sprintf("%+v", want) {
		t.Fatalf("tools:\n got  %+v\n want %+v", got.Tools, want)
	}
	wantA := []storage.ApproverStats{{Approver: "U-alice", Decisions: 20, MedianSeconds: 3}, {Approver: "U-bob", Decisions: 3, MedianSeconds: 20, Passkey: 1, SSO: 1}}
	if fmt.Sprintf("%+v", got.Approvers) != fmt.Sprintf("%+v", wantA) {
		t.Fatalf("approvers:\n got  %+v\n want %+v", got.Approvers, wantA)
	}
	if len(got.RubberStamped) != 1 || got.RubberStamped[0].Tool != "deploy" || !strings.Contains(got.RubberStamped[0].Setting, "confirmation.rules") ||
		!strings.Contains(got.RubberStamped[0].Setting, "confirmation.grants") {
		t.Fatalf("rubber-stamped: %+v", got.RubberStamped)
	}

	text := stats("-since", "0")
	for _, line := range []string{
		`TOOL\s+CARDS\s+ALLOWED\s+DENIED\s+EXPIRED\s+ABANDONED\s+WAITING\s+EDITED\s+MEDIAN`,
		`deploy\s+20\s+19\s+1\s+0\s+0\s+0\s+0\s+3\.0s\s+5\.0s\s+95%\s+1\s+1`,
		`restart\s+6\s+2\s+1\s+1\s+1\s+1\s+1\s+6\.0s\s+20\.0s\s+17%\s+0\s+0`,
		`APPROVER\s+DECISIONS\s+MEDIAN\s+PASSKEY\s+FRESH SIGN-IN`,
		`U-alice\s+20\s+3\.0s\s+0\s+0`,
		`U-bob\s+3\s+20\.0s\s+1\s+1`,
		`(?s)rubber-stamped\?.*\n  deploy: 19 of 20 cards allowed, median 3\.0s\n    gate only the risky calls`,
	} {
		if !regexp.MustCompile(`(?m)` + line).MatchString(text) {
			t.Errorf("text lacks %s:\n%s", line, text)
		}
	}
	// The table's columns add up: every card is allowed, denied, expired,
	// abandoned or still waiting (edited ones are among the allowed).
	for _, m := range regexp.MustCompile(`(?m)^(deploy|restart)\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)\s`).FindAllStringSubmatch(text, -1) {
		var n [6]int
		for i := range n {
			fmt.Sscan(m[i+2], &n[i])
		}
		if n[0] != n[1]+n[2]+n[3]+n[4]+n[5] {
			t.Errorf("%s: %d cards, but %d+%d+%d+%d+%d in the columns:\n%s", m[1], n[0], n[1], n[2], n[3], n[4], n[5], text)
		}
	}
	if strings.Contains(text, "status") || strings.Contains(text, "  restart:") {
		t.Errorf("a tool without cards, or restart, listed:\n%s", text)
	}
	// -since after the history: nothing.
	if out := stats("-since", "2027-01-01T00:00:00Z"); !strings.Contains(out, "no cards recorded") {
		t.Errorf("-since after the history:\n%s", out)
	}
}

// TestAuditSinceOneParser: `airlock audit`, `audit stats` and `audit
// export` read -since alike: a duration before the database's clock
// (7d, 24h), an RFC 3339 time, or 0 for every row; each refuses the same
// bad value, naming the flag.
func TestAuditSinceOneParser(t *testing.T) {
	ctx := context.Background()
	dsn := filepath.Join(t.TempDir(), "a.db")
	now := time.Now().UTC()
	db, err := storage.Open(ctx, "sqlite", dsn, storage.WithClock(func() time.Time { return now }))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		call string
		at   time.Time
	}{{"old", now.Add(-10 * 24 * time.Hour)}, {"new", now.Add(-time.Hour)}} {
		if err := db.Audit(ctx, confirm.AuditEvent{At: c.at, Kind: confirm.AuditToolCall, BatchID: "b-" + c.call, CallKey: c.call, Tool: "deploy", Actor: "U1",
			Detail: `{"args":{}}`}); err != nil {
			t.Fatal(err)
		}
	}
	db.Close()
	cfg := writeFile(t, "c.yaml", fmt.Sprintf("storage: {driver: sqlite, dsn: '%s'}\nmodel: {provider: openai, name: m}\n", dsn))
	cmd := func(args ...string) (int, string, string) {
		var out, errOut bytes.Buffer
		code := run(ctx, append(args[:1:1], append([]string{"-config", cfg}, args[1:]...)...), nil, &out, &errOut)
		return code, out.String(), errOut.String()
	}
	sub := func(args ...string) (int, string, string) {
		var out, errOut bytes.Buffer
		code := run(ctx, append([]string{"audit", args[0], "-config", cfg}, args[1:]...), nil, &out, &errOut)
		return code, out.String(), errOut.String()
	}
	for _, since := range []string{"7d", "168h", now.Add(-7 * 24 * time.Hour).Format(time.RFC3339)} {
		code, out, errOut := cmd("audit", "-since", since, "-json")
		if code != 0 || !strings.Contains(out, `"call_key":"new"`) || strings.Contains(out, `"call_key":"old"`) {
			t.Errorf("audit -since %s: exit %d: %s%s", since, code, out, errOut)
		}
		code, out, errOut = sub("export", "-since", since)
		if code != 0 || !strings.Contains(out, `"call_key":"new"`) || strings.Contains(out, `"call_key":"old"`) {
			t.Errorf("audit export -since %s: exit %d: %s%s", since, code, out, errOut)
		}
		if code, out, errOut := sub("stats", "-since", since); code != 0 {
			t.Errorf("audit stats -since %s: exit %d: %s%s", since, code, out, errOut)
		}
	}
	code, out, errOut := cmd("audit", "-since", "0", "-json")
	if code != 0 || !strings.Contains(out, `"call_key":"old"`) {
		t.Errorf("audit -since 0: exit %d: %s%s", code, out, errOut)
	}
	for _, args := range [][]string{{"audit", "-since", "7x"}, {"audit", "stats", "-config", cfg, "-since", "7x"}, {"audit", "export", "-config", cfg, "-since", "7x"}} {
		var out, errOut bytes.Buffer
		if args[1] != "stats" && args[1] != "export" {
			args = append(args, "-config", cfg)
		}
		code := run(ctx, args, nil, &out, &errOut)
		if code != 2 || !strings.Contains(errOut.String(), "-since") || !strings.Contains(errOut.String(), `"7x"`) {
			t.Errorf("%v: exit %d: %s%s", args, code, out.String(), errOut.String())
		}
	}
}
