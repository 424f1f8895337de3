package card

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/airlockhq/airlock/confirm"
)

// show writes a status and actions in one line each, so a table can say
// them: people as @id, times as @hh:mm, untrusted text in quotes of its
// kind, icons by number, actions as kind:ref:label|numbered|a11y|emphasis|row.
func show(s Status, acts []Action) (string, string) {
	line := func(l Line) string {
		var b strings.Builder
		fmt.Fprintf(&b, "%d ", l.Icon)
		for _, p := range l.Parts {
			switch p.Kind {
			case Words:
				b.WriteString(p.Text)
			case Strong:
				b.WriteString("*" + p.Text + "*")
			case Label:
				b.WriteString("_" + p.Text + "_")
			case Person:
				b.WriteString("@" + p.Text)
			case Time:
				b.WriteString("@" + p.At.UTC().Format("15:04"))
			case Code:
				b.WriteString("`" + p.Text + "`")
			case Quote:
				b.WriteString("«" + p.Text + "»")
			case Output:
				b.WriteString("{" + p.Text + "}")
			}
		}
		return b.String()
	}
	st := line(s.Decision)
	if len(s.Run.Parts) > 0 {
		st += " | " + line(s.Run)
	}
	for _, n := range s.Notes {
		st += " / " + line(n)
	}
	var as []string
	for _, a := range acts {
		as = append(as, fmt.Sprintf("%d:%s:%s|%s|%s|%d|%d", a.Kind, a.Ref, a.Label, a.NumberedLabel, a.A11yLabel, a.Emphasis, a.Row))
	}
	return st, strings.Join(as, " ")
}

