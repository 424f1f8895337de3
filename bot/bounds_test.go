package bot_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/airlockhq/airlock/bot"
	"github.com/airlockhq/airlock/confirm"
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
	if len(h.plat.cards) != 0 {
		t.Fatalf("posted %d cards for a reply over the limit", len(h.plat.cards))
	}
	if len(h.plat.posts) != 1 || !strings.Contains(h.plat.lastPost(), "too many calls in one reply: 40, at most 32") {
		t.Fatalf("posts: %q", h.plat.posts)
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
	if n := h.tools["status"].runs.Load(); n != 3 {
		t.Fatalf("ran %d of 3 calls at the limit", n)
	}
	h.push(calls(tc("", "status", `{"a":1}`), tc("", "status", `{"a":2}`), tc("", "status", `{"a":3}`), tc("", "status", `{"a":4}`)))
	h.turn("bob", "four")
	if n := h.tools["status"].runs.Load(); n != 3 {
		t.Fatalf("ran %d calls, want none of the 4 over the limit of 3", n-3)
	}
	if !strings.Contains(h.plat.lastPost(), "too many calls in one reply: 4, at most 3") {
		t.Fatalf("post: %q", h.plat.lastPost())
	}
}

