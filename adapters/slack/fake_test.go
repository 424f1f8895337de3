package slack

import (
	"context"
	"encoding/json"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/airlockhq/airlock/adapters/slack/slacktest"
	"github.com/airlockhq/airlock/internal/testkit"
)

// Test identities.
const (
	testBotToken = "xoxb-test-bot-token"
	testAppToken = "xapp-test-app-token"
	testSecret   = "8f742231b10e8888abcd99yyyzzz85a5"
	botUser      = "UBOT"
)

// apiCall is one Web API call the fake received: slacktest's, with its
// JSON body decoded.
type apiCall struct {
	Method string
	Params url.Values                 // form parameters
	JSON   map[string]any             // JSON body (chat.update, views.open, apps.connections.open)
	Raw    map[string]json.RawMessage // the JSON body's fields as sent
	TS     string                     // chat.postMessage: the ts the fake gave the message
	Type   string                     // the request's Content-Type
	Token  string                     // the token it carried
	// Refused is the error the fake answered a message past Slack's
	// limits with ("" when Slack would have taken it).
	Refused string
}

// param is a form parameter, or a field of a JSON body: a string's value,
// anything else as its JSON (blocks).
func (c apiCall) param(k string) string {
	return slacktest.Call{Params: c.Params, Raw: c.Raw}.Param(k)
}

// fakeAnswer is an HTTP answer the fake gives a method's next call
// instead of its own (a 429 with its Retry-After, a 500).
type fakeAnswer struct {
	status     int
	retryAfter string
	body       string // default: an HTML page, as Slack's errors come
}

// fakeSlack is slacktest's fake Slack Web API and Socket Mode server on
// 127.0.0.1, in the test workspace, with the helpers the tests use.
type fakeSlack struct {
	t *testing.T
	*slacktest.Server
}

func newFakeSlack(t *testing.T) *fakeSlack {
	s := slacktest.Start(t, slacktest.Options{BotToken: testBotToken, AppToken: testAppToken, BotUser: botUser,
		OnCall: func(c slacktest.Call) { seenMethods.Store(c.Method, true) }})
	return &fakeSlack{t: t, Server: s}
}

func (f *fakeSlack) apiURL() string { return f.APIURL() }

func (f *fakeSlack) setGroup(id string, users ...string) { f.SetGroup(id, users...) }

// answerNext makes the method's next calls get these answers, in order.
func (f *fakeSlack) answerNext(method string, answers ...fakeAnswer) {
	for _, a := range answers {
		f.AnswerNext(method, slacktest.Answer{Status: a.status, RetryAfter: a.retryAfter, Body: a.body})
	}
}

// callsTo returns the recorded calls of a method.
func (f *fakeSlack) callsTo(method string) []apiCall {
	var out []apiCall
	for _, c := range f.CallsTo(method) {
		out = append(out, apiCall{Method: c.Method, Params: c.Params, JSON: c.JSON(), Raw: c.Raw, TS: c.TS, Type: c.Type, Token: c.Token, Refused: c.Refused})
	}
	return out
}

// sendEnvelope queues a Socket Mode envelope and returns its id.
func (f *fakeSlack) sendEnvelope(typ string, payload any, retry int) string {
	id, err := f.SendEnvelope(typ, payload, retry)
	if err != nil {
		f.t.Fatal(err)
	}
	return id
}

func (f *fakeSlack) acked(id string) bool { return f.Acked(id) }

// ackPayload is the payload an envelope was acked with; nil for none.
func (f *fakeSlack) ackPayload(id string) json.RawMessage { return f.AckPayload(id) }

// messageWith returns the ts of the latest message in a channel that
// showed a button carrying value, as posted or as updated; "" when none
// did.
func (f *fakeSlack) messageWith(channel, value string) string { return f.MessageWith(channel, value) }

func (f *fakeSlack) connections() int { return f.Connections() }

// permalink is the fake's permalink of a message, in Slack's form.
func permalink(channel, ts string) string {
	return "https://airlock-test.slack.com/archives/" + channel + "/p" + strings.ReplaceAll(ts, ".", "")
}

// dmOf is the fake's DM channel id with a user.
func dmOf(user string) string { return slacktest.DMOf(user) }

// stopRun ends an adapter's Run (what names it) by cancel, and checks it
// returns, without an error, within 10 s.
func stopRun(t *testing.T, what string, cancel context.CancelFunc, runErr <-chan error) {
	t.Helper()
	cancel()
	select {
	case err := <-runErr:
		if err != nil {
			t.Errorf("%s: %v", what, err)
		}
	case <-time.After(10 * time.Second):
		t.Errorf("%s did not return after its context ended", what)
	}
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	testkit.Eventually(t, 10*time.Second, what, cond)
}
