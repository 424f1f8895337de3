package storage

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/airlockhq/airlock/confirm"
)

func testLeases(t *testing.T, db *DB) {
	ctx := t.Context()
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	ok, err := clockAt(db, now).AcquireLease(ctx, "conversation:1", "a", 10*time.Second)
	if err != nil || !ok {
		t.Fatalf("first acquire: %v %v", ok, err)
	}
	if ok, _ := clockAt(db, now.Add(time.Second)).AcquireLease(ctx, "conversation:1", "b", 10*time.Second); ok {
		t.Fatal("b took a live lease")
	}
	if ok, _ := clockAt(db, now.Add(5*time.Second)).AcquireLease(ctx, "conversation:1", "a", 10*time.Second); !ok {
		t.Fatal("the holder could not renew")
	}
	if ok, _ := clockAt(db, now.Add(12*time.Second)).AcquireLease(ctx, "conversation:1", "b", 10*time.Second); ok {
		t.Fatal("b took a renewed lease before it lapsed")
	}
	if ok, _ := clockAt(db, now).AcquireLease(ctx, "conversation:2", "b", 10*time.Second); !ok {
		t.Fatal("another key is independent")
	}
	if ok, _ := clockAt(db, now.Add(16*time.Second)).AcquireLease(ctx, "conversation:1", "b", 10*time.Second); !ok {
		t.Fatal("b could not take a lapsed lease (holder died)")
	}
	if err := db.ReleaseLease(ctx, "conversation:1", "a"); err != nil {
		t.Fatal(err)
	}
	if ok, _ := clockAt(db, now.Add(17*time.Second)).AcquireLease(ctx, "conversation:1", "c", 10*time.Second); ok {
		t.Fatal("a released b's lease")
	}
	if err := db.ReleaseLease(ctx, "conversation:1", "b"); err != nil {
		t.Fatal(err)
	}
	if ok, _ := clockAt(db, now.Add(17*time.Second)).AcquireLease(ctx, "conversation:1", "c", 10*time.Second); !ok {
		t.Fatal("a released lease could not be taken")
	}
}

// The races below start every goroutine at once on a barrier.

func testRaceLease(t *testing.T, db *DB) {
	ctx := t.Context()
	now := time.Now()
	wins := raceWins(t, 20, func(i int) (bool, error) {
		return clockAt(db, now).AcquireLease(ctx, "conversation:race", fmt.Sprintf("holder-%d", i), time.Minute)
	})
	if wins != 1 {
		t.Fatalf("%d holders got the lease, want 1", wins)
	}
}

func testReminders(t *testing.T, db *DB) {
	ctx := t.Context()
	conv := newConversation(t, db)
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	b := &confirm.Batch{ConversationID: conv.ID, Status: confirm.BatchPending, CreatedAt: now, ExpiresAt: now.Add(30 * time.Minute),
		Calls: []confirm.Call{{Key: "a", Tool: "t", Args: json.RawMessage(`{}`), Flagged: true, Decision: confirm.DecisionPending, ExpiresAt: now.Add(30 * time.Minute)}}}
	if err := clockAt(db, b.CreatedAt).CreateBatch(ctx, b, confirm.Message{Role: "assistant", Body: json.RawMessage(`{}`)}); err != nil {
		t.Fatal(err)
	}
	if ids, _ := clockAt(db, now).DueReminders(ctx, now.Add(5*time.Minute)); len(ids) != 0 {
		t.Fatalf("due 25 minutes early: %v", ids)
	}
	ids, err := clockAt(db, now.Add(26*time.Minute)).DueReminders(ctx, now.Add(31*time.Minute))
	if err != nil || len(ids) != 1 || ids[0] != b.ID {
		t.Fatalf("due: %v %v", ids, err)
	}
	if ok, _ := clockAt(db, now).MarkReminded(ctx, b.ID); !ok {
		t.Fatal("first MarkReminded lost")
	}
	if ok, _ := clockAt(db, now).MarkReminded(ctx, b.ID); ok {
		t.Fatal("second MarkReminded won")
	}
	if ids, _ := clockAt(db, now.Add(26*time.Minute)).DueReminders(ctx, now.Add(31*time.Minute)); len(ids) != 0 {
		t.Fatalf("reminded batch still due: %v", ids)
	}
}
