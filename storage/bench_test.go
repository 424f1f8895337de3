package storage

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/airlockhq/airlock/confirm"
)

// BenchmarkDecideStorm measures one double-click storm in storage: a batch
// of one gated call, then 20 concurrent Decides on it (exactly one wins).
// Run both drivers in one go to compare them on the same machine:
//
//	AIRLOCK_TEST_POSTGRES_DSN=... go test -run '^$' -bench DecideStorm ./storage/
func BenchmarkDecideStorm(b *testing.B) {
	b.Run("sqlite", func(b *testing.B) { benchStorm(b, benchSQLite(b)) })
	b.Run("postgres", func(b *testing.B) {
		admin, dsn := postgresAdmin(b)
		benchStorm(b, openDB(b, DriverPostgres, postgresSchema(b, admin, dsn)))
	})
}

// benchSQLite opens a new SQLite file, closed when the benchmark ends.
func benchSQLite(b *testing.B) *DB {
	b.Helper()
	return openDB(b, DriverSQLite, filepath.Join(b.TempDir(), "bench.db"))
}

func benchStorm(b *testing.B, db *DB) {
	ctx := context.Background()
	conv, err := db.Conversation(ctx, "bench", "C", time.Now().Format(time.RFC3339Nano), false)
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		now := time.Now()
		batch := &confirm.Batch{ConversationID: conv.ID, Status: confirm.BatchPending, CreatedAt: now, ExpiresAt: now.Add(time.Hour),
			Calls: []confirm.Call{{Key: "c1", Tool: "t", Args: json.RawMessage(`{}`), Flagged: true, Decision: confirm.DecisionPending}}}
		if err := clockAt(db, batch.CreatedAt).CreateBatch(ctx, batch, confirm.Message{Role: "assistant", Body: json.RawMessage(`{}`)}); err != nil {
			b.Fatal(err)
		}
		var wg sync.WaitGroup
		var mu sync.Mutex
		wins := 0
		for c := 0; c < 20; c++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				res, err := db.Decide(ctx, confirm.Decide{BatchID: batch.ID, Key: "c1", Status: confirm.DecisionAllowed, By: "u"})
				if err != nil {
					b.Error(err)
					return
				}
				if res.Won {
					mu.Lock()
					wins++
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		if wins != 1 {
			b.Fatalf("storm %d: %d winners", i, wins)
		}
	}
}

// BenchmarkBatchLoad measures loading one batch (its calls and votes) out
// of 2000 in a SQLite file, with no writes going on: the read the decision
// path makes twice per decision.
func BenchmarkBatchLoad(b *testing.B) {
	ctx := context.Background()
	db := benchSQLite(b)
	ids := make([]string, 0, 2000)
	for i := 0; i < 2000; i++ {
		conv, err := db.Conversation(ctx, "bench", "C", strconv.Itoa(i), false)
		if err != nil {
			b.Fatal(err)
		}
		now := time.Now()
		batch := &confirm.Batch{ID: fmt.Sprintf("batch%06d", i), ConversationID: conv.ID, Status: confirm.BatchPending, CreatedAt: now, ExpiresAt: now.Add(time.Hour),
			Calls: []confirm.Call{{Key: "c1", Tool: "t", Args: json.RawMessage(`{}`), Flagged: true, Decision: confirm.DecisionPending}}}
		if err := clockAt(db, batch.CreatedAt).CreateBatch(ctx, batch, confirm.Message{Role: "assistant", Body: json.RawMessage(`{}`)}); err != nil {
			b.Fatal(err)
		}
		ids = append(ids, batch.ID)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := db.Batch(ctx, ids[i%len(ids)]); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDecisionPath measures storage's share of the decision path on
// SQLite, from 16 goroutines as the Slack adapter's workers would: for
// each pending batch of one gated call (b.N of them, made before the
// clock starts), the click's batch load, Decide (which returns the
// decided batch), ClaimBatch, StartRun, FinishRun, CompleteBatch, the
// history load and the model's answer appended. One op is one decision.
func BenchmarkDecisionPath(b *testing.B) {
	ctx := context.Background()
	db := benchSQLite(b)
	type item struct {
		id   string
		conv int64
	}
	items := make(chan item, b.N)
	for i := 0; i < b.N; i++ {
		conv, err := db.Conversation(ctx, "bench", "C", strconv.Itoa(i), false)
		if err != nil {
			b.Fatal(err)
		}
		if err := db.AppendMessages(ctx, conv.ID, confirm.Message{Role: "user", Body: json.RawMessage(`{"text":"deploy please"}`)}); err != nil {
			b.Fatal(err)
		}
		now := time.Now()
		batch := &confirm.Batch{ConversationID: conv.ID, Status: confirm.BatchPending, CreatedAt: now, ExpiresAt: now.Add(time.Hour),
			Calls: []confirm.Call{{Key: "c1", Tool: "deploy", Args: json.RawMessage(`{"service":"api","version":"1.2.3"}`), Flagged: true, Decision: confirm.DecisionPending}}}
		if err := clockAt(db, batch.CreatedAt).CreateBatch(ctx, batch, confirm.Message{Role: "assistant", Body: json.RawMessage(`{"calls":[{"name":"deploy"}]}`)}); err != nil {
			b.Fatal(err)
		}
		items <- item{batch.ID, conv.ID}
	}
	close(items)
	b.ResetTimer()
	var wg sync.WaitGroup
	for w := 0; w < 16; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for it := range items {
				if _, err := db.Batch(ctx, it.id); err != nil {
					b.Error(err)
					return
				}
				res, err := db.Decide(ctx, confirm.Decide{BatchID: it.id, Key: "c1", Status: confirm.DecisionAllowed, By: "u"})
				if err != nil || !res.BatchDecided || res.Batch == nil {
					b.Error("decide:", err, res)
					return
				}
				if won, err := db.ClaimBatch(ctx, it.id, "w"); err != nil || !won {
					b.Error("claim:", err)
					return
				}
				if started, err := db.StartRun(ctx, it.id, "c1"); err != nil || !started {
					b.Error("start:", err)
					return
				}
				if err := db.FinishRun(ctx, it.id, "c1", confirm.RunSucceeded, `{"ok":true}`); err != nil {
					b.Error("finish:", err)
					return
				}
				if ok, err := db.CompleteBatch(ctx, it.id,
					confirm.Message{Role: "tool", Body: json.RawMessage(`{"results":[{"key":"c1","content":"{\"ok\":true}"}]}`)}); err != nil || !ok {
					b.Error("complete:", err)
					return
				}
				if _, err := db.Messages(ctx, it.conv); err != nil {
					b.Error(err)
					return
				}
				if err := db.AppendMessages(ctx, it.conv, confirm.Message{Role: "assistant", Body: json.RawMessage(`{"text":"Deployed."}`)}); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
}
