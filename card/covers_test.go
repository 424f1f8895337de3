package card

import (
	"reflect"
	"testing"
	"time"

	"github.com/airlockhq/airlock/confirm"
)

func coverCard() (Card, Call) {
	now := time.Date(2026, 11, 30, 13, 30, 0, 0, time.UTC)
	c := Card{RequestedBy: "bob", Now: now}
	call := Call{Number: 1, Tool: "restart_service", Flagged: true, Approvals: 1, State: State{Kind: Waiting}}
	return c, call
}

// TestCoverSaysWhatEachButtonDoes: for each case an approver meets, the
// structured cover and its words.
func TestCoverSaysWhatEachButtonDoes(t *testing.T) {
	now := time.Date(2026, 11, 30, 13, 30, 0, 0, time.UTC)
	cases := []struct {
		name  string
		edit  func(*Card, *Call)
		want  Cover
		words string
	}{
		{"once", func(c *Card, cl *Call) { c.SelfApproval = true },
			Cover{Tool: "restart_service", Approvals: 1},
			"Allow runs this call once."},
		{"grant offered", func(c *Card, cl *Call) { c.SelfApproval, c.GrantFor, cl.Grantable = true, time.Hour, true },
			Cover{Tool: "restart_service", Approvals: 1, Grant: &GrantCover{Label: "Allow for 1h", Duration: time.Hour, Requester: "bob", Until: now.Add(time.Hour)}},
			"Allow runs this call once. Allow for 1h also allows later calls of restart_service in this thread, requested by bob or an approver, until 14:30 UTC if clicked now."},
		{"grant without a render time", func(c *Card, cl *Call) {
			c.SelfApproval, c.GrantFor, cl.Grantable, c.Now = true, 30*time.Minute, true, time.Time{}
		},
			Cover{Tool: "restart_service", Approvals: 1, Grant: &GrantCover{Label: "Allow for 30m", Duration: 30 * time.Minute, Requester: "bob"}},
			"Allow runs this call once. Allow for 30m also allows later calls of restart_service in this thread, requested by bob or an approver, for 30m from the click."},
		{"a gateway client's call, granted in its session", func(c *Card, cl *Call) {
			c.SelfApproval, c.GrantFor, cl.Grantable, cl.CarriedBy = true, time.Hour, true, "bob-laptop"
		},
			Cover{Tool: "restart_service", Approvals: 1, CarriedBy: "bob-laptop", Grant: &GrantCover{Label: "Allow for 1h", Duration: time.Hour, Requester: "bob", Until: now.Add(time.Hour)}},
			"Allow lets bob-laptop run this call once. Allow for 1h also allows later calls of restart_service by bob-laptop in this session, requested by bob or an approver, until 14:30 UTC if clicked now."},
		{"a gateway client's call, quorum", func(c *Card, cl *Call) { cl.Approvals, cl.CarriedBy = 2, "bob-laptop" },
			Cover{Tool: "restart_service", Approvals: 2, Barred: "bob", CarriedBy: "bob-laptop"},
			"Allow is approval 1 of 2 needed; bob-laptop may run the call once, after the last. bob asked for it and may not allow it."},
		{"quorum, requester barred", func(c *Card, cl *Call) { cl.Approvals = 2 },
			Cover{Tool: "restart_service", Approvals: 2, Barred: "bob"},
			"Allow is approval 1 of 2 needed; the call runs once, after the last. bob asked for it and may not allow it."},
		{"quorum, last approval", func(c *Card, cl *Call) {
			c.SelfApproval, cl.Approvals, cl.Votes = true, 2, []confirm.Vote{{By: "carol", At: now}}
		},
			Cover{Tool: "restart_service", Approvals: 2, Given: 1},
			"Allow is the last of 2 approvals needed and runs this call once."},
		{"restricted approvers", func(c *Card, cl *Call) {
			c.SelfApproval, cl.Restrict = true, []confirm.Approvers{{Users: []string{"dave"}, Groups: []string{"S1"}}}
		},
			Cover{Tool: "restart_service", Approvals: 1, Only: []confirm.Approvers{{Users: []string{"dave"}, Groups: []string{"S1"}}}},
			"Allow runs this call once. Only dave, group S1 may allow it."},
		{"restricted by two rules", func(c *Card, cl *Call) {
			c.SelfApproval, cl.Restrict = true, []confirm.Approvers{{Users: []string{"dave", "erin"}}, {Roles: []string{"sre"}}}
		},
			Cover{Tool: "restart_service", Approvals: 1, Only: []confirm.Approvers{{Users: []string{"dave", "erin"}}, {Roles: []string{"sre"}}}},
			"Allow runs this call once. Only people in each of (dave, erin) and (role sre) may allow it."},
		{"critical, grants on", func(c *Card, cl *Call) { c.SelfApproval, c.GrantFor, cl.Risk = true, time.Hour, confirm.RiskCritical },
			Cover{Tool: "restart_service", Approvals: 1, Phrase: true, NoGrant: confirm.RiskCritical},
			"Allow asks you to type a confirmation phrase, then runs this call once. No grant: critical-risk calls are never granted."},
		{"high, grants on", func(c *Card, cl *Call) { c.SelfApproval, c.GrantFor, cl.Risk = true, time.Hour, confirm.RiskHigh },
			Cover{Tool: "restart_service", Approvals: 1, NoGrant: confirm.RiskHigh},
			"Allow runs this call once. No grant: high-risk calls are never granted."},
		{"high, grants off", func(c *Card, cl *Call) { c.SelfApproval, cl.Risk = true, confirm.RiskHigh },
			Cover{Tool: "restart_service", Approvals: 1},
			"Allow runs this call once."},
		{"critical quorum", func(c *Card, cl *Call) { c.SelfApproval, cl.Risk, cl.Approvals = true, confirm.RiskCritical, 3 },
			Cover{Tool: "restart_service", Approvals: 3, Phrase: true},
			"Allow asks you to type a confirmation phrase, then gives approval 1 of 3 needed; the call runs once, after the last."},
		{"runbook step with retries", func(c *Card, cl *Call) {
			c.SelfApproval, c.Step = true, &Step{Runbook: "restart", ID: "restart", Attempt: 1, Attempts: 5}
		},
			Cover{Tool: "restart_service", Approvals: 1, Attempts: 5},
			"Allow runs this step once. One yes covers up to 5 attempts."},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, call := coverCard()
			tc.edit(&c, &call)
			got, ok := c.Cover(call)
			if !ok {
				t.Fatal("a waiting call has no cover")
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("cover\n got %+v\nwant %+v", got, tc.want)
			}
			if s := got.Text(); s != tc.words {
				t.Errorf("words\n got %q\nwant %q", s, tc.words)
			}
		})
	}
}

