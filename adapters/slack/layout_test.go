package slack

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/airlockhq/airlock/adapters/slack/slacktest"
	cardpkg "github.com/airlockhq/airlock/card"
	"github.com/airlockhq/airlock/config"
	"github.com/airlockhq/airlock/confirm"
)

// long is n characters of hostile text: mentions, markup, line breaks,
// hidden and wide characters.
func long(n int) string {
	unit := "<!channel> *b* ```\u202e\u200b 漢字\n"
	return strings.Repeat(unit, n/len([]rune(unit))+1)[:n]
}

// names are n people: Slack user ids, as a Slack config names them, or
// (byName) names that are no ids, shown as literal text.
func names(n int, byName bool) []string {
	var out []string
	for i := range n {
		if byName {
			out = append(out, fmt.Sprintf("person-%02d-%s", i, strings.Repeat("x", 60)))
		} else {
			out = append(out, fmt.Sprintf("U%08d", i))
		}
	}
	return out
}

// worstCard is a card at the cap whose every text is as long as it can
// be: the agent's words, the approvers, the escalations, and on every
// call the tool's name, the reasons, who may decide, an edit of many
// keys, the read-back, the arguments, a preview kept in part and
// rechecked, the approvals so far and a long result. open: every call
// waits (all buttons); else every call is decided. People are Slack ids
// unless byName.
func worstCard(open, byName bool) cardpkg.Card {
	at := t0
	many := confirm.Approvers{Users: names(40, byName), Groups: names(10, byName), Roles: names(10, byName)}
	someone := names(1, byName)[0]
	c := baseCard()
	c.Intro = long(5000)
	c.Approvers = many
	c.GrantFor = time.Hour
	c.ExtendRef, c.ExtendBy, c.AllRef = "k3q9x2abcdefghijklmnopqrst.ext", 30*time.Minute, "all-k3q9x2abcdefghijklmnopqrst.0"
	c.Extended = &cardpkg.Extension{By: someone, At: t0}
	c.Copy, c.ThreadLink = cardpkg.CopyDM, "https://airlock-test.slack.com/archives/C0OPS/p1700000000000100"
	for i := range 10 {
		c.Escalations = append(c.Escalations, cardpkg.Escalation{At: t0.Add(time.Duration(i) * time.Minute), Mention: many, Approvers: many, Fired: i%2 == 0})
	}
	c.Calls = nil
	for i := range config.DefaultMaxCallsPerReply {
		var changes []cardpkg.Change
		for j := range 20 {
			changes = append(changes, cardpkg.Change{Key: long(100) + fmt.Sprint(j), Before: long(300), After: long(300)})
		}
		var votes []confirm.Vote
		for _, n := range names(3, byName) {
			votes = append(votes, confirm.Vote{By: n, At: t0})
		}
		out := long(20000)
		call := cardpkg.Call{
			Ref: confirm.Ref(c.BatchID, i), Number: i + 1, Key: fmt.Sprint("k", i), Tool: long(200),
			Summary: long(1000), Args: long(10000), Flagged: true, Approvals: 5, Votes: votes,
			Reasons:   []confirm.Reason{{Kind: confirm.ReasonUnknownOutcome}, {Kind: confirm.ReasonRule, Rule: long(600)}, {Kind: confirm.ReasonRule, Rule: long(600)}},
			Restrict:  []confirm.Approvers{many, many, many, many, many, many},
			Grantable: true, Risk: confirm.RiskCritical, Editable: true,
			Edited:  &cardpkg.Edit{By: someone, At: t0, Changes: changes},
			Preview: &cardpkg.Preview{State: confirm.PreviewDone, Output: out, Hash: confirm.PreviewHash(out), Size: 4 << 20},
			State:   cardpkg.State{Kind: cardpkg.Waiting},
		}
		if !open {
			call.State = cardpkg.State{Kind: cardpkg.Denied, By: someone, At: &at, Reason: long(2000)}
			call.Run, call.Result = confirm.RunFailed, long(5000)
			call.Preview.Recheck, call.Preview.RecheckHash = confirm.RecheckChanged, confirm.PreviewHash("x")
			call.Check = &cardpkg.Check{Ref: confirm.CheckedRef(c.BatchID, i), By: someone, At: &at}
		}
		c.Calls = append(c.Calls, call)
	}
	return c
}

// messageOK fails unless Slack would take the message.
func messageOK(t *testing.T, what string, m CardMessage) {
	t.Helper()
	raw, err := json.Marshal(m.Blocks)
	if err != nil {
		t.Fatal(err)
	}
	if code := slacktest.CheckMessage(raw, m.Text); code != "" {
		t.Fatalf("%s: Slack would refuse it (%s): %d blocks, %d characters of text", what, code, len(m.Blocks), slacktest.TextIn(string(raw)))
	}
}

