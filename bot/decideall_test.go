package bot_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/airlockhq/airlock/bot"
	"github.com/airlockhq/airlock/confirm"
)

// byArgs rates deploy calls by their "k" argument: restricted (only dave
// decides), quorum (two approvals), critical; others as the tool says.
var byArgs = confirm.PolicyFunc(func(r confirm.Request) confirm.Verdict {
	switch {
	case strings.Contains(string(r.Call.Args), "restricted"):
		return confirm.Verdict{Ask: true, Restrict: []confirm.Approvers{{Users: []string{"dave"}}}}
	case strings.Contains(string(r.Call.Args), "quorum"):
		return confirm.Verdict{Ask: true, Approvals: 2}
	case strings.Contains(string(r.Call.Args), "critical"):
		return confirm.Verdict{Ask: true, Risk: confirm.RiskCritical}
	}
	return confirm.Verdict{}
})

func allClick(h *harness, user string, allow bool) bot.Click {
	c := h.plat.LastCard()
	return bot.Click{Platform: "test", Channel: "C1", User: user, Ref: c.AllRef, Message: cardMsg(c.Calls[0].Ref), Allow: allow}
}

// Allow all decides, in one click, the waiting calls the clicker may
// decide alone, and names the ones it left: restricted to someone else, a
// quorum, a critical call. Nothing runs until every call is decided; Deny
// all then decides what the clicker may deny.
func TestAllowAllLeavesWhatItMayNotDecide(t *testing.T) {
	h := newHarnessWith(t, "", withPolicy(byArgs, nil))
	h.push(calls(tc("", "deploy", `{"k":"a"}`), tc("", "deploy", `{"k":"b"}`), tc("", "deploy", `{"k":"c"}`),
		tc("", "deploy", `{"k":"restricted"}`), tc("", "deploy", `{"k":"quorum"}`), tc("", "deploy", `{"k":"critical"}`)), text("done"))
	h.turn("bob", "deploy everything")
	if card := h.plat.LastCard(); card.AllRef == "" || len(card.CardActions()) < 2 {
		t.Fatalf("a card of six waiting calls offers no Allow all: %+v", card.CardActions())
	}
	res, err := h.bot.DecideAll(context.Background(), allClick(h, "alice", true))
	if err != nil {
		t.Fatal(err)
	}
	if res.Decided != 3 || len(res.Left) != 3 {
		t.Fatalf("Allow all: %+v, want 3 decided, 3 left", res)
	}
	msg := res.Message()
	for _, want := range []string{"Allowed 3 calls", "4. deploy", "5. deploy (needs 2 approvals", "6. deploy (critical"} {
		if !strings.Contains(msg, want) {
			t.Fatalf("message %q lacks %q", msg, want)
		}
	}
	if n := h.tools["deploy"].Runs.Load(); n != 0 {
		t.Fatalf("%d calls ran with three still waiting", n)
	}
	card := h.plat.LastCard()
	for i, want := range []bool{false, false, false, true, true, true} {
		if card.Calls[i].Open() != want {
			t.Fatalf("call %d open %v after Allow all", i+1, card.Calls[i].Open())
		}
	}
	// A second Allow all by alice decides nothing more.
	if res, err := h.bot.DecideAll(context.Background(), allClick(h, "alice", true)); err != nil || res.Decided != 0 {
		t.Fatalf("second Allow all: %+v %v", res, err)
	}
	// Deny all by alice denies the quorum and the critical call; the
	// restricted one is dave's.
	res, err = h.bot.DecideAll(context.Background(), allClick(h, "alice", false))
	if err != nil || res.Decided != 2 || len(res.Left) != 1 || res.Left[0].Number != 4 {
		t.Fatalf("Deny all: %+v %v", res, err)
	}
	if err := clickOn(h, "dave", card.Calls[3].Ref, cardMsg(card.Calls[3].Ref), true); err != nil {
		t.Fatal(err)
	}
	if n := h.tools["deploy"].Runs.Load(); n != 4 {
		t.Fatalf("%d calls ran, want the 3 allowed by Allow all and dave's", n)
	}
}

// Allow all as an attacker: a bystander decides nothing; the requester
// may not allow their own calls; a click carrying another card's
// reference, or a card edited since it was shown, changes nothing.
func TestAllowAllHostile(t *testing.T) {
	h := newHarnessWith(t, "", withPolicy(byArgs, nil))
	h.push(calls(tc("", "deploy", `{"k":"a"}`), tc("", "deploy", `{"k":"b"}`)), text("done"))
	h.turn("bob", "deploy")
	if res, err := h.bot.DecideAll(context.Background(), allClick(h, "mallory", true)); err != nil || res.Decided != 0 || len(res.Left) != 2 {
		t.Fatalf("a bystander's Allow all: %+v %v", res, err)
	}
	if res, err := h.bot.DecideAll(context.Background(), allClick(h, "bob", true)); err != nil || res.Decided != 0 || !strings.Contains(res.Message(), "you asked for it") {
		t.Fatalf("the requester's Allow all: %+v %v", res, err)
	}
	stale := allClick(h, "alice", true)
	stale.Ref = strings.TrimSuffix(stale.Ref, ".0") + ".1"
	if _, err := h.bot.DecideAll(context.Background(), stale); !errors.Is(err, bot.ErrStaleRevision) {
		t.Fatalf("Allow all at another revision: %v", err)
	}
	wrong := allClick(h, "alice", true)
	wrong.Message = "elsewhere"
	if _, err := h.bot.DecideAll(context.Background(), wrong); !errors.Is(err, bot.ErrWrongChannel) {
		t.Fatalf("Allow all from another message: %v", err)
	}
	if _, err := h.bot.DecideAll(context.Background(), bot.Click{Platform: "test", Channel: "C1", User: "alice", Ref: "all-nosuch.0", Allow: true}); err == nil {
		t.Fatal("an unknown card's Allow all")
	}
	if n := h.tools["deploy"].Runs.Load(); n != 0 {
		t.Fatalf("hostile clicks ran %d calls", n)
	}
	if res, err := h.bot.DecideAll(context.Background(), allClick(h, "alice", true)); err != nil || res.Decided != 2 {
		t.Fatalf("alice's Allow all: %+v %v", res, err)
	}
	if n := h.tools["deploy"].Runs.Load(); n != 2 {
		t.Fatalf("%d runs after Allow all, want 2", n)
	}
}
