package storage

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/airlockhq/airlock/confirm"
)

func testClaimRunComplete(t *testing.T, db *DB) {
	ctx := t.Context()
	b := newBatch(t, db, later(), confirm.DecisionAllowedByPolicy, confirm.DecisionPending, confirm.DecisionPending)
	if ok, err := db.ClaimBatch(ctx, b.ID, "w1"); err != nil || ok {
		t.Fatalf("ClaimBatch of pending batch = %v, %v", ok, err)
	}
	decide(t, db, confirm.Decide{BatchID: b.ID, Key: "k1", Status: confirm.DecisionAllowed, By: "U"})
	decide(t, db, confirm.Decide{BatchID: b.ID, Key: "k2", Status: confirm.DecisionDenied, By: "U"})
	if ids, err := db.BatchesIn(ctx, confirm.BatchDecided); err != nil || len(ids) != 1 || ids[0] != b.ID {
		t.Fatalf("BatchesIn(decided) = %v, %v", ids, err)
	}
	if ok, err := db.ClaimBatch(ctx, b.ID, "w1"); err != nil || !ok {
		t.Fatalf("ClaimBatch = %v, %v", ok, err)
	}
	if ok, err := db.ClaimBatch(ctx, b.ID, "w2"); err != nil || ok {
		t.Fatalf("second ClaimBatch = %v, %v", ok, err)
	}
	if _, err := db.ClaimBatch(ctx, "missing", "w"); !errors.Is(err, confirm.ErrNotFound) {
		t.Errorf("ClaimBatch(missing) error = %v, want ErrNotFound", err)
	}
	got := loadBatch(t, db, b.ID)
	if got.Status != confirm.BatchRunning || got.ClaimedBy != "w1" {
		t.Fatalf("claimed batch = %s by %q", got.Status, got.ClaimedBy)
	}
	if ok, err := db.StartRun(ctx, b.ID, "k2"); err != nil || ok {
		t.Fatalf("StartRun(denied) = %v, %v", ok, err)
	}
	for _, key := range []string{"k0", "k1"} {
		if ok, err := db.StartRun(ctx, b.ID, key); err != nil || !ok {
			t.Fatalf("StartRun(%s) = %v, %v", key, ok, err)
		}
		if ok, err := db.StartRun(ctx, b.ID, key); err != nil || ok {
			t.Fatalf("second StartRun(%s) = %v, %v", key, ok, err)
		}
	}
	if _, err := db.StartRun(ctx, b.ID, "missing"); !errors.Is(err, confirm.ErrNotFound) {
		t.Errorf("StartRun(missing) error = %v, want ErrNotFound", err)
	}
	if err := db.FinishRun(ctx, b.ID, "k0", confirm.RunSucceeded, "deployed"); err != nil {
		t.Fatal(err)
	}
	long := strings.Repeat("é", 3000)
	if err := db.FinishRun(ctx, b.ID, "k1", confirm.RunFailed, long); err != nil {
		t.Fatal(err)
	}
	if err := db.FinishRun(ctx, b.ID, "k0", confirm.RunFailed, "again"); !errors.Is(err, ErrNotRunning) {
		t.Errorf("second FinishRun error = %v, want ErrNotRunning", err)
	}
	if err := db.FinishRun(ctx, b.ID, "k2", confirm.RunSucceeded, "x"); !errors.Is(err, ErrNotRunning) {
		t.Errorf("FinishRun(not started) error = %v, want ErrNotRunning", err)
	}
	if err := db.FinishRun(ctx, b.ID, "missing", confirm.RunSucceeded, "x"); !errors.Is(err, confirm.ErrNotFound) {
		t.Errorf("FinishRun(missing) error = %v, want ErrNotFound", err)
	}
	if err := db.FinishRun(ctx, b.ID, "k0", confirm.RunRunning, "x"); err == nil {
		t.Error("FinishRun to running succeeded")
	}
	got = loadBatch(t, db, b.ID)
	if c := callByKey(t, got, "k0"); c.Run != confirm.RunSucceeded || c.Result != "deployed" {
		t.Errorf("k0 = %+v", c)
	}
	if c := callByKey(t, got, "k1"); c.Run != confirm.RunFailed || c.Result != long {
		t.Errorf("k1 run %s, result of %d bytes", c.Run, len(c.Result))
	}
	if c := callByKey(t, got, "k2"); c.Run != confirm.RunNotStarted {
		t.Errorf("k2 = %+v", c)
	}
	results := auditOf(t, db, b.ConversationID, confirm.AuditToolResult)
	if len(results) != 2 || results[0].CallKey != "k0" || results[1].CallKey != "k1" || results[0].Tool != "deploy" {
		t.Fatalf("tool_result events = %+v", results)
	}
	var detail struct {
		Status string `json:"status"`
		Result string `json:"result"`
	}
	if err := json.Unmarshal([]byte(results[1].Detail), &detail); err != nil || detail.Status != "failed" || len(detail.Result) >= len(long) || !strings.HasPrefix(long, detail.Result) {
		t.Errorf("tool_result detail = %.80s... (%v)", results[1].Detail, err)
	}

	results0 := confirm.Message{Role: "tool", Body: json.RawMessage(`[{"id":"call_0","out":"deployed"}]`)}
	if ok, err := db.CompleteBatch(ctx, b.ID, results0); err != nil || !ok {
		t.Fatalf("CompleteBatch = %v, %v", ok, err)
	}
	if ok, err := db.CompleteBatch(ctx, b.ID, results0); err != nil || ok {
		t.Fatalf("second CompleteBatch = %v, %v", ok, err)
	}
	if _, err := db.CompleteBatch(ctx, "missing", results0); !errors.Is(err, confirm.ErrNotFound) {
		t.Errorf("CompleteBatch(missing) error = %v, want ErrNotFound", err)
	}
	if got := loadBatch(t, db, b.ID); got.Status != confirm.BatchDone {
		t.Errorf("batch is %s, want done", got.Status)
	}
	msgs, err := db.Messages(ctx, b.ConversationID)
	if err != nil {
		t.Fatal(err)
	}
	if len(msgs) != 2 || msgs[1].Seq != b.MessageSeq+1 || string(msgs[1].Body) != string(results0.Body) {
		t.Fatalf("messages after completion = %+v", msgs)
	}
	if err := db.ReleaseBatch(ctx, b.ID); err != nil {
		t.Fatal(err)
	}
	if got := loadBatch(t, db, b.ID); got.Status != confirm.BatchDone {
		t.Errorf("ReleaseBatch moved a done batch to %s", got.Status)
	}
}

