package bot

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"
	"time"

	"github.com/airlockhq/airlock/card"
	"github.com/airlockhq/airlock/confirm"
)

// SystemActor decides for nobody in particular: abandoned pauses, expiry.
// The card names it in words (card.ActorName).
const SystemActor = card.SystemActor

// PolicyActor records calls the policy let through at pause time.
const PolicyActor = card.PolicyActor

// ruleActor and grantActor record calls a rule refused or a grant allowed.
func ruleActor(name string) string { return "rule:" + name }
func grantActor(id string) string  { return "grant:" + id }

// cardExtras are the card's parts that come from the bot's config:
// Extend, Edit… and the escalation steps.
type cardExtras struct {
	extendBy   time.Duration // 0: no Extend
	editable   func(tool string) bool
	escalation []EscalationStep
	// now is the render time (what a yes covers says when a grant made
	// now ends); selfApproval whether requesters may allow their own calls.
	now          time.Time
	selfApproval bool
	// stepUp is what each tier's votes need to count (a vote made with
	// less is not shown as one).
	stepUp confirm.StepUp
}

// cardWith builds the card of a batch. grantFor is the "Allow for"
// duration (0: grants are off).
func cardWith(b *confirm.Batch, intro string, approvers confirm.Approvers, grantFor time.Duration, x cardExtras) card.Card {
	c := card.Card{
		BatchID:     b.ID,
		Intro:       intro,
		RequestedBy: b.RequestedBy,
		Approvers:   approvers,
		CreatedAt:   b.CreatedAt,
		ExpiresAt:   b.ExpiresAt,
		Status:      b.Status,
		GrantFor:    grantFor,
	}
	c.Now, c.SelfApproval = x.now, x.selfApproval
	// A requester who may also approve (self-approval on and listed as an
	// approver, as the terminal's one person is) decides as an approver:
	// their deny reads "denied by", not "withdrawn by the requester".
	withdrawer := b.RequestedBy
	if x.selfApproval && slices.Contains(approvers.Users, withdrawer) {
		withdrawer = ""
	}
	for _, call := range b.Calls {
		st := stateOf(call, withdrawer)
		c.Calls = append(c.Calls, card.Call{
			Ref:       confirm.RefAt(b.ID, call.Position, call.Revision),
			Number:    call.Position + 1,
			Key:       call.Key,
			Tool:      call.Tool,
			Summary:   call.Summary,
			Args:      prettyJSON(call.RunArgs()),
			Flagged:   call.Flagged,
			Reasons:   call.Reasons,
			Approvals: max(call.Approvals, 1),
			Votes:     countingVotes(call.Votes, x.stepUp.Needs(call.Risk)),
			Restrict:  call.Restrict,
			Grantable: grantFor > 0 && call.Grantable && st.Kind == card.Waiting,
			Risk:      call.Risk,
			State:     st,
			Run:       call.Run,
			Result:    call.Result,
			Editable:  st.Kind == card.Waiting && call.Flagged && x.editable != nil && x.editable(call.Tool),
			Check:     checkOf(call),
		})
		if pv := call.Preview; pv.State != confirm.PreviewNone {
			cc := &c.Calls[len(c.Calls)-1]
			cc.Preview = &card.Preview{State: pv.State, Output: pv.Output, Hash: pv.Hash, Size: pv.Size, Recheck: pv.Recheck, RecheckHash: pv.RecheckHash}
			cc.Editable = false // the preview shows the model's arguments
		}
		if len(call.EditedArgs) > 0 && call.EditedAt != nil {
			c.Calls[len(c.Calls)-1].Edited = &card.Edit{By: call.EditedBy, At: *call.EditedAt, Changes: changes(call.Args, call.EditedArgs)}
		}
	}
	if b.ExtendedBy != "" && b.ExtendedAt != nil {
		c.Extended = &card.Extension{By: b.ExtendedBy, At: *b.ExtendedAt}
	}
	if b.Status == confirm.BatchPending {
		c.AllRef = confirm.AllRef(b.ID, b.Revisions())
	}
	if x.extendBy > 0 && c.Extended == nil && b.Status == confirm.BatchPending {
		for _, cc := range c.Calls {
			if cc.Open() {
				c.ExtendRef, c.ExtendBy = cc.Ref, x.extendBy
				break
			}
		}
	}
	for i, step := range x.escalation {
		c.Escalations = append(c.Escalations, card.Escalation{
			At: b.CreatedAt.Add(step.After), Mention: step.Mention, Approvers: step.Approvers,
			Fired: slices.Contains(b.Escalated, i),
		})
	}
	return c
}

