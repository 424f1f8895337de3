package bot

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/airlockhq/airlock/card"
	"github.com/airlockhq/airlock/confirm"
	"github.com/airlockhq/airlock/web"
)

// The web console's view of the core (web.Console): a signed-in person,
// known on each platform by the ids web.people gives, sees the requests
// they may decide or asked for, each as its card shows it, and decides
// on the page with the single-use decision of a click (surface "web").
// Who may decide is the channel's, as for a click; on a platform whose
// approvers may be roles (Discord approver_roles), the person's roles are
// asked of the platform (RoleLookup), as no click carries them here.

var _ web.Console = (*Bot)(nil)

// RoleLookup gives a person's roles where channel is (Discord: in its
// server), for decisions made off the platform (the web console). A
// platform with roles must have it: without, its role approvers could
// never decide on the page.
type RoleLookup interface {
	MemberRoles(ctx context.Context, channel, user string) ([]string, error)
}

// pageRoles are the roles of the people of one page's view, by platform
// and channel, each asked once.
type pageRoles map[[2]string][]string

// rolesOf is user's roles where conv is, asked of the platform once per
// view (rs); none where the platform has no roles, or could not say
// (which can only take a permission away).
func (b *Bot) rolesOf(ctx context.Context, rs pageRoles, conv confirm.Conversation, user string) []string {
	key := [2]string{conv.Platform, conv.Channel}
	if roles, ok := rs[key]; ok {
		return roles
	}
	var roles []string
	if p, err := b.platform(conv.Platform); err == nil {
		if rl, ok := p.(RoleLookup); ok {
			if roles, err = rl.MemberRoles(ctx, conv.Channel, user); err != nil {
				b.log.Error("web: a person's roles; taken as none", "platform", conv.Platform, "channel", conv.Channel, "user", user, "err", err)
				roles = nil
			}
		}
	}
	rs[key] = roles
	return roles
}

// consoleLimit bounds the requests the inbox looks at, of each kind.
const consoleLimit = 200

// Inbox implements web.Console.
func (b *Bot) Inbox(ctx context.Context, p web.Who) ([]web.Entry, error) {
	items, err := b.inbox(ctx, p)
	if err != nil {
		return nil, err
	}
	out := make([]web.Entry, len(items))
	for i, it := range items {
		out[i] = it.Entry
	}
	return out, nil
}

// inboxed is an inbox entry with the batch and conversation it was made
// from, for views that link to its card (the Home tab).
type inboxed struct {
	web.Entry
	batch *confirm.Batch
	conv  confirm.Conversation
}

// inbox lists the requests waiting on p that p may decide, and p's own
// recent ones, newest first.
func (b *Bot) inbox(ctx context.Context, p web.Who) ([]inboxed, error) {
	var ids []string
	for _, id := range p.IDs {
		if id != "" {
			ids = append(ids, id)
		}
	}
	pending, asked, err := b.store.ConsoleBatches(ctx, ids, consoleLimit)
	if err != nil {
		return nil, err
	}
	var out []inboxed
	seen := map[string]bool{}
	rs := pageRoles{}
	for _, id := range slices.Concat(pending, asked) {
		if seen[id] {
			continue
		}
		seen[id] = true
		batch, err := b.store.Batch(ctx, id)
		if err != nil {
			return nil, fmt.Errorf("inbox: %w", err)
		}
		conv, err := b.conversation(ctx, batch.ConversationID)
		if err != nil {
			return nil, fmt.Errorf("inbox: %w", err)
		}
		v := b.visibility(ctx, rs, conv, batch, p)
		if !v.approver && !v.mine {
			continue
		}
		e := web.Entry{BatchID: batch.ID, Platform: conv.Platform, Channel: conv.Channel, Requester: batch.RequestedBy,
			CreatedAt: batch.CreatedAt, ExpiresAt: batch.ExpiresAt, Mine: v.mine, MayDecide: v.decide}
		for _, c := range batch.Calls {
			if c.Decision == confirm.DecisionPending {
				e.Waiting++
				e.Tools = append(e.Tools, c.Tool)
			}
		}
		if e.Waiting == 0 && !v.mine {
			continue // decided since: the inbox is what waits, and one's own
		}
		out = append(out, inboxed{Entry: e, batch: batch, conv: conv})
	}
	slices.SortStableFunc(out, func(a, b inboxed) int { return b.CreatedAt.Compare(a.CreatedAt) })
	return out, nil
}

