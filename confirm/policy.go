package confirm

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// ToolInfo is what the policy may know of the tool a call would run with.
type ToolInfo struct {
	Name      string
	Confirm   bool // the tool's own "confirm" flag
	Approvals int  // distinct approvals the tool asks for (tools[].approvals); 0: the default
	Risk      Risk // tools[].risk; "": the default
}

// Request is what a policy may know of one call: the call, its tool, where
// and by whom it was asked, and when.
type Request struct {
	Call      ToolCall
	Tool      *ToolInfo // nil when the bot carries (or the channel offers) no tool of that name
	Platform  string
	Channel   string
	Requester string // platform user id of the turn's author
	// Client is the gateway client that asked (gateway.clients[].name);
	// "" for Airlock's own agent and runbooks.
	Client string
	Now    time.Time
}

// ReasonKind says why a call needs a person's yes, or was refused.
type ReasonKind string

const (
	ReasonToolFlag          ReasonKind = "tool_flag"          // the tool says confirm: true
	ReasonConfirmationTools ReasonKind = "confirmation_tools" // the tool is listed in confirmation.tools
	ReasonRule              ReasonKind = "rule"               // a confirmation.rules entry matched
	ReasonRuleError         ReasonKind = "rule_error"         // a rule could not be evaluated: counts as ask
	ReasonUnknownOutcome    ReasonKind = "unknown_outcome"    // an earlier call of the tool has an unknown outcome nobody checked yet
)

// Reason is one reason of a verdict.
type Reason struct {
	Kind ReasonKind `json:"kind"`
	Rule string     `json:"rule,omitempty"` // the rule's name, for rule kinds
}

// String is the reason in a person's words.
func (r Reason) String() string {
	switch r.Kind {
	case ReasonToolFlag:
		return "the tool needs approval"
	case ReasonConfirmationTools:
		return "listed in confirmation.tools"
	case ReasonRule:
		return "rule " + r.Rule
	case ReasonRuleError:
		return "rule " + r.Rule + " could not be evaluated"
	case ReasonUnknownOutcome:
		return "an earlier call of this tool has an unknown outcome: check whether it took effect"
	}
	return string(r.Kind)
}

// RuleOf names the rule among reasons: the first of kind rule, else the
// first naming any rule.
func RuleOf(rs []Reason) string {
	for _, r := range rs {
		if r.Kind == ReasonRule && r.Rule != "" {
			return r.Rule
		}
	}
	for _, r := range rs {
		if r.Rule != "" {
			return r.Rule
		}
	}
	return ""
}

// Approvers is a set of people: user ids, members of groups (Slack user
// groups) and holders of roles (Discord roles).
type Approvers struct {
	Users  []string `json:"users,omitempty"`
	Groups []string `json:"groups,omitempty"`
	Roles  []string `json:"roles,omitempty"`
}

// Empty reports whether the set names nobody.
func (a Approvers) Empty() bool { return len(a.Users) == 0 && len(a.Groups) == 0 && len(a.Roles) == 0 }

// Names lists the set's members as people read them: user ids, then
// "group <id>", then "role <name>" (raw: the caller escapes for its surface).
func (a Approvers) Names() []string {
	out := append([]string(nil), a.Users...)
	for _, g := range a.Groups {
		out = append(out, "group "+g)
	}
	for _, r := range a.Roles {
		out = append(out, "role "+r)
	}
	return out
}

// Verdict is a policy's answer for one call. The zero Verdict lets the call
// run without asking anyone.
type Verdict struct {
	Ask         bool   // a person must allow the call
	Deny        bool   // refused when the reply pauses; nobody is asked
	DenyRule    string // the rule that refused it
	DenyMessage string // what the model is told for a Deny
	// Approvals is how many distinct people must allow an Ask; 0 means the
	// configured default.
	Approvals int
	// Restrict narrows who may decide: a decider must belong to every
	// set (restrictions intersect).
	Restrict []Approvers
	// NotGrantable: no grant may ever cover the call.
	NotGrantable bool
	// Risk is the call's tier when the verdict rates it ("": no say).
	Risk    Risk
	Reasons []Reason
}

// Policy judges one call.
type Policy interface {
	Evaluate(Request) Verdict
}

// PolicyFunc adapts a function to Policy.
type PolicyFunc func(Request) Verdict

// Evaluate calls f.
func (f PolicyFunc) Evaluate(r Request) Verdict { return f(r) }

