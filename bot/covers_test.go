package bot_test

import (
	"testing"
	"time"

	"github.com/airlockhq/airlock/bot"
)

// TestCardSaysWhatAYesCoversFromTheBotsClock: the card the bot posts
// carries its clock's time and the self-approval setting, so what a yes
// covers names when a grant made now would end and whether the requester
// may allow.
func TestCardSaysWhatAYesCoversFromTheBotsClock(t *testing.T) {
	h := newHarnessWith(t, "", func(c *bot.Config) { c.GrantFor = time.Hour })
	h.push(calls(tc("c1", "deploy", `{"svc":"api"}`)), text("Deployed."))
	h.turn("bob", "deploy api")
	card := h.plat.LastCard()
	v, ok := card.Cover(card.Calls[0])
	if !ok {
		t.Fatal("the waiting call has no cover")
	}
	start := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	if v.Grant == nil || !v.Grant.Until.Equal(start.Add(time.Hour)) || v.Grant.Requester != "bob" || v.Barred != "bob" {
		t.Fatalf("cover %+v (grant %+v)", v, v.Grant)
	}
	if want := "Allow runs this call once. Allow for 1h also allows later calls of deploy in this thread, requested by bob or an approver, until 13:00 UTC if clicked now. bob asked for it and may not allow it."; v.Text() != want {
		t.Errorf("words %q, want %q", v.Text(), want)
	}

	h2 := newHarnessWith(t, "", func(c *bot.Config) { c.SelfApproval = true })
	h2.push(calls(tc("c1", "deploy", `{"svc":"api"}`)), text("Deployed."))
	h2.turn("bob", "deploy api")
	card = h2.plat.LastCard()
	if v, _ := card.Cover(card.Calls[0]); v.Barred != "" || v.Grant != nil || v.Text() != "Allow runs this call once." {
		t.Errorf("with self-approval on and grants off: %+v %q", v, v.Text())
	}
}
