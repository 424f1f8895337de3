package bot_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/airlockhq/airlock/bot"
	"github.com/airlockhq/airlock/confirm"
	"github.com/airlockhq/airlock/rules"
)

// A reply with more calls than model.max_calls_per_reply is answered whole
// as invalid: no call runs, not even the ungated ones, no card asks anyone,
// every call gets the error as its result, and the thread is told once.
func TestTooManyCallsInOneReplyRunNothing(t *testing.T) {
	h := newHarness(t, "")
	var cs []confirm.ToolCall
	for i := range 40 {
		name := "status"
		if i%2 == 1 {
			name = "deploy"
		}
		cs = append(cs, tc(fmt.Sprintf("c%d", i), name, fmt.Sprintf(`{"n":%d}`, i)))
	}
	h.push(calls(cs...), text("never asked"))
	h.turn("bob", "do everything")

	if got := h.ranCalls(); len(got) != 0 {
		t.Fatalf("ran %d calls of a reply over the limit", len(got))
	}
	if len(h.plat.Cards) != 0 {
		t.Fatalf("posted %d cards for a reply over the limit", len(h.plat.Cards))
	}
	if len(h.plat.Posts) != 1 || !strings.Contains(h.plat.LastPost(), "too many calls in one reply: 40, at most 32") {
		t.Fatalf("posts: %q", h.plat.Posts)
	}
	if n := len(h.model.Requests()); n != 1 {
		t.Fatalf("the model was asked %d times, want once (the turn ends)", n)
	}
	// The history is whole: every call has its error result, and the next
	// turn sends them to the model.
	h.push(text("ok"))
	h.turn("bob", "fewer then")
	res := lastToolResults(t, h.lastRequest())
	if len(res) != 40 {
		t.Fatalf("%d results for 40 calls", len(res))
	}
	for i, r := range res {
		if !r.IsError || r.CallID != fmt.Sprintf("c%d", i) || !strings.Contains(r.Content, "too many calls in one reply: 40, at most 32") {
			t.Fatalf("result %d: %+v", i, r)
		}
	}
	if got := h.ranCalls(); len(got) != 0 {
		t.Fatalf("ran %v later", got)
	}
}

// The limit is exclusive of its own value and configurable.
func TestCallsPerReplyAtTheLimitRun(t *testing.T) {
	h := newHarnessWith(t, "", func(c *bot.Config) { c.MaxCallsPerReply = 3 })
	h.push(calls(tc("", "status", `{"a":1}`), tc("", "status", `{"a":2}`), tc("", "status", `{"a":3}`)), text("done"))
	h.turn("bob", "three")
	if n := h.tools["status"].Runs.Load(); n != 3 {
		t.Fatalf("ran %d of 3 calls at the limit", n)
	}
	h.push(calls(tc("", "status", `{"a":1}`), tc("", "status", `{"a":2}`), tc("", "status", `{"a":3}`), tc("", "status", `{"a":4}`)))
	h.turn("bob", "four")
	if n := h.tools["status"].Runs.Load(); n != 3 {
		t.Fatalf("ran %d calls, want none of the 4 over the limit of 3", n-3)
	}
	if !strings.Contains(h.plat.LastPost(), "too many calls in one reply: 4, at most 3") {
		t.Fatalf("post: %q", h.plat.LastPost())
	}
}

// A person hammering a button they may not press costs one audit row a
// minute per batch and reason, not one per click; the next row says how
// many were folded into it.
func TestRejectedClicksAreCoalesced(t *testing.T) {
	h := newHarness(t, "")
	h.push(calls(tc("a", "deploy", `{}`)))
	h.turn("bob", "x")
	for range 30 {
		if err := h.click("mallory", 1, true, ""); !errors.Is(err, bot.ErrNotApprover) {
			t.Fatalf("err = %v", err)
		}
		h.now.Add(int64(time.Second))
	}
	if err := h.click("bob", 1, true, ""); err == nil {
		t.Fatal("the requester allowed his own call")
	}
	rows := func() []confirm.AuditEvent {
		events, err := h.store.AuditEvents(context.Background(), confirm.AuditFilter{})
		if err != nil {
			t.Fatal(err)
		}
		var out []confirm.AuditEvent
		for _, e := range events {
			if e.Kind == confirm.AuditRejectedClick {
				out = append(out, e)
			}
		}
		return out
	}
	got := rows()
	if len(got) != 2 || got[0].Actor != "mallory" || got[1].Actor != "bob" {
		t.Fatalf("rejected_click rows after 30 clicks by mallory and 1 by bob: %d, want one each", len(got))
	}
	h.now.Add(int64(time.Minute))
	if err := h.click("mallory", 1, true, ""); !errors.Is(err, bot.ErrNotApprover) {
		t.Fatalf("err = %v", err)
	}
	got = rows()
	if len(got) != 3 {
		t.Fatalf("%d rows, want 3", len(got))
	}
	var d struct {
		Why        string `json:"why"`
		Suppressed int    `json:"suppressed"`
	}
	if err := json.Unmarshal([]byte(got[2].Detail), &d); err != nil || d.Why != "not an approver" || d.Suppressed != 29 {
		t.Fatalf("detail %s: want why and suppressed 29", got[2].Detail)
	}
	if h.tools["deploy"].Runs.Load() != 0 || !h.plat.LastCard().Calls[0].Open() {
		t.Fatal("a rejected click changed something")
	}
}

// A tool only a rule gates is described to the model as waiting for
// approval, like a flagged one, so the model does not claim it is done; a
// tool no ask rule can match in the channel is not.
func TestRuleGatedToolsAreDescribedAsWaitingForApproval(t *testing.T) {
	set, err := rules.Compile([]rules.Config{
		{Name: "db-status", When: `tool == "status" && args.svc == "db"`, Action: rules.ActionAsk},
		{Name: "elsewhere", When: `channel == "C9" && tool == "other"`, Action: rules.ActionAsk},
	})
	if err != nil {
		t.Fatal(err)
	}
	h := newHarnessWith(t, "", func(c *bot.Config) { c.Policy = confirm.NewPolicy(true, nil, set) })
	h.tools["other"] = &fakeTool{Name: "other", Log: h.ran, Mu: h.tools["status"].Mu}
	h.push(text("hi"))
	h.turn("bob", "hi")
	seen := 0
	for _, s := range h.model.Requests()[0].Tools {
		gated := s.Name == "deploy" || s.Name == "status"
		if strings.Contains(s.Description, bot.ApprovalNote) != gated {
			t.Errorf("%s: description %q", s.Name, s.Description)
		}
		seen++
	}
	if seen != 4 {
		t.Fatalf("%d tools offered", seen)
	}
}