// Every state a call may be in: what its status says and which buttons it
// offers. Renderers only lay these out, so this is the one place the
// wording and the buttons are chosen.
func TestStatusAndActions(t *testing.T) {
	at := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	later := at.Add(5 * time.Minute)
	flagged := func(st State) Call {
		return Call{Ref: "b.0", Number: 2, Tool: "deploy", Flagged: true, Approvals: 1, State: st}
	}
	const decide = "1:b.0:Allow|Allow [2]|Allow call 2, <deploy>|1|0 3:b.0:Deny|Deny [2]|Deny call 2, <deploy>|2|0 " +
		"4:b.0:Deny with reason…|Deny [2] with reason…|Deny call 2 with a reason|0|0 " +
		"6:b.0:Show full arguments|Show full arguments [2]|Show the full arguments of call 2|0|1"
	for _, tc := range []struct {
		name    string
		card    Card
		call    Call
		status  string
		actions string
		plain   string
	}{
		{name: "waiting", call: flagged(State{Kind: Waiting}),
			status: "1 waiting for a decision", actions: decide, plain: "waiting for a decision"},
		{name: "waiting, not flagged: runs with the batch, no buttons", call: Call{Ref: "b.0", Number: 2, State: State{Kind: Waiting}},
			status: "0 runs with the batch (no approval needed)"},
		{name: "quorum", call: func() Call {
			c := flagged(State{Kind: Waiting})
			c.Approvals, c.Votes = 2, []confirm.Vote{{By: "U1", At: at}}
			return c
		}(), status: "1 waiting for a decision: 1 of 2 approvals: @U1", actions: decide,
			plain: "waiting for a decision: 1 of 2 approvals: U1"},
		{name: "grantable and editable", card: Card{GrantFor: time.Hour}, call: func() Call {
			c := flagged(State{Kind: Waiting})
			c.Grantable, c.Editable = true, true
			return c
		}(), status: "1 waiting for a decision",
			actions: "1:b.0:Allow|Allow [2]|Allow call 2, <deploy>|1|0 2:b.0:Allow for 1h|Allow [2] for 1h|Allow call 2 and calls of <deploy> in this thread for 1h|0|0 " +
				"3:b.0:Deny|Deny [2]|Deny call 2, <deploy>|2|0 4:b.0:Deny with reason…|Deny [2] with reason…|Deny call 2 with a reason|0|0 " +
				"5:b.0:Edit…|Edit [2]…|Edit the arguments of call 2, then allow it|0|1 6:b.0:Show full arguments|Show full arguments [2]|Show the full arguments of call 2|0|1"},
		{name: "grantable but grants off", call: func() Call { c := flagged(State{Kind: Waiting}); c.Grantable = true; return c }(),
			status: "1 waiting for a decision", actions: decide},
		{name: "denied with a reason", call: flagged(State{Kind: Denied, By: "U1", At: &at, Reason: "  not now "}),
			status: "4 denied by @U1 @12:00; not run / 0 _Reason: _«not now»", plain: "denied by U1 at 12:00:00 UTC; not run. Reason: not now"},
		{name: "withdrawn", call: flagged(State{Kind: Withdrawn, By: "U2", At: &at}),
			status: "4 withdrawn by the requester @U2 @12:00; not run"},
		{name: "moved on", call: flagged(State{Kind: MovedOn}), status: "4 not run: the requester moved on"},
		{name: "expired", call: flagged(State{Kind: Expired}), status: "6 expired: nobody decided in time; not run"},
		{name: "invalid", call: flagged(State{Kind: Invalid, Message: "bad <x>"}), status: "7 not run: «bad <x>»"},
		{name: "not run", call: flagged(State{Kind: NotRun, Message: "cap"}), status: "4 not run: «cap»"},
		{name: "refused by a rule, default words", call: flagged(State{Kind: DeniedByRule, Rule: "prod", Message: confirm.DefaultRuleDenyMessage("prod")}),
			status: "5 refused by rule `prod`; not run"},
		{name: "refused by a rule, its words", call: flagged(State{Kind: DeniedByRule, Rule: "prod", Message: " ask ops "}),
			status: "5 refused by rule `prod`; not run / 0 _The rule says: _«ask ops»"},
		{name: "policy, ran", call: Call{Ref: "b.0", Number: 2, State: State{Kind: AllowedByPolicy}, Run: confirm.RunSucceeded},
			status: "2 runs with the batch (no approval needed) | 10 succeeded"},
		{name: "grant, granter known", call: func() Call {
			c := flagged(State{Kind: AllowedByGrant, GrantID: "g1", GrantBy: "U3", At: &at})
			c.Run = confirm.RunRunning
			return c
		}(), status: "3 allowed by @U3's grant @12:00 | 9 running"},
		{name: "grant, by id", call: flagged(State{Kind: AllowedByGrant, GrantID: "g1"}), status: "3 allowed by grant `g1`"},
		{name: "grant, unnamed", call: flagged(State{Kind: AllowedByGrant}), status: "3 allowed by a grant"},
		{name: "allowed, failed", call: func() Call {
			c := flagged(State{Kind: Allowed, By: "U1", At: &at})
			c.Run, c.Result = confirm.RunFailed, "HTTP 500"
			return c
		}(), status: "3 allowed by @U1 @12:00 | 11 failed: {HTTP 500}", plain: "allowed by U1 at 12:00:00 UTC; failed: HTTP 500"},
		{name: "quorum allowed", call: func() Call {
			c := flagged(State{Kind: Allowed, By: "U2", At: &at})
			c.Approvals, c.Votes = 2, []confirm.Vote{{By: "U1"}, {By: "U2"}}
			return c
		}(), status: "3 allowed by @U1 and @U2 @12:00"},
		{name: "unknown, not checked: the check button", call: func() Call {
			c := flagged(State{Kind: Allowed, By: "U1", At: &at})
			c.Run, c.Check = confirm.RunUnknown, &Check{Ref: "checked-b.0"}
			return c
		}(), status: "3 allowed by @U1 @12:00 | 12 *outcome unknown*: " + UnknownWords +
			" / 0 Until someone marks it checked, every call of this tool in this thread needs a person's yes.",
			actions: "7:checked-b.0:I checked — go on|[2] I checked — go on|I checked the outcome of call 2: go on|0|2",
			plain: "allowed by U1 at 12:00:00 UTC; outcome unknown: " + UnknownWords +
				" Until someone marks it checked, every call of this tool in this thread needs a person's yes."},
		{name: "unknown, checked: no button", call: func() Call {
			c := flagged(State{Kind: Allowed, By: "U1", At: &at})
			c.Run, c.Check = confirm.RunUnknown, &Check{Ref: "checked-b.0", By: "U4", At: &later}
			return c
		}(), status: "3 allowed by @U1 @12:00 | 12 *outcome unknown*: " + UnknownWords +
			" / 13 _Checked by _@U4 @12:05; later calls of this tool are judged as usual."},
		{name: "unknown, no check reference: no button", call: func() Call {
			c := flagged(State{Kind: Allowed, By: "U1"})
			c.Run, c.Check = confirm.RunUnknown, &Check{}
			return c
		}(), status: "3 allowed by @U1 | 12 *outcome unknown*: " + UnknownWords +
			" / 0 Until someone marks it checked, every call of this tool in this thread needs a person's yes."},
		{name: "a state this version does not know", call: flagged(State{Kind: "later"}), status: "8 state `later`"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st, acts := show(tc.call.Status(), tc.card.Actions(tc.call, func(s string) string { return "<" + s + ">" }))
			if st != tc.status {
				t.Errorf("status\n got %s\nwant %s", st, tc.status)
			}
			if acts != tc.actions {
				t.Errorf("actions\n got %s\nwant %s", acts, tc.actions)
			}
			if tc.plain != "" && tc.call.Outcome() != tc.plain {
				t.Errorf("outcome\n got %q\nwant %q", tc.call.Outcome(), tc.plain)
			}
		})
	}
}

