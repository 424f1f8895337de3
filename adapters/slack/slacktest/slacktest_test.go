package slacktest

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	slackgo "github.com/slack-go/slack"
)

// The fake checks tokens as Slack does: a wrong bot token is invalid_auth
// and is not recorded as a call.
func TestWrongTokenIsRefused(t *testing.T) {
	s := Start(t, Options{BotToken: "xoxb-right"})
	_, err := slackgo.New("xoxb-wrong", slackgo.OptionAPIURL(s.APIURL())).AuthTestContext(context.Background())
	if err == nil || err.Error() != "invalid_auth" {
		t.Fatalf("auth.test with a wrong token: %v, want invalid_auth", err)
	}
	if n := len(s.Calls()); n != 0 {
		t.Errorf("%d calls recorded, want none", n)
	}
	if _, err := slackgo.New("xoxb-right", slackgo.OptionAPIURL(s.APIURL())).AuthTestContext(context.Background()); err != nil {
		t.Fatalf("auth.test with the right token: %v", err)
	}
}

// Message ts keep Slack's shape (ten digits, a dot, six) and stay unique
// past a million messages, as a long bench run posts.
func TestTSKeepsSlacksShape(t *testing.T) {
	s := New(Options{})
	s.seq.Store(999998)
	shape := regexp.MustCompile(`^[0-9]{10}\.[0-9]{6}$`)
	seen := map[string]bool{}
	for range 4 {
		ts := s.NextTS()
		if !shape.MatchString(ts) || seen[ts] {
			t.Fatalf("ts %q: not Slack's shape, or given twice", ts)
		}
		seen[ts] = true
	}
}

// Discard keeps no calls, but OnCall still sees each, with its ts.
func TestDiscardStillShowsCalls(t *testing.T) {
	var seen []Call
	s := Start(t, Options{Discard: true, OnCall: func(c Call) { seen = append(seen, c) }})
	api := slackgo.New("xoxb-any", slackgo.OptionAPIURL(s.APIURL()))
	_, ts, err := api.PostMessageContext(context.Background(), "C1", slackgo.MsgOptionText("hi", false))
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Calls()) != 0 {
		t.Errorf("calls kept with Discard: %v", s.Calls())
	}
	if len(seen) != 1 || seen[0].TS != ts || seen[0].Param("text") != "hi" || seen[0].Param("channel") != "C1" {
		t.Errorf("OnCall saw %+v, want the post as %s", seen, ts)
	}
}

// The injected faults reach the real client as Slack's answers: a tier's
// limit is a 429 with Retry-After in whole seconds until its window ends,
// Down a 5xx, a deleted message message_not_found; Shown keeps what each
// message shows (its last accepted update).
func TestFaults(t *testing.T) {
	s := Start(t, Options{})
	api := slackgo.New("xoxb", slackgo.OptionAPIURL(s.APIURL()))
	ctx := context.Background()
	ch, ts, err := api.PostMessageContext(ctx, "C1", slackgo.MsgOptionText("first", false))
	if err != nil {
		t.Fatal(err)
	}
	update := func(text string) error {
		_, _, _, err := api.UpdateMessageContext(ctx, ch, ts, slackgo.MsgOptionText(text, false))
		return err
	}
	s.Limit("chat.update", 2, 3*time.Second)
	for i := range 2 {
		if err := update(fmt.Sprint("u", i)); err != nil {
			t.Fatalf("update %d within the limit: %v", i, err)
		}
	}
	var rl *slackgo.RateLimitedError
	if err := update("over"); !errors.As(err, &rl) || rl.RetryAfter < time.Second || rl.RetryAfter > 3*time.Second {
		t.Fatalf("over the limit: %v", err)
	}
	if s.Limited("chat.update") != 1 {
		t.Fatalf("limited %d", s.Limited("chat.update"))
	}
	if c, ok := s.Shown(ch, ts); !ok || c.Param("text") != "u1" {
		t.Fatalf("shown %+v, want the last accepted update", c)
	}
	s.Limit("chat.update", 0, 0)
	s.Down("chat.update", 503)
	var sc slackgo.StatusCodeError
	if err := update("down"); !errors.As(err, &sc) || sc.Code != 503 {
		t.Fatalf("down: %v", err)
	}
	s.Down("chat.update", 0)
	release := s.Hold("chat.update")
	done := make(chan error, 1)
	go func() { done <- update("held") }()
	deadline := time.Now().Add(5 * time.Second)
	for s.Held("chat.update") != 1 {
		if time.Now().After(deadline) {
			t.Fatal("the call was not held")
		}
		time.Sleep(time.Millisecond)
	}
	release()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	s.Delete(ch, ts)
	if err := update("gone"); err == nil || err.Error() != "message_not_found" {
		t.Fatalf("deleted: %v", err)
	}
}

