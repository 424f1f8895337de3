// Package card is the platform-neutral approval card: for each call of a
// paused reply, what it needs (approvals, who may decide, why), where it
// stands (a structured state), and what shows of it: the buttons it offers
// (Actions) and its status as typed parts (Status); likewise a runbook's
// run message (Run), the notices beside cards (a grant's, an unknown
// outcome's) and an MCP server's question with the form that answers it
// (QuestionNotice, AnswerForm). Chat platforms only lay these out, within their own limits;
// the words are chosen here.
package card

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/airlockhq/airlock/confirm"
)

// Card is the approval card of a paused reply.
type Card struct {
	// PageURL is the request's page on the web console (web.base_url);
	// "" without one. The footer links to it.
	PageURL     string
	BatchID     string
	Intro       string // the model's own words in the paused reply, if any (untrusted)
	RequestedBy string // platform user id
	// Approvers are the channel's approvers (calls may narrow them: see
	// Call.Restrict).
	Approvers confirm.Approvers
	CreatedAt time.Time
	ExpiresAt time.Time
	Status    confirm.BatchStatus
	Calls     []Call
	// GrantFor is the duration an "Allow for" button grants; 0 when grants
	// are off. Offer it on calls whose Grantable is true.
	GrantFor time.Duration
	// Now is when the card is rendered (the bot's clock): what a yes
	// covers says when a grant made now would end. Zero: it says how long.
	Now time.Time
	// SelfApproval: the requester may allow their own calls
	// (confirmation.self_approval); when off, what a yes covers says they
	// may not.
	SelfApproval bool

	// ExtendRef, when set, offers Extend (Slack action_id airlock_extend)
	// while a call waits: it pushes the deadline once per card by
	// ExtendBy. Its value is a call reference of the card (see
	// confirm.ParseRef); the bot takes the batch from it.
	ExtendRef string
	ExtendBy  time.Duration
	// AllRef, when set, offers Allow all and Deny all (Slack action_ids
	// airlock_allow_all, airlock_deny_all) while two or more calls wait:
	// see confirm.AllRef.
	AllRef string
	// Extended is set once someone extended the card (ExpiresAt is then
	// the new deadline).
	Extended *Extension
	// Escalations are the card's escalation steps, fired or not, in order.
	Escalations []Escalation
	// ThreadLink links back to the conversation's thread (a Slack
	// permalink, a Discord jump URL) on copies posted elsewhere: an
	// approvals channel or a DM. Empty on a card in its own thread.
	ThreadLink string
	// Copy says where this rendering is posted: "" in the conversation's
	// thread, CopyApprovals in an approvals channel, CopyDM in a DM.
	Copy string
	// Step, when set, says the card's call is a runbook's step: Airlock's
	// call, not the agent's (Intro is then empty, and RequestedBy is who
	// started the run).
	Step *Step
	// Client, when set, says the card's call is a gateway client's: an
	// agent outside Airlock asked, for RequestedBy, in one of its
	// sessions.
	Client *Client
}

// Client names the gateway client that asked (gateway.clients[].name)
// and its session (the agent's words: shown inert).
type Client struct {
	Name    string
	Session string
	// LeftAt is when the client stopped waiting for the decision (an MCP
	// client that cancelled its call); nil while it waits.
	LeftAt *time.Time
}

// Step names the runbook step a card's call is.
type Step struct {
	Runbook   string // the runbook's name (config: [a-z0-9_-])
	ID        string // the step's id (config: [a-z0-9_])
	StartedBy string // platform user id of who started the run
	Attempt   int    // from 1
	// Attempts is how many attempts its retry allows (0 or 1: no retry);
	// an approval of the step covers them.
	Attempts int
}

// Title is the step in words: "step restart of runbook restart", with
// ", attempt 2" past the first and " (up to 5 attempts; one approval
// covers them)" for a retried step.
func (s Step) Title() string { return PlainText(s.titleParts(false)) }

// Where a card copy is posted (Card.Copy).
const (
	CopyApprovals = "approvals"
	CopyDM        = "dm"
)

// Extension records an Extend click.
type Extension struct {
	By string // platform user id
	At time.Time
}

// Escalation is one escalation step as a card shows it.
type Escalation struct {
	At      time.Time         // when it fires (pause + after)
	Mention confirm.Approvers // who it mentions (shown inert on the card)
	// Approvers widen who may decide the card once it fired.
	Approvers confirm.Approvers
	Fired     bool
}

// Pointer is the short message left in a conversation's thread when its
// card was posted in an approvals channel: it links to the card and is
// edited to the outcome. It has no buttons.
type Pointer struct {
	BatchID  string
	Channel  string // the approvals channel's id (renderers show it without pinging)
	CardLink string // Slack permalink / Discord jump URL of the card; may be empty
	// Status is the batch's status; Calls carry each call's state, as on
	// the card, so the pointer can say "allowed by …; succeeded".
	Status confirm.BatchStatus
	Calls  []Call
}