func testRecoverRunning(t *testing.T, db *DB) {
	ctx := t.Context()
	var batches []*confirm.Batch
	for range 2 {
		b := newBatch(t, db, later(), confirm.DecisionAllowedByPolicy, confirm.DecisionPending)
		decide(t, db, confirm.Decide{BatchID: b.ID, Key: "k1", Status: confirm.DecisionAllowed, By: "U"})
		if ok, err := db.ClaimBatch(ctx, b.ID, "w-dead"); err != nil || !ok {
			t.Fatalf("ClaimBatch = %v, %v", ok, err)
		}
		for _, key := range []string{"k0", "k1"} {
			if ok, err := db.StartRun(ctx, b.ID, key); err != nil || !ok {
				t.Fatalf("StartRun = %v, %v", ok, err)
			}
		}
		batches = append(batches, b)
	}
	// One call finished before the crash.
	if err := db.FinishRun(ctx, batches[0].ID, "k0", confirm.RunSucceeded, "ok"); err != nil {
		t.Fatal(err)
	}
	ids, err := db.RecoverRunning(ctx, batches[0].ID, batches[1].ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(ids) != 2 || !((ids[0] == batches[0].ID && ids[1] == batches[1].ID) || (ids[0] == batches[1].ID && ids[1] == batches[0].ID)) {
		t.Fatalf("RecoverRunning = %v, want both batches once", ids)
	}
	for _, b := range batches {
		got := loadBatch(t, db, b.ID)
		for _, c := range got.Calls {
			if b == batches[0] && c.Key == "k0" {
				if c.Run != confirm.RunSucceeded {
					t.Errorf("finished call changed to %s", c.Run)
				}
				continue
			}
			if c.Run != confirm.RunUnknown || c.Result != confirm.UnknownOutcomeMessage {
				t.Errorf("recovered call %s/%s = %s %q", b.ID, c.Key, c.Run, c.Result)
			}
			if ok, err := db.StartRun(ctx, b.ID, c.Key); err != nil || ok {
				t.Errorf("StartRun of an unknown call = %v, %v", ok, err)
			}
		}
		if got.Status != confirm.BatchRunning {
			t.Errorf("batch status %s, want running until released", got.Status)
		}
		n := 0
		for _, k := range auditKinds(t, db, b.ConversationID) {
			if strings.HasPrefix(k, "tool_result:") {
				n++
			}
		}
		if want := 2; n != want {
			t.Errorf("batch %s has %d tool_result events, want %d", b.ID, n, want)
		}
	}
	if ids, err := db.RecoverRunning(ctx, batches[0].ID, batches[1].ID); err != nil || len(ids) != 0 {
		t.Fatalf("second RecoverRunning = %v, %v", ids, err)
	}
	running, err := db.BatchesIn(ctx, confirm.BatchRunning)
	if err != nil || len(running) != 2 {
		t.Fatalf("BatchesIn(running) = %v, %v", running, err)
	}
	for _, id := range running {
		if err := db.ReleaseBatch(ctx, id); err != nil {
			t.Fatal(err)
		}
		if got := loadBatch(t, db, id); got.Status != confirm.BatchDecided || got.ClaimedBy != "" {
			t.Errorf("released batch = %s by %q", got.Status, got.ClaimedBy)
		}
		if ok, err := db.ClaimBatch(ctx, id, "w-new"); err != nil || !ok {
			t.Errorf("reclaim = %v, %v", ok, err)
		}
		for _, key := range []string{"k0", "k1"} {
			if ok, err := db.StartRun(ctx, id, key); err != nil || ok {
				t.Errorf("StartRun after recovery = %v, %v", ok, err)
			}
		}
	}
	if err := db.ReleaseBatch(ctx, "missing"); !errors.Is(err, confirm.ErrNotFound) {
		t.Errorf("ReleaseBatch(missing) error = %v, want ErrNotFound", err)
	}
}

func testRecoverOneBatch(t *testing.T, db *DB) {
	ctx := t.Context()
	var ids []string
	for i := 0; i < 2; i++ {
		conv := newConversation(t, db)
		b := &confirm.Batch{ConversationID: conv.ID, Status: confirm.BatchDecided, CreatedAt: time.Now(),
			Calls: []confirm.Call{{Key: "a", Tool: "t", Args: json.RawMessage(`{}`), Decision: confirm.DecisionAllowed}}}
		if err := clockAt(db, b.CreatedAt).CreateBatch(ctx, b, confirm.Message{Role: "assistant", Body: json.RawMessage(`{}`)}); err != nil {
			t.Fatal(err)
		}
		if ok, err := db.ClaimBatch(ctx, b.ID, "w"); !ok || err != nil {
			t.Fatal(ok, err)
		}
		if ok, err := db.StartRun(ctx, b.ID, "a"); !ok || err != nil {
			t.Fatal(ok, err)
		}
		ids = append(ids, b.ID)
	}
	got, err := db.RecoverRunning(ctx, ids[0])
	if err != nil || len(got) != 1 || got[0] != ids[0] {
		t.Fatalf("RecoverRunning(%s) = %v, %v", ids[0], got, err)
	}
	other, _ := db.Batch(ctx, ids[1])
	if other.Calls[0].Run != confirm.RunRunning {
		t.Fatalf("another batch's running call became %s", other.Calls[0].Run)
	}
}

// The races below start every goroutine at once on a barrier.

func testRaceClaim(t *testing.T, db *DB) {
	b := newBatch(t, db, later(), confirm.DecisionPending)
	decide(t, db, confirm.Decide{BatchID: b.ID, Key: "k0", Status: confirm.DecisionAllowed, By: "U"})
	const n = 20
	wins, errs := race(n, func(i int) (bool, error) {
		return db.ClaimBatch(t.Context(), b.ID, fmt.Sprintf("w%d", i))
	})
	won, winner := 0, ""
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("ClaimBatch %d: %v", i, errs[i])
		}
		if wins[i] {
			won++
			winner = fmt.Sprintf("w%d", i)
		}
	}
	if won != 1 {
		t.Fatalf("%d of %d concurrent claims won, want exactly 1", won, n)
	}
	if got := loadBatch(t, db, b.ID); got.ClaimedBy != winner || got.Status != confirm.BatchRunning {
		t.Fatalf("batch = %s claimed by %q, want running by %q", got.Status, got.ClaimedBy, winner)
	}
}
