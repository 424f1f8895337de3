package slacktest

import (
	"context"
	"regexp"
	"testing"

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