// Complete reports whether no call the pointer lists waits any more.
func (p Pointer) Complete() bool { return Card{Calls: p.Calls}.Complete() }

// Call is one call on a card.
type Call struct {
	Ref     string // opaque reference for buttons; see confirm.ParseRef
	Number  int    // 1-based, for people
	Key     string
	Tool    string
	Summary string // the read-back, built from the validated arguments only (untrusted text)
	Args    string // pretty JSON of the exact arguments (untrusted text)

	Flagged   bool                // a person must decide
	Reasons   []confirm.Reason    // why a person is asked (or which rule refused it)
	Approvals int                 // distinct approvals needed when flagged (>= 1)
	Votes     []confirm.Vote      // approvals so far
	Restrict  []confirm.Approvers // when set, only people in every set may decide
	// Grantable: "Allow for <GrantFor>" may allow it (and later calls of
	// its tool in this conversation). Only while it is open.
	Grantable bool
	// Risk is the tier of a flagged call; medium (the default) and ""
	// show no label.
	Risk confirm.Risk

	State  State
	Run    confirm.RunStatus
	Result string // the tool's output or error (scrubbed)

	// Editable offers Edit… (Slack action_id airlock_edit) while the call
	// waits: an approver may change its arguments, which counts as their
	// Allow of the edited call.
	Editable bool
	// Edited is set when an approver changed the arguments: Summary and
	// Args are then the edited call's.
	Edited *Edit
	// Check is set when the call's run ended unknown: until a person marks
	// it checked, every later call of its tool in the conversation needs a
	// yes. While it is not done, renderers offer "I checked — go on"
	// (Slack action_id airlock_checked) carrying Check.Ref; once done they
	// say who checked it and when.
	Check *Check
	// Preview is the call's dry run (tools[].preview); nil when none.
	Preview *Preview
	// CarriedBy is the gateway client that runs the call once allowed
	// (gateway.clients[].name); "" when Airlock runs it.
	CarriedBy string
}

// CheckedLabel is the label of the button that marks an unknown run checked.
const CheckedLabel = "I checked — go on"

// Check is where a person's check of an unknown run stands.
type Check struct {
	Ref string     // opaque reference for the button; see confirm.ParseCheckedRef
	By  string     // platform user id of who marked it checked; "" while not
	At  *time.Time // when; nil while not checked
}

// Done reports whether a person marked the run checked.
func (k Check) Done() bool { return k.At != nil }

// Text is the check in shared words: "checked by U1 at 12:00:00 UTC";
// empty while not checked.
func (k Check) Text() string {
	if !k.Done() {
		return ""
	}
	return "checked by " + k.By + " at " + k.At.UTC().Format("15:04:05 UTC")
}

// UnknownNotice is the thread line that announces the unknown outcome of
// a call no card shows (it ran without approval), with "I checked — go
// on" while it is not checked.
type UnknownNotice struct {
	Check   Check
	Number  int    // 1-based position of the call in its reply
	Tool    string // (untrusted text)
	Summary string // the read-back (untrusted text)
}

// Edit records an approver's change of a call's arguments.
type Edit struct {
	By      string // platform user id
	At      time.Time
	Changes []Change // top-level keys that changed, in key order
}

// Change is one changed top-level argument, as compact JSON ("" when the
// key was absent on that side; untrusted text).
type Change struct {
	Key    string
	Before string
	After  string
}

// Kind is where a call's decision stands.
type Kind string

const (
	Waiting         Kind = "waiting"           // a person must still decide
	Allowed         Kind = "allowed"           // people allowed it (State.By is the last; Votes all)
	AllowedByPolicy Kind = "allowed_by_policy" // no approval needed
	AllowedByGrant  Kind = "allowed_by_grant"  // a grant covered it (State.Grant*)
	Denied          Kind = "denied"            // a person denied it (State.By, State.Reason)
	Withdrawn       Kind = "withdrawn"         // the requester denied their own call
	MovedOn         Kind = "moved_on"          // the pause was abandoned: the requester wrote again
	Expired         Kind = "expired"           // nobody decided in time
	Invalid         Kind = "invalid"           // the arguments failed validation (State.Message)
	DeniedByRule    Kind = "denied_by_rule"    // a rule refused it (State.Rule, State.Message)
	NotRun          Kind = "not_run"           // not run for another reason (State.Message)
)

// State is a call's decision as data.
type State struct {
	Kind    Kind
	By      string     // platform user id of the person who decided, if any
	At      *time.Time // when it was decided
	Reason  string     // a person's own words with a deny (untrusted)
	Message string     // Airlock's or a rule's words for Invalid, DeniedByRule, NotRun
	Rule    string     // the rule, for DeniedByRule
	GrantID string     // for AllowedByGrant
	// GrantBy is who granted the grant (platform user id), when the
	// renderer knows it; the status then names them instead of the grant.
	GrantBy string
	// Via is how the decider proved who they are when it was more than a
	// chat click (confirmation.step_up): "passkey" or "sso".
	Via confirm.Assurance
}