// FromToolFlag asks for calls of tools marked confirm, with the tool's
// approvals.
func FromToolFlag() Policy {
	return PolicyFunc(func(r Request) Verdict {
		if r.Tool == nil || !r.Tool.Confirm {
			return Verdict{}
		}
		return Verdict{Ask: true, Approvals: r.Tool.Approvals, Risk: r.Tool.Risk, Reasons: []Reason{{Kind: ReasonToolFlag}}}
	})
}

// ForTools asks for calls of the named tools, whatever their flag says.
func ForTools(names ...string) Policy {
	set := make(map[string]bool, len(names))
	for _, n := range names {
		set[n] = true
	}
	return PolicyFunc(func(r Request) Verdict {
		if !set[r.Call.Name] {
			return Verdict{}
		}
		v := Verdict{Ask: true, Reasons: []Reason{{Kind: ReasonConfirmationTools}}}
		if r.Tool != nil {
			v.Approvals, v.Risk = r.Tool.Approvals, r.Tool.Risk
		}
		return v
	})
}

// None asks for no call.
func None() Policy { return PolicyFunc(func(Request) Verdict { return Verdict{} }) }

// All combines policies: each call gets the Merge of their verdicts. A
// policy added with All can only add calls that need confirmation (or
// refuse them), never remove them.
func All(policies ...Policy) Policy { return all(policies) }

type all []Policy

func (ps all) Evaluate(r Request) Verdict {
	vs := make([]Verdict, 0, len(ps))
	for _, p := range ps {
		if p != nil {
			vs = append(vs, p.Evaluate(r))
		}
	}
	return Merge(vs...)
}

// MayAsk holds when one of the policies may ask (see MayAsk).
func (ps all) MayAsk(r Request) bool {
	for _, p := range ps {
		if MayAsk(p, r) {
			return true
		}
	}
	return false
}

// MayAsker is a policy that can tell whether some call of a tool could be
// asked about, whatever its arguments, requester and time: a rule whose
// expression could hold for the tool.
type MayAsker interface {
	// MayAsk reports whether some call of r.Call.Name at r.Platform and
	// r.Channel could be asked about.
	MayAsk(r Request) bool
}

// MayAsk reports whether p may ask about some call of the tool of r (its
// arguments, requester and time unknown); false for a policy that cannot
// tell (only MayAskers can).
func MayAsk(p Policy, r Request) bool {
	m, ok := p.(MayAsker)
	return ok && m.MayAsk(r)
}

// Merge combines verdicts on one call: a deny wins (the first one's rule
// and message); otherwise any ask asks, with the largest approvals; approver
// restrictions intersect; one not-grantable verdict makes the call not
// grantable; the highest risk wins; reasons add up.
func Merge(vs ...Verdict) Verdict {
	var out Verdict
	for _, v := range vs {
		if v.Deny && !out.Deny {
			out.Deny, out.DenyRule, out.DenyMessage = true, v.DenyRule, v.DenyMessage
		}
		out.Ask = out.Ask || v.Ask
		out.Approvals = max(out.Approvals, v.Approvals)
		out.Restrict = append(out.Restrict, v.Restrict...)
		out.NotGrantable = out.NotGrantable || v.NotGrantable
		out.Risk = out.Risk.Max(v.Risk)
		for _, r := range v.Reasons {
			if !slices.Contains(out.Reasons, r) {
				out.Reasons = append(out.Reasons, r)
			}
		}
	}
	return out
}

// NewPolicy builds the configured policy: the tools' confirm flag (unless
// honourFlag is false), the listed names, and any further policies (rules).
func NewPolicy(honourFlag bool, names []string, more ...Policy) Policy {
	ps := []Policy{ForTools(names...)}
	if honourFlag {
		ps = append(ps, FromToolFlag())
	}
	return All(append(ps, more...)...)
}

// DefaultRuleDenyMessage is what the model is told for a call a rule
// refused without a message of its own.
func DefaultRuleDenyMessage(rule string) string {
	return fmt.Sprintf("A policy rule (%s) refused this call. It was not executed.", rule)
}

// ReasonsText joins reasons in a person's words.
func ReasonsText(rs []Reason) string {
	parts := make([]string, len(rs))
	for i, r := range rs {
		parts[i] = r.String()
	}
	return strings.Join(parts, "; ")
}
