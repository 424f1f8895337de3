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
	{"WebCeremonies", testWebCeremonies},
}

// A ceremony is taken once, only by the person who began it and as its
// kind, before it expires; passkeys are listed by person and updated.
func testWebCeremonies(t *testing.T, db *DB) {
	ctx := t.Context()
	if err := db.StartCeremony(ctx, "c1", "alice@example.com", "vote", `{"x":1}`, time.Minute); err != nil {
		t.Fatal(err)
	}
	for _, other := range [][2]string{{"bob@example.com", "vote"}, {"alice@example.com", "register"}} {
		if _, err := db.TakeCeremony(ctx, "c1", other[0], other[1]); !errors.Is(err, confirm.ErrNotFound) {
			t.Fatalf("taken as %v: %v", other, err)
		}
	}
	if data, err := db.TakeCeremony(ctx, "c1", "alice@example.com", "vote"); err != nil || data != `{"x":1}` {
		t.Fatalf("TakeCeremony = %q, %v", data, err)
	}
	if _, err := db.TakeCeremony(ctx, "c1", "alice@example.com", "vote"); !errors.Is(err, confirm.ErrNotFound) {
		t.Fatalf("taken twice: %v", err)
	}
	if err := db.StartCeremony(ctx, "c2", "alice@example.com", "vote", `{}`, time.Minute); err != nil {
		t.Fatal(err)
	}
	if _, err := clockAt(db, time.Now().Add(2*time.Minute)).TakeCeremony(ctx, "c2", "alice@example.com", "vote"); !errors.Is(err, confirm.ErrNotFound) {
		t.Fatalf("an expired ceremony: %v", err)
	}
	if err := db.AddPasskey(ctx, "alice@example.com", "k1", `{"id":"k1"}`); err != nil {
		t.Fatal(err)
	}
	if err := db.UpdatePasskey(ctx, "k1", `{"id":"k1","n":2}`); err != nil {
		t.Fatal(err)
	}
	if err := db.UpdatePasskey(ctx, "nope", `{}`); !errors.Is(err, confirm.ErrNotFound) {
		t.Fatalf("UpdatePasskey(unknown) = %v", err)
	}
	if ks, err := db.Passkeys(ctx, "alice@example.com"); err != nil || len(ks) != 1 || ks[0] != `{"id":"k1","n":2}` {
		t.Fatalf("Passkeys = %v, %v", ks, err)
	}
	if ks, _ := db.Passkeys(ctx, "bob@example.com"); len(ks) != 0 {
		t.Fatalf("bob's passkeys: %v", ks)
	}
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