// allows reports whether the decision lets the call run.
func (k Kind) allows() bool { return k == Allowed || k == AllowedByPolicy || k == AllowedByGrant }

// Open reports whether the call still waits for a decision.
func (c Call) Open() bool { return c.State.Kind == Waiting }

// Call returns the card's call with the button reference ref, or nil (also
// on a nil card).
func (c *Card) Call(ref string) *Call {
	if c == nil {
		return nil
	}
	for i := range c.Calls {
		if c.Calls[i].Ref == ref {
			return &c.Calls[i]
		}
	}
	return nil
}

// Complete reports whether no call of the card waits any more.
func (c Card) Complete() bool {
	for _, cc := range c.Calls {
		if cc.Open() {
			return false
		}
	}
	return true
}

// Progress is the approvals so far of a call needing more than one, e.g.
// "1 of 2 approvals: U1"; empty for calls needing one.
func (c Call) Progress() string {
	if c.Approvals <= 1 {
		return ""
	}
	by := make([]string, len(c.Votes))
	for i, v := range c.Votes {
		by[i] = v.By
	}
	s := fmt.Sprintf("%d of %d approvals", len(c.Votes), c.Approvals)
	if len(by) > 0 {
		s += ": " + strings.Join(by, ", ")
	}
	return s
}

// Why says why a person is asked and how many must allow, e.g. "needs 2
// approvals: rule prod-restarts", after the tier when it is not the
// default ("critical risk, needs approval"); empty for calls nobody is
// asked about.
func (c Call) Why() string {
	if !c.Flagged {
		return ""
	}
	need := "needs approval"
	if c.Approvals > 1 {
		need = fmt.Sprintf("needs %d approvals", c.Approvals)
	}
	if l := c.RiskLabel(); l != "" {
		need = l + ", " + need
	}
	if len(c.Reasons) == 0 {
		return need
	}
	return need + ": " + confirm.ReasonsText(c.Reasons)
}

// RiskLabel is a flagged call's tier in words when it is not the default
// ("high risk"); empty otherwise. Renderers may add a colour or an emoji,
// never instead of the words.
func (c Call) RiskLabel() string {
	if !c.Flagged || c.Risk == "" || c.Risk == confirm.RiskMedium {
		return ""
	}
	return string(c.Risk) + " risk"
}

// Outcome is a short description of where a call stands, in shared words
// (Status as plain text). User ids appear as they are; renderers show
// them as inert text or turn them into non-pinging mentions.
func (c Call) Outcome() string { return c.Status().Text() }

// GrantLabel is the "Allow for" button's label, e.g. "Allow for 1h".
func (c Card) GrantLabel() string { return "Allow for " + Duration(c.GrantFor) }

// Duration prints a grant duration the short way people write it: 1h,
// 30m, 1h30m, 24h.
func Duration(d time.Duration) string {
	s := d.Round(time.Minute).String() // "1h0m0s"
	s = strings.TrimSuffix(s, "0s")
	s = strings.TrimSuffix(s, "h0m")
	if strings.HasSuffix(s, "h") || strings.HasSuffix(s, "m") {
		return s
	}
	return s + "h"
}

// GrantNotice is the message that announces a grant, with a Revoke button
// for approvers.
type GrantNotice struct {
	Ref     string // opaque reference for the Revoke button; see confirm.ParseGrantRef
	GrantID string
	Tool    string
	By      string // who granted (platform user id)
	// For is the requester whose later turns the grant covers (platform
	// user id); turns of the channel's approvers are covered too.
	For       string
	Until     time.Time
	RevokedBy string // set once revoked
	RevokedAt *time.Time
}

// Active reports whether the notice should still offer Revoke.
func (n GrantNotice) Active(now time.Time) bool { return n.RevokedAt == nil && now.Before(n.Until) }

// Excerpt trims s to n runes, ending in "…" when cut.
func Excerpt(s string, n int) string {
	s = strings.TrimSpace(s)
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n]) + "…"
}

// OneLine is s on one line: each run of white space, line breaks
// included, becomes one space, and none is left at either end.
func OneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// Hidden says how much of a text a renderer left out: "1,234 more
// characters hidden".
func Hidden(n int) string {
	if n == 1 {
		return "1 more character hidden"
	}
	return strings.TrimSuffix(Characters(n), " characters") + " more characters hidden"
}

// Characters counts characters for people: "1 character", "1,234 characters".
func Characters(n int) string {
	s := strconv.Itoa(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	if n == 1 {
		return s + " character"
	}
	return s + " characters"
}
