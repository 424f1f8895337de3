package storage

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/airlockhq/airlock/confirm"
)

// webTests are the confirm.WebStore contract, run by runConformance
// against each database.
var webTests = []conformanceTest{
	{"WebLoginTakenOnce", testWebLoginTakenOnce},
	{"WebSessions", testWebSessions},
}

// A login is taken once, by one of eight racing callbacks; an expired one
// is taken by none.
func testWebLoginTakenOnce(t *testing.T, db *DB) {
	ctx := t.Context()
	l := confirm.WebLogin{Nonce: "n1", Verifier: "v1", ReturnTo: "/ui/approvals/x"}
	if err := db.StartLogin(ctx, "s1", l, time.Minute); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	got := make([]error, 8)
	for i := range got {
		wg.Go(func() { _, got[i] = db.TakeLogin(ctx, "s1") })
	}
	wg.Wait()
	won := 0
	for _, err := range got {
		switch {
		case err == nil:
			won++
		case !errors.Is(err, confirm.ErrNotFound):
			t.Fatalf("TakeLogin: %v", err)
		}
	}
	if won != 1 {
		t.Fatalf("%d callbacks took the login, want 1", won)
	}
	if err := db.StartLogin(ctx, "s2", l, time.Minute); err != nil {
		t.Fatal(err)
	}
	later := clockAt(db, time.Now().Add(2*time.Minute))
	if _, err := later.TakeLogin(ctx, "s2"); !errors.Is(err, confirm.ErrNotFound) {
		t.Fatalf("an expired login: %v", err)
	}
}

// A session is found by its hash until it expires or ends.
func testWebSessions(t *testing.T, db *DB) {
	ctx := t.Context()
	at := time.Date(2031, 1, 2, 3, 4, 5, 0, time.UTC)
	db = clockAt(db, at)
	s, err := db.CreateWebSession(ctx, "h1", confirm.WebSession{Email: "alice@example.com", CSRF: "c1", AuthTime: at.Add(-time.Minute)}, time.Hour)
	if err != nil || !s.ExpiresAt.Equal(at.Add(time.Hour)) {
		t.Fatalf("CreateWebSession = %+v, %v", s, err)
	}
	got, err := db.WebSession(ctx, "h1")
	if err != nil || got.Email != "alice@example.com" || got.CSRF != "c1" || !got.AuthTime.Equal(at.Add(-time.Minute)) {
		t.Fatalf("WebSession = %+v, %v", got, err)
	}
	if _, err := db.WebSession(ctx, "h2"); !errors.Is(err, confirm.ErrNotFound) {
		t.Fatalf("an unknown session: %v", err)
	}
	if _, err := clockAt(db, at.Add(2*time.Hour)).WebSession(ctx, "h1"); !errors.Is(err, confirm.ErrNotFound) {
		t.Fatalf("an expired session: %v", err)
	}
	clockAt(db, at)
	if err := db.EndWebSession(ctx, "h1"); err != nil {
		t.Fatal(err)
	}
	if _, err := db.WebSession(ctx, "h1"); !errors.Is(err, confirm.ErrNotFound) {
		t.Fatalf("a session signed out: %v", err)
	}
}
