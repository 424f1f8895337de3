package storage

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func testMarkEventOnce(t *testing.T, db *DB) {
	ctx := t.Context()
	var wins atomic.Int64
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := 0; i < 20; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			first, err := db.MarkEvent(ctx, "slack", "Ev123")
			if err != nil {
				t.Error(err)
			}
			if first {
				wins.Add(1)
			}
		}()
	}
	close(start)
	wg.Wait()
	if wins.Load() != 1 {
		t.Fatalf("%d deliveries of one event were taken as first, want 1", wins.Load())
	}
	if first, err := db.MarkEvent(ctx, "discord", "Ev123"); err != nil || !first {
		t.Fatalf("the same id on another platform: %v %v", first, err)
	}
	if _, err := db.MarkEvent(ctx, "slack", ""); err == nil {
		t.Fatal("an empty event id must be refused")
	}
	if n, err := db.PruneEvents(ctx, time.Now().Add(-time.Hour)); err != nil || n != 0 {
		t.Fatalf("pruned fresh events: %d %v", n, err)
	}
	if n, err := db.PruneEvents(ctx, time.Now().Add(time.Hour)); err != nil || n != 2 {
		t.Fatalf("prune: %d %v, want 2", n, err)
	}
	if first, _ := db.MarkEvent(ctx, "slack", "Ev123"); !first {
		t.Fatal("a pruned id should count as new")
	}
}