// visible is what a person may see of a batch and do on its page.
type visible struct {
	approver bool // they may decide one of its calls (whatever its state)
	mine     bool // they asked for it
	decide   bool // a call waits that they may decide
}

func (b *Bot) visibility(ctx context.Context, rs pageRoles, conv confirm.Conversation, batch *confirm.Batch, p web.Who) visible {
	user := p.IDs[conv.Platform]
	if user == "" {
		return visible{}
	}
	v := visible{mine: batch.RequestedBy == user}
	roles := b.rolesOf(ctx, rs, conv, user)
	for _, c := range batch.Calls {
		if !c.Flagged || !b.mayDecide(ctx, conv, batch, c, user, roles) {
			continue
		}
		v.approver = true
		if c.Decision == confirm.DecisionPending {
			v.decide = true
		}
	}
	return v
}

// Approval implements web.Console.
func (b *Bot) Approval(ctx context.Context, batchID string, p web.Who) (web.Approval, error) {
	batch, err := b.store.Batch(ctx, batchID)
	if errors.Is(err, confirm.ErrNotFound) {
		return web.Approval{}, confirm.ErrNotFound
	} else if err != nil {
		return web.Approval{}, err
	}
	conv, err := b.conversation(ctx, batch.ConversationID)
	if err != nil {
		return web.Approval{}, err
	}
	v := b.visibility(ctx, pageRoles{}, conv, batch, p)
	if !v.approver && !v.mine {
		return web.Approval{}, confirm.ErrNotFound
	}
	a := web.Approval{Card: b.cardOf(conv, batch, ""), Platform: conv.Platform, MayDecide: v.decide}
	if a.History, err = b.history(ctx, batch); err != nil {
		return web.Approval{}, err
	}
	for _, c := range a.Card.Calls {
		if need := b.cfg.StepUp.Needs(c.Risk); need.Rank() > 0 && c.Flagged {
			if a.StepUp == nil {
				a.StepUp = map[string]confirm.Assurance{}
			}
			a.StepUp[c.Ref] = need
		}
	}
	return a, nil
}

// maxHistory bounds a request's history on its page (the newest are
// kept; the audit holds the rest).
const maxHistory = 200

// history is the request's audit rows as lines, oldest first; the words
// are card's, from the rows' typed details (nothing of a detail's text
// but Airlock's own reasons).
func (b *Bot) history(ctx context.Context, batch *confirm.Batch) ([]card.Line, error) {
	evs, err := b.store.AuditEvents(ctx, confirm.AuditFilter{ConversationID: batch.ConversationID, BatchID: batch.ID})
	if err != nil {
		return nil, fmt.Errorf("history: %w", err)
	}
	number, tool := map[string]int{}, map[string]string{}
	for _, c := range batch.Calls {
		number[c.Key], tool[c.Key] = c.Position+1, c.Tool
	}
	var out []card.Line
	for _, e := range evs {
		var d struct {
			Status    string `json:"status"`
			Abandoned bool   `json:"abandoned"`
			Assurance string `json:"assurance"`
			Votes     int    `json:"votes"`
			Required  int    `json:"required"`
			Why       string `json:"why"`
		}
		_ = json.Unmarshal([]byte(e.Detail), &d)
		he := card.HistoryEvent{At: e.At, Kind: e.Kind, Actor: e.Actor, Call: number[e.CallKey], Tool: cmp.Or(e.Tool, tool[e.CallKey]), Status: d.Status,
			Abandoned: d.Abandoned, Via: confirm.Assurance(d.Assurance), Votes: d.Votes, Required: d.Required}
		if e.Kind == confirm.AuditRejectedClick {
			he.Why = d.Why // Airlock's own words (rejectClick)
		}
		out = append(out, he.Line())
	}
	if len(out) > maxHistory {
		out = out[len(out)-maxHistory:]
	}
	return out, nil
}

