package card

import (
	"strconv"
	"strings"
	"time"

	"github.com/airlockhq/airlock/confirm"
)

// People is a part naming a set of people (Part.Who): users, groups and
// roles, each shown as its platform names them, pinging nobody.
const People PartKind = Output + 1

// Cover is what a yes covers on a call still waiting for a person: what
// its buttons do in this card's case, as data. Its Line says it in
// Airlock's words; renderers lay the line out beside the call's buttons.
type Cover struct {
	Tool string // the call's tool (untrusted: shown as Code)
	// Approvals is how many distinct people must allow the call; Given
	// how many did so far. One more Allow than Given runs it once the
	// count reaches Approvals.
	Approvals, Given int
	// Attempts is a runbook step's attempts when its retry allows more
	// than one: one approval covers them.
	Attempts int
	// Phrase: Allow asks the approver to type a confirmation phrase (a
	// critical call).
	Phrase bool
	// Grant is what "Allow for <duration>" allows besides this call; nil
	// when the call offers no such button.
	Grant *GrantCover
	// NoGrant is the tier that keeps the card's "Allow for" off this
	// call ("" when grants are off, offered, or kept off for another
	// reason).
	NoGrant confirm.Risk
	// Barred is the requester, who may not allow their own call
	// (self-approval is off); "" otherwise.
	Barred string
	// Only are the sets a decider must belong to, every one, when rules
	// narrowed who may decide.
	Only []confirm.Approvers
	// CarriedBy is the gateway client that runs the call ("" : Airlock):
	// a yes lets it run the call, and a grant covers its session.
	CarriedBy string
}

// GrantCover is what a grant made by "Allow for" would cover: later
// calls of the tool in this thread, requested by Requester or an approver
// of the channel, for Duration from the click.
type GrantCover struct {
	Label     string // the button's label, "Allow for 1h"
	Duration  time.Duration
	Requester string // platform user id
	// Until is when a grant made at the card's render time (Card.Now)
	// ends; zero when the card has no render time.
	Until time.Time
}

// Cover is what a yes covers on call; false for a call nobody waits on
// (not flagged, or decided): decided calls show none.
func (c Card) Cover(call Call) (Cover, bool) {
	if !call.Flagged || !call.Open() {
		return Cover{}, false
	}
	v := Cover{Tool: call.Tool, Approvals: max(call.Approvals, 1), Given: len(call.Votes),
		Phrase: call.Risk == confirm.RiskCritical, Only: call.Restrict}
	if s := c.Step; s != nil && s.Attempts > 1 {
		v.Attempts = s.Attempts
	}
	switch {
	case c.GrantFor > 0 && call.Grantable:
		g := &GrantCover{Label: c.GrantLabel(), Duration: c.GrantFor, Requester: c.RequestedBy}
		if !c.Now.IsZero() {
			g.Until = c.Now.Add(c.GrantFor)
		}
		v.Grant = g
	case c.GrantFor > 0 && call.Risk.NoGrant():
		v.NoGrant = call.Risk
	}
	if !c.SelfApproval && c.RequestedBy != "" {
		v.Barred = c.RequestedBy
	}
	v.CarriedBy = call.CarriedBy
	return v, true
}

// Line is the cover in Airlock's words, its sentences in one line:
//
//	Allow runs this call once.
//	Allow is approval 1 of 2 needed; the call runs once, after the last.
//	Allow asks you to type a confirmation phrase, then runs this call once.
//	Allow for 1h also allows later calls of deploy in this thread, requested by U1 or an approver, until 14:30 if clicked now.
//	No grant: high-risk calls are never granted.
//	U1 asked for it and may not allow it.
//	Only U2 may allow it.
//
// The tool is a Code part, people Person and People parts, the grant's
// end a Time part.
func (v Cover) Line() Line {
	w := func(s string) Part { return Part{Kind: Words, Text: s} }
	allow := "Allow "
	if v.Phrase {
		allow = "Allow asks you to type a confirmation phrase, then "
	}
	it, the := "this call", "the call"
	if v.Attempts > 1 {
		it, the = "this step", "the step"
	}
	runs, runsOnce, where := "runs "+it+" once", the+" runs once", " in this thread"
	if v.CarriedBy != "" { // Airlock runs nothing: the agent does, once
		runs, runsOnce = "lets "+v.CarriedBy+" run "+it+" once", v.CarriedBy+" may run "+the+" once"
		where = " by " + v.CarriedBy + " in this session"
	}
	var ps []Part
	switch n := max(v.Approvals, 1); {
	case n == 1:
		ps = append(ps, w(allow+runs+"."))
	case v.Given+1 >= n:
		if v.Phrase {
			allow += "gives "
		} else {
			allow += "is "
		}
		ps = append(ps, w(allow+"the last of "+strconv.Itoa(n)+" approvals needed and "+runs+"."))
	default:
		if v.Phrase {
			allow += "gives "
		} else {
			allow += "is "
		}
		ps = append(ps, w(allow+"approval "+strconv.Itoa(v.Given+1)+" of "+strconv.Itoa(n)+" needed; "+runsOnce+", after the last."))
	}
	if v.Attempts > 1 {
		ps = append(ps, w(" One yes covers up to "+strconv.Itoa(v.Attempts)+" attempts."))
	}
	if g := v.Grant; g != nil {
		ps = append(ps, w(" "+g.Label+" also allows later calls of "), Part{Kind: Code, Text: v.Tool},
			w(where+", requested by "), Part{Kind: Person, Text: g.Requester}, w(" or an approver, "))
		if g.Until.IsZero() {
			ps = append(ps, w("for "+Duration(g.Duration)+" from the click."))
		} else {
			ps = append(ps, w("until "), Part{Kind: Time, At: g.Until}, w(" if clicked now."))
		}
	}
	if v.NoGrant != "" {
		ps = append(ps, w(" No grant: "+string(v.NoGrant)+"-risk calls are never granted."))
	}
	if v.Barred != "" {
		ps = append(ps, w(" "), Part{Kind: Person, Text: v.Barred}, w(" asked for it and may not allow it."))
	}
	switch len(v.Only) {
	case 0:
	case 1:
		ps = append(ps, w(" Only "), Part{Kind: People, Who: v.Only[0]}, w(" may allow it."))
	default:
		ps = append(ps, w(" Only people in each of "))
		for i, set := range v.Only {
			if i > 0 {
				ps = append(ps, w(" and "))
			}
			ps = append(ps, w("("), Part{Kind: People, Who: set}, w(")"))
		}
		ps = append(ps, w(" may allow it."))
	}
	return Line{Parts: ps}
}

// Text is the cover's line as plain text: people as their ids, times as
// "15:04 UTC" (no escaping: callers escape what they show).
func (v Cover) Text() string {
	var b strings.Builder
	for _, p := range v.Line().Parts {
		switch p.Kind {
		case Time:
			b.WriteString(p.At.UTC().Format("15:04 UTC"))
		case People:
			b.WriteString(strings.Join(p.Who.Names(), ", "))
		default:
			b.WriteString(p.Text)
		}
	}
	return b.String()
}