func TestExtendAction(t *testing.T) {
	waiting := Call{Ref: "b.0", Flagged: true, State: State{Kind: Waiting}}
	c := Card{ExtendRef: "b.0", ExtendBy: 30 * time.Minute, Calls: []Call{waiting}}
	a, ok := c.ExtendAction()
	if !ok || a.Kind != ActExtend || a.Ref != "b.0" || a.Label != "Extend 30m" || a.A11yLabel != "Push this card's deadline back, once: extend 30m" || a.Emphasis != Plain {
		t.Errorf("extend: %+v %v", a, ok)
	}
	for name, cd := range map[string]Card{
		"extended":      {ExtendRef: "b.0", Extended: &Extension{By: "U1"}, Calls: []Call{waiting}},
		"no reference":  {Calls: []Call{waiting}},
		"nobody to ask": {ExtendRef: "b.0", Calls: []Call{{Ref: "b.0", State: State{Kind: Waiting}}}},
		"decided":       {ExtendRef: "b.0", Calls: []Call{{Ref: "b.0", Flagged: true, State: State{Kind: Expired}}}},
	} {
		if _, ok := cd.ExtendAction(); ok {
			t.Errorf("%s: Extend offered", name)
		}
	}
}

// A gateway client's allowed call is the client's to carry out: the card
// says it waits for the client, then that the client carried it out and
// has not reported how it went, never that Airlock is running it.
func TestStatusOfACallTheClientCarriesOut(t *testing.T) {
	call := Call{Number: 1, Tool: "Bash", Flagged: true, Approvals: 1, CarriedBy: "bob-laptop", State: State{Kind: Allowed, By: "U1"}}
	for run, want := range map[confirm.RunStatus]string{
		confirm.RunNotStarted: "for bob-laptop to carry out; not started yet",
		confirm.RunRunning:    "carried out by bob-laptop; outcome not reported yet",
		confirm.RunSucceeded:  "succeeded",
	} {
		call.Run = run
		if got := PlainText(call.Status().Run.Parts); !strings.Contains(got, want) || strings.Contains(got, "running") {
			t.Errorf("%s: %q, want %q", run, got, want)
		}
	}
	call.Run = confirm.RunRunning
	if got := call.Brief(); got != "allowed; carried out by the agent, outcome not reported yet" {
		t.Errorf("brief: %q", got)
	}
	call.State = State{Kind: Denied, By: "U1"}
	call.Run = confirm.RunNotStarted
	if got := PlainText(call.Status().Run.Parts); got != "" {
		t.Errorf("a denied call: %q", got)
	}
}

// The lead of a gateway client's card that still waits says when the
// client stopped waiting, and that a retry gets the decision; once
// decided, it no longer does.
func TestLeadSaysTheClientStoppedWaiting(t *testing.T) {
	left := time.Date(2026, 12, 7, 14, 30, 0, 0, time.UTC)
	c := Card{RequestedBy: "U1", Client: &Client{Name: "bob-cursor", Session: "s1", LeftAt: &left},
		Calls: []Call{{Number: 1, Tool: "deploy", Flagged: true, Approvals: 1, State: State{Kind: Waiting}}}}
	got := PlainText(c.Lead().Parts)
	if !strings.Contains(got, "The agent stopped waiting at 14:30") || !strings.Contains(got, "if it calls again with the same arguments, it gets this decision.") {
		t.Fatalf("lead: %q", got)
	}
	c.Calls[0].State = State{Kind: Allowed, By: "U2"}
	if got := PlainText(c.Lead().Parts); strings.Contains(got, "stopped waiting") {
		t.Fatalf("a decided card's lead: %q", got)
	}
}

// A step-up decision says how the decider proved who they are.
func TestStatusSaysHowTheDeciderProvedWhoTheyAre(t *testing.T) {
	at := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	for via, want := range map[confirm.Assurance]string{
		confirm.AssurancePasskey: "allowed by U0ALICE with a passkey at 12:00:00 UTC",
		confirm.AssuranceSSO:     "allowed by U0ALICE after a fresh sign-in at 12:00:00 UTC",
		"":                       "allowed by U0ALICE at 12:00:00 UTC",
		confirm.AssuranceChat:    "allowed by U0ALICE at 12:00:00 UTC",
	} {
		c := Call{Flagged: true, Approvals: 1, State: State{Kind: Allowed, By: "U0ALICE", At: &at, Via: via}}
		if got := PlainText(c.Status().Decision.Parts); got != want {
			t.Errorf("%q: %q, want %q", via, got, want)
		}
	}
}

// Each vote of a quorum says how its voter proved who they are.
func TestVotesSayHowEachVoterProvedWhoTheyAre(t *testing.T) {
	at := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	votes := []confirm.Vote{{By: "U0ALICE", Via: confirm.AssurancePasskey}, {By: "U0BOB", Via: confirm.AssuranceSSO}, {By: "U0CAROL"}}
	c := Call{Flagged: true, Approvals: 3, Votes: votes[:2], State: State{Kind: Waiting}}
	if got, want := PlainText(c.Status().Decision.Parts), "waiting for a decision: 2 of 3 approvals: U0ALICE (passkey), U0BOB (fresh sign-in)"; got != want {
		t.Errorf("waiting: %q, want %q", got, want)
	}
	c.Votes, c.State = votes, State{Kind: Allowed, By: "U0CAROL", At: &at}
	if got, want := PlainText(c.Status().Decision.Parts), "allowed by U0ALICE (passkey) and U0BOB (fresh sign-in) and U0CAROL at 12:00:00 UTC"; got != want {
		t.Errorf("allowed: %q, want %q", got, want)
	}
}