// DecideOnPage implements web.Console: the person's decision on the page, as
// a click of theirs on the platform of the request's conversation.
func (b *Bot) DecideOnPage(ctx context.Context, p web.Who, d web.Decision) error {
	c, err := b.pageClick(ctx, p, d.Ref, d.Assurance)
	if err != nil {
		return err
	}
	c.Allow, c.Reason, c.Phrase, c.credential = d.Allow, d.Reason, d.Phrase, d.Credential
	return b.Decide(ctx, c)
}

// EditPage implements web.Console: the Edit… form of chat, whose words
// say what saving does for this person (held when their sign-in is short
// of the call's step-up).
func (b *Bot) EditPage(ctx context.Context, p web.Who, ref string, a confirm.Assurance) (web.EditPage, error) {
	c, err := b.pageClick(ctx, p, ref, a)
	if err != nil {
		return web.EditPage{}, err
	}
	f, err := b.EditForm(ctx, c)
	if err != nil {
		return web.EditPage{}, err
	}
	form := card.EditForm(f.Number, f.Tool, f.Summary, f.Args, f.Holds)
	if f.Needs != "" {
		form = card.EditFormStepUp(f.Number, f.Tool, f.Summary, f.Args, f.Needs)
	}
	return web.EditPage{Ref: ref, Form: form}, nil
}

// EditOnPage implements web.Console: the person's Edit… on the page, as
// theirs in chat (Edit), made with the page's assurance.
func (b *Bot) EditOnPage(ctx context.Context, p web.Who, e web.Edit) error {
	c, err := b.pageClick(ctx, p, e.Ref, e.Assurance)
	if err != nil {
		return err
	}
	return b.Edit(ctx, c, e.Args)
}

// pageClick is the person's click on the page, on the call of ref, made
// with assurance a: a click of theirs on the platform of the request's
// conversation.
func (b *Bot) pageClick(ctx context.Context, p web.Who, ref string, a confirm.Assurance) (Click, error) {
	r, err := confirm.ParseCallRef(ref)
	if err != nil {
		return Click{}, confirm.ErrBadRef
	}
	batch, err := b.store.Batch(ctx, r.Batch)
	if err != nil {
		return Click{}, confirm.ErrBadRef
	}
	conv, err := b.conversation(ctx, batch.ConversationID)
	if err != nil {
		return Click{}, err
	}
	user := p.IDs[conv.Platform]
	if user == "" {
		return Click{}, ErrNotApprover
	}
	return Click{Platform: conv.Platform, Channel: conv.Channel, User: user, Roles: b.rolesOf(ctx, pageRoles{}, conv, user), Ref: ref,
		page: true, assurance: a}, nil
}

// RunPage implements web.Console.
func (b *Bot) RunPage(ctx context.Context, runID string, p web.Who) (web.Run, error) {
	v, err := b.loadRun(ctx, runID)
	if errors.Is(err, confirm.ErrNotFound) {
		return web.Run{}, confirm.ErrNotFound
	} else if err != nil {
		return web.Run{}, err
	}
	conv, err := b.conversation(ctx, v.run.ConversationID)
	if err != nil {
		return web.Run{}, err
	}
	user := p.IDs[conv.Platform]
	if user == "" || (v.run.RequestedBy != user && !b.cfg.Channels.CanApprove(ctx, conv.Platform, conv.Channel, conv.DM, user, b.rolesOf(ctx, pageRoles{}, conv, user))) {
		return web.Run{}, confirm.ErrNotFound
	}
	out := web.Run{Run: b.runCard(ctx, v), Requests: map[string]string{}}
	for _, st := range v.steps {
		if st.BatchID != "" {
			out.Requests[st.StepID] = st.BatchID
		}
	}
	return out, nil
}
