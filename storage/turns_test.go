package storage

import (
	"testing"
	"time"
)

func testCountTurn(t *testing.T, db *DB) {
	ctx := t.Context()
	t0 := time.Date(2030, 3, 4, 5, 6, 7, 0, time.UTC)
	const window = time.Hour
	count := func(platform, user string, at time.Time) int {
		t.Helper()
		n, err := clockAt(db, at).CountTurn(ctx, platform, user, window)
		if err != nil {
			t.Fatalf("CountTurn(%s, %s, %v): %v", platform, user, at, err)
		}
		return n
	}
	rows := func(user string) int {
		t.Helper()
		var n int
		if err := db.x.GetContext(ctx, &n, db.q(`SELECT COUNT(*) FROM turn_log WHERE user_id = ?`), user); err != nil {
			t.Fatal(err)
		}
		return n
	}
	steps := []struct {
		at   time.Duration
		want int
	}{
		{0, 1},
		{10 * time.Minute, 2},
		{10 * time.Minute, 3}, // two turns at one instant both count
		{30 * time.Minute, 4},
		{65 * time.Minute, 4},  // t0 left the window
		{70 * time.Minute, 3},  // (t0+10m, t0+70m]: both t0+10m turns are out (the window is open at its start)
		{200 * time.Minute, 1}, // everything earlier left
	}
	for _, s := range steps {
		if got := count("slack", "U1", t0.Add(s.at)); got != s.want {
			t.Fatalf("CountTurn at t0+%v = %d, want %d", s.at, got, s.want)
		}
	}
	if n := rows("U1"); n != 1 {
		t.Errorf("turn_log keeps %d rows of U1, want 1: rows outside the window are pruned", n)
	}
	// Users and platforms count apart.
	if got := count("slack", "U2", t0.Add(200*time.Minute)); got != 1 {
		t.Errorf("another user: %d, want 1", got)
	}
	if got := count("discord", "U1", t0.Add(200*time.Minute)); got != 1 {
		t.Errorf("another platform: %d, want 1", got)
	}
	if got := count("slack", "U1", t0.Add(201*time.Minute)); got != 2 {
		t.Errorf("U1 after the others: %d, want 2", got)
	}
	// Without WithClock, the database's clock stamps the turn.
	db.setClock(nil)
	if got, err := db.CountTurn(ctx, "slack", "U3", window); err != nil || got != 1 {
		t.Errorf("CountTurn(zero now) = %d, %v", got, err)
	}
	if got := count("slack", "U3", time.Now().Add(time.Second)); got != 2 {
		t.Errorf("CountTurn after a zero-now turn = %d, want 2", got)
	}
	if _, err := clockAt(db, t0).CountTurn(ctx, "slack", "U1", 0); err == nil {
		t.Error("CountTurn with a zero window succeeded")
	}
}

// The races below start every goroutine at once on a barrier.

// testRaceCountTurn: concurrent turns of one user each get a different
// count, and none is missed.
func testRaceCountTurn(t *testing.T, db *DB) {
	ctx := t.Context()
	const n = 24
	now := time.Now()
	counts, errs := race(n, func(int) (int, error) {
		return clockAt(db, now).CountTurn(ctx, "slack", "U-race", time.Minute)
	})
	seen := make([]bool, n+1)
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("CountTurn: %v", errs[i])
		}
		if c := counts[i]; c < 1 || c > n || seen[c] {
			t.Fatalf("counts %v: want each of 1..%d once", counts, n)
		}
		seen[counts[i]] = true
	}
	if got, err := clockAt(db, now).CountTurn(ctx, "slack", "U-race", time.Minute); err != nil || got != n+1 {
		t.Fatalf("CountTurn after the race = %d, %v; want %d", got, err, n+1)
	}
}