// TestCoverOnlyWhileWaiting: a decided call, or one nobody is asked
// about, shows no cover.
func TestCoverOnlyWhileWaiting(t *testing.T) {
	c, call := coverCard()
	at := c.Now
	for name, edit := range map[string]func(*Call){
		"allowed":     func(cl *Call) { cl.State = State{Kind: Allowed, By: "alice", At: &at} },
		"denied":      func(cl *Call) { cl.State = State{Kind: Denied, By: "alice", At: &at} },
		"expired":     func(cl *Call) { cl.State = State{Kind: Expired} },
		"not flagged": func(cl *Call) { cl.Flagged = false },
	} {
		cl := call
		edit(&cl)
		if v, ok := c.Cover(cl); ok {
			t.Errorf("%s: cover %q", name, v.Text())
		}
	}
}

// TestCoverKeepsHostileTextInItsParts: a hostile tool name or requester
// is never part of Airlock's words: each stays in its own typed part, for
// the renderer to escape.
func TestCoverKeepsHostileTextInItsParts(t *testing.T) {
	c, call := coverCard()
	c.GrantFor, call.Grantable = time.Hour, true
	c.RequestedBy = "<!channel> *bold* @everyone"
	call.Tool = "x` <@U999> ```\u202e"
	v, _ := c.Cover(call)
	for _, p := range v.Line().Parts {
		switch p.Kind {
		case Words:
			if p.Text != "" && (containsAny(p.Text, "<!@`\u202e*")) {
				t.Errorf("words carry outside text: %q", p.Text)
			}
		case Code:
			if p.Text != call.Tool {
				t.Errorf("code part %q", p.Text)
			}
		case Person:
			if p.Text != c.RequestedBy {
				t.Errorf("person part %q", p.Text)
			}
		}
	}
}

func containsAny(s, chars string) bool {
	for _, r := range chars {
		for _, q := range s {
			if q == r {
				return true
			}
		}
	}
	return false
}
