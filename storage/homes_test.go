package storage

import (
	"testing"
	"time"

	"github.com/airlockhq/airlock/confirm"
)

var homeTests = []conformanceTest{
	{"Homes", testHomes},
}

// A home opened is listed once however often it is opened, and its one
// message is synced as any card message: a change makes it behind, its
// claim is one holder's, and rendering it puts it back in sync.
func testHomes(t *testing.T, db *DB) {
	ctx := t.Context()
	alice := confirm.HomeKey{Platform: "slack", User: "UALICE"}
	for range 2 {
		if err := db.OpenHome(ctx, alice); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.OpenHome(ctx, confirm.HomeKey{Platform: "discord", User: "42"}); err != nil {
		t.Fatal(err)
	}
	if err := db.OpenHome(ctx, confirm.HomeKey{Platform: "slack"}); err == nil {
		t.Fatal("a home of nobody was opened")
	}
	ks, err := db.OpenHomes(ctx, "slack")
	if err != nil || len(ks) != 1 || ks[0] != alice {
		t.Fatalf("slack's homes: %+v, %v", ks, err)
	}
	subject := confirm.Subject{Kind: confirm.SubjectHome, ID: alice.ID()}
	claimed, listed, err := db.ChangeAndClaim(ctx, subject, confirm.CardClaim{Holder: "w1", TTL: time.Minute, Limit: 8})
	if err != nil || !listed || len(claimed) != 1 {
		t.Fatalf("a change of the home: %+v, %v, %v", claimed, listed, err)
	}
	m := claimed[0].Message
	if m.Kind != confirm.CardHome || m.HomeID != alice.ID() || m.Channel != confirm.HomeChannel || m.Ref != alice.ID() || m.Subject() != subject {
		t.Fatalf("the home's message: %+v", m)
	}
	if _, ok, err := db.ClaimCard(ctx, claimed[0].ID, "w2", time.Minute); err != nil || ok {
		t.Fatalf("a second holder claimed the home's message: %v %v", ok, err)
	}
	if ok, err := db.CardRendered(ctx, claimed[0].ID, "w1", claimed[0].Version); err != nil || !ok {
		t.Fatalf("rendered: %v %v", ok, err)
	}
	if ids, err := db.BehindCards(ctx, "slack", "", 10); err != nil || len(ids) != 0 {
		t.Fatalf("behind after rendering: %v %v", ids, err)
	}
	// A message of a home naming a batch too is refused.
	if err := db.AddCardMessage(ctx, confirm.CardMessage{HomeID: alice.ID(), BatchID: "b1", Kind: confirm.CardHome, Platform: "slack",
		Channel: confirm.HomeChannel, Ref: alice.ID()}); err == nil {
		t.Fatal("a home message naming a batch was stored")
	}
}