// stateOf turns a stored decision into the card's structured state.
func stateOf(c confirm.Call, requester string) card.State {
	st := card.State{By: c.DecidedBy, At: c.DecidedAt, Via: c.DecidedVia}
	switch c.Decision {
	case confirm.DecisionPending:
		st.Kind, st.By, st.At = card.Waiting, "", nil
	case confirm.DecisionAllowed:
		st.Kind = card.Allowed
	case confirm.DecisionAllowedByPolicy:
		st.Kind, st.By = card.AllowedByPolicy, ""
	case confirm.DecisionAllowedByGrant:
		st.Kind, st.By, st.GrantID = card.AllowedByGrant, "", c.GrantID
	case confirm.DecisionExpired:
		st.Kind, st.By = card.Expired, ""
	case confirm.DecisionInvalid:
		st.Kind, st.By, st.Message = card.Invalid, "", c.DenyMessage
	case confirm.DecisionDeniedByRule:
		st.Kind, st.By, st.Message = card.DeniedByRule, "", c.DenyMessage
		st.Rule = strings.TrimPrefix(c.DecidedBy, "rule:")
	default: // denied
		switch {
		case c.DecidedBy == SystemActor && c.DenyMessage == confirm.MovedOnMessage:
			st.Kind, st.By = card.MovedOn, ""
		case c.DecidedBy == SystemActor:
			st.Kind, st.By, st.Message = card.NotRun, "", c.DenyMessage
		case c.DecidedBy == requester:
			st.Kind, st.Reason = card.Withdrawn, c.DenyReason
		default:
			st.Kind, st.Reason = card.Denied, c.DenyReason
		}
	}
	return st
}

// scrubCard removes secrets from everything on a card the model, a tool or
// a person wrote: the intro, each call's read-back, arguments (as shown:
// the arguments that run stay exact), changes, messages and result.
func scrubCard(c card.Card, scrub func(string) string) card.Card {
	c.Intro = scrub(c.Intro)
	for i := range c.Calls {
		cc := &c.Calls[i]
		cc.Summary, cc.Args, cc.Result = scrub(cc.Summary), scrub(cc.Args), scrub(cc.Result)
		cc.State.Message, cc.State.Reason = scrub(cc.State.Message), scrub(cc.State.Reason)
		if cc.Preview != nil {
			p := *cc.Preview
			p.Output = scrub(p.Output)
			cc.Preview = &p
		}
		if cc.Edited != nil {
			e := *cc.Edited
			e.Changes = slices.Clone(e.Changes)
			for k := range e.Changes {
				e.Changes[k].Before, e.Changes[k].After = scrub(e.Changes[k].Before), scrub(e.Changes[k].After)
			}
			cc.Edited = &e
		}
	}
	return c
}

func prettyJSON(raw json.RawMessage) string {
	var buf bytes.Buffer
	if err := json.Indent(&buf, raw, "", "  "); err != nil {
		return string(raw)
	}
	return buf.String()
}

// quote renders untrusted text (a read-back) inside one of the bot's own
// thread lines as an inline code span on one line, so neither Slack nor
// Discord formats it, links it or turns it into a mention; its own
// backticks, which would end the span, become a look-alike (ˋ). Platforms
// still escape the line as a whole.
func quote(s string) string {
	s = card.OneLine(s)
	return "`" + strings.ReplaceAll(s, "`", "ˋ") + "`"
}