// The fake refuses what Slack refuses: more than 50 blocks, a section or
// header text too long, block ids given twice, a button's label too long,
// more text than a message's blocks hold, a top-level text over 40,000
// characters. A refused message is not shown, and MessageWith does not
// find its buttons.
func TestMessagesKeepSlacksLimits(t *testing.T) {
	section := func(id, text string) slackgo.Block {
		return slackgo.NewSectionBlock(slackgo.NewTextBlockObject(slackgo.MarkdownType, text, false, false), nil, nil, slackgo.SectionBlockOptionBlockID(id))
	}
	button := func(label string) slackgo.Block {
		return slackgo.NewActionBlock("acts", slackgo.NewButtonBlockElement("allow", "v-1", slackgo.NewTextBlockObject(slackgo.PlainTextType, label, false, false)))
	}
	many := func(n, each int) []slackgo.Block {
		var out []slackgo.Block
		for i := range n {
			out = append(out, section(fmt.Sprintf("b%d", i), strings.Repeat("x", each)))
		}
		return out
	}
	for _, tc := range []struct {
		name   string
		blocks []slackgo.Block
		text   string
		want   string
	}{
		{"50 blocks", many(49, 10), "t", ""},
		{"51 blocks", many(50, 10), "t", "invalid_blocks"},
		{"section of 3000", many(1, 3000), "t", ""},
		{"section of 3001", many(1, 3001), "t", "invalid_blocks"},
		{"block id twice", []slackgo.Block{section("a", "x"), section("a", "y")}, "t", "invalid_blocks"},
		{"button label of 76", []slackgo.Block{button(strings.Repeat("b", 76))}, "t", "invalid_blocks"},
		{"12,000 characters of blocks", append(many(3, 3000), section("last", strings.Repeat("x", 2995))), "t", ""},
		{"12,001 characters of blocks", append(many(3, 3000), section("last", strings.Repeat("x", 2996))), "t", "msg_blocks_too_long"},
		{"text of 40,001", nil, strings.Repeat("t", 40001), "msg_too_long"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := Start(t, Options{})
			api := slackgo.New("xoxb-any", slackgo.OptionAPIURL(s.APIURL()))
			opts := []slackgo.MsgOption{slackgo.MsgOptionText(tc.text, false)}
			opts = append(opts, slackgo.MsgOptionBlocks(append(tc.blocks, button("Allow"))...))
			_, ts, err := api.PostMessageContext(context.Background(), "C1", opts...)
			got := ""
			if err != nil {
				got = err.Error()
			}
			if got != tc.want {
				t.Fatalf("chat.postMessage = %q, want %q", got, tc.want)
			}
			if tc.want != "" {
				if _, shown := s.Shown("C1", ts); shown || s.MessageWith("C1", "v-1") != "" {
					t.Error("a refused message is shown")
				}
				if calls := s.CallsTo("chat.postMessage"); calls[len(calls)-1].Refused != tc.want {
					t.Errorf("Refused %q, want %q", calls[len(calls)-1].Refused, tc.want)
				}
			}
		})
	}
}