// allowsIn are the Allow buttons of messages (a critical call's typed
// Allow too), by value.
func allowsIn(msgs []CardMessage) map[string]bool {
	out := map[string]bool{}
	for _, m := range msgs {
		for _, b := range buttons(m.Blocks) {
			if b.ActionID == ActionAllow || b.ActionID == ActionAllowTyped {
				out[b.Value] = true
			}
		}
	}
	return out
}

// The worst card at the cap, waiting and decided, is messages Slack takes,
// and every waiting call has its Allow on one of them.
func TestWorstCardAtTheCapKeepsSlacksLimits(t *testing.T) {
	for _, open := range []bool{true, false} {
		c := worstCard(open, false)
		msgs := RenderMessages(c, nil)
		if len(msgs) != MessagesFor(len(c.Calls)) {
			t.Fatalf("%d messages, want %d", len(msgs), MessagesFor(len(c.Calls)))
		}
		for i, m := range msgs {
			messageOK(t, fmt.Sprintf("open %v, message %d", open, i+1), m)
			if js := string(mustJSON(m.Blocks)); strings.Contains(js, "not shown") {
				t.Fatalf("message %d leaves calls out", i+1)
			}
		}
		allows := allowsIn(msgs)
		for _, call := range c.Calls {
			if open != allows[call.Ref] {
				t.Fatalf("open %v: call %d's Allow shown %v", open, call.Number, allows[call.Ref])
			}
		}
	}
}

// A call's hostile arguments shorten that call only: beside it, calls of
// ordinary size are shown as they would be alone, and the long one says
// how much it hides and offers its arguments whole.
func TestLongCallDoesNotCutItsNeighbours(t *testing.T) {
	c := baseCard()
	c.Calls = nil
	for i := range CallsPerMessage {
		args := fmt.Sprintf("{\n  \"service\": \"svc-%02d\"\n}", i)
		if i == 3 {
			args = long(10000)
		}
		c.Calls = append(c.Calls, cardpkg.Call{Ref: confirm.Ref(c.BatchID, i), Number: i + 1, Tool: "deploy", Summary: fmt.Sprint("Deploy ", i),
			Args: args, Flagged: true, Approvals: 1, State: cardpkg.State{Kind: cardpkg.Waiting},
			Preview: &cardpkg.Preview{State: confirm.PreviewDone, Output: long(1400), Hash: "x"}})
	}
	msgs := RenderMessages(c, nil)
	if len(msgs) != 1 {
		t.Fatalf("%d messages", len(msgs))
	}
	messageOK(t, "the card", msgs[0])
	js := string(mustJSON(msgs[0].Blocks))
	for i, call := range c.Calls {
		alone := c
		alone.Calls = []cardpkg.Call{call}
		whole := string(mustJSON(callBlock(call, argsPreview(call.Args), true, nil, fullCaps)))
		if i != 3 && !strings.Contains(js, whole) {
			t.Errorf("call %d is not shown whole beside a long one", i+1)
		}
	}
	if !strings.Contains(js, "more characters hidden; Show full arguments shows them all.") {
		t.Error("the long call does not say what it hides")
	}
	if n := len(allowsIn(msgs)); n != CallsPerMessage {
		t.Errorf("%d Allow buttons, want %d", n, CallsPerMessage)
	}
}

// A card posted in one message before cards took several (its reference
// names one) is updated in one: what fits, and a note on the calls left
// out.
func TestCardPostedInOneMessageStaysInOne(t *testing.T) {
	c := worstCard(true, false)
	msgs := RenderMessagesIn(c, nil, 1)
	if len(msgs) != 1 {
		t.Fatalf("%d messages", len(msgs))
	}
	messageOK(t, "the card", msgs[0])
	if js := string(mustJSON(msgs[0].Blocks)); !strings.Contains(js, "more calls not shown") {
		t.Error("no note about the calls not shown")
	}
}

// A config naming every approver by name (not Slack id), with many
// escalations, makes long cards: Slack still takes every message (what
// does not fit is left out, saying so), it is never refused.
func TestCardOfPeopleByNameNeverRefused(t *testing.T) {
	for _, open := range []bool{true, false} {
		for i, m := range RenderMessages(worstCard(open, true), nil) {
			messageOK(t, fmt.Sprintf("open %v, message %d", open, i+1), m)
		}
	}
}
