package card

import (
	"strings"
	"testing"
	"time"

	"github.com/airlockhq/airlock/confirm"
)

func TestGrantLabelFollowsTheDuration(t *testing.T) {
	for d, want := range map[time.Duration]string{
		time.Hour: "Allow for 1h", 30 * time.Minute: "Allow for 30m", 90 * time.Minute: "Allow for 1h30m", 24 * time.Hour: "Allow for 24h",
	} {
		if got := (Card{GrantFor: d}).GrantLabel(); got != want {
			t.Errorf("%v: %q, want %q", d, got, want)
		}
	}
}

func TestProgressAndWhy(t *testing.T) {
	at := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	c := Call{Flagged: true, Approvals: 2, Votes: []confirm.Vote{{By: "alice", At: at}},
		Reasons: []confirm.Reason{{Kind: confirm.ReasonRule, Rule: "prod"}}, State: State{Kind: Waiting}}
	if got := c.Progress(); got != "1 of 2 approvals: alice" {
		t.Errorf("progress %q", got)
	}
	if got := c.Why(); got != "needs 2 approvals: rule prod" {
		t.Errorf("why %q", got)
	}
	c.Votes = append(c.Votes, confirm.Vote{By: "carol", At: at})
	c.State = State{Kind: Allowed, By: "carol", At: &at}
	if (Call{}).Why() != "" || (Call{Approvals: 1}).Progress() != "" {
		t.Error("an unflagged or single-approval call has no why or progress")
	}
}

func TestPartNote(t *testing.T) {
	c := Card{BatchID: "abc", Calls: make([]Call, 32)}
	c.Calls[0].State.Kind = Waiting
	if got := c.PartNote(1, 1, 1, 32); got != "" {
		t.Errorf("one message: %q", got)
	}
	if got := c.PartNote(1, 6, 1, 5); got != "This request's 32 calls fill 6 messages: calls 1–5 here, the rest in the messages that follow. Each call's buttons are under it; the request's own (Allow all, Deny all, Extend) are at the end of the last message." {
		t.Errorf("first: %q", got)
	}
	if got := c.PartNote(3, 6, 11, 16); got != "Approval request abc, continued (message 3 of 6): calls 11–16." {
		t.Errorf("third: %q", got)
	}
}

// A gateway client's card says which client asked, for whom and in which
// session, the session as code (inert).
func TestLeadOfAGatewayCall(t *testing.T) {
	c := Card{RequestedBy: "UBOB", Client: &Client{Name: "bob-laptop", Session: "sess <@U1>"}, Calls: []Call{{Number: 1, State: State{Kind: Waiting}}}}
	got := PlainText(c.Lead().Parts)
	if !strings.Contains(got, "Asked by bob-laptop, the agent of UBOB, in its session sess <@U1>; it wants to run 1 call.") {
		t.Fatalf("lead %q", got)
	}
	for _, p := range c.Lead().Parts {
		if p.Text == "sess <@U1>" && p.Kind != Code {
			t.Fatalf("the session is shown as %v, not inert code", p.Kind)
		}
	}
}
