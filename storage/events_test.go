package storage

import (
	"testing"
	"time"
)

func testMarkEventOnce(t *testing.T, db *DB) {
	ctx := t.Context()
	wins := raceWins(t, 20, func(int) (bool, error) { return db.MarkEvent(ctx, "slack", "Ev123") })
	if wins != 1 {
		t.Fatalf("%d deliveries of one event were taken as first, want 1", wins)
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
