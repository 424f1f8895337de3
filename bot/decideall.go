package bot

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"go.opentelemetry.io/otel/trace"

	"github.com/airlockhq/airlock/confirm"
)

// Left is a waiting call an Allow all or Deny all did not decide, and why.
type Left struct {
	Number int // 1-based, as the card numbers it
	Tool   string
	Why    string // in a person's words: "only the approvers a rule names may decide it"
}

// AllResult is what an Allow all or Deny all did.
type AllResult struct {
	Allow   bool
	Decided int    // calls it decided
	Left    []Left // waiting calls it left, in card order
}

// Message is what the clicker is told, privately.
func (r AllResult) Message() string {
	verb := "Denied"
	if r.Allow {
		verb = "Allowed"
	}
	s := fmt.Sprintf("%s %d call%s.", verb, r.Decided, plural(r.Decided))
	if r.Decided == 0 {
		s = "Nothing was decided."
	}
	if len(r.Left) == 0 {
		return s
	}
	parts := make([]string, len(r.Left))
	for i, l := range r.Left {
		parts[i] = fmt.Sprintf("%d. %s (%s)", l.Number, l.Tool, l.Why)
	}
	return s + " Left waiting: " + strings.Join(parts, "; ") + "."
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

// DecideAll is a card's Allow all or Deny all (c.Ref made by
// confirm.AllRef, c.Allow which): one transaction decides every waiting
// call of the card that the clicker may decide alone. An allow leaves
// waiting the calls a rule restricts to others, the requester's own (unless
// self-approval is on), critical calls (they need their own Allow) and
// calls needing more than one approval (each takes its own votes); a deny
// decides every call the clicker may deny (an approver's, or the
// requester's withdrawal). The result names what was left, and why. A
// card edited since it was shown changes nothing (ErrStaleRevision).
func (b *Bot) DecideAll(ctx context.Context, c Click) (AllResult, error) {
	out := AllResult{Allow: c.Allow}
	if !b.enter() {
		return out, ErrShuttingDown
	}
	defer b.leave()
	batchID, revisions, err := confirm.ParseAllRef(c.Ref)
	if err != nil {
		b.rejectClick(ctx, c, 0, "", "", "malformed all reference")
		return out, err
	}
	batch, err := b.store.Batch(ctx, batchID)
	if err != nil {
		b.rejectClick(ctx, c, 0, batchID, "", "unknown batch")
		return out, fmt.Errorf("load batch: %w", err)
	}
	conv, err := b.conversation(ctx, batch.ConversationID)
	if err != nil {
		return out, fmt.Errorf("load conversation: %w", err)
	}
	if !b.onCard(ctx, conv, batch, c) {
		b.rejectClick(ctx, c, conv.ID, batchID, "", "all button not on this batch's card")
		return out, ErrWrongChannel
	}
	if batch.Revisions() != revisions {
		b.rejectClick(ctx, c, conv.ID, batchID, "", "stale revision (all)")
		b.refreshCard(ctx, conv, batchID)
		return out, ErrStaleRevision
	}
	surface := b.clickSurface(ctx, conv, batch, c)
	var (
		ds    []confirm.Decide
		calls []confirm.Call
	)
	for _, call := range batch.Calls {
		if call.Decision != confirm.DecisionPending {
			continue
		}
		left := func(why string) {
			out.Left = append(out.Left, Left{Number: call.Position + 1, Tool: call.Tool, Why: why})
		}
		refusal := b.clickRefusal(ctx, conv, batch, call, c)
		switch {
		case errors.Is(refusal, ErrNotApprover) && len(call.Restrict) > 0:
			left("a rule lets only others decide it")
			continue
		case errors.Is(refusal, ErrNotApprover):
			left("you can't decide it")
			continue
		case errors.Is(refusal, ErrSelfApproval):
			left("you asked for it")
			continue
		case errors.Is(refusal, ErrStepUp):
			left("it needs a fresh sign-in: allow it on its page")
			continue
		case refusal != nil: // any other refusal: never counted
			left("you can't decide it")
			continue
		case c.Allow && call.Preview.State == confirm.PreviewRunning:
			left("its preview is still running")
			continue
		case c.Allow && call.Risk == confirm.RiskCritical:
			left("critical: use its own Allow")
			continue
		case c.Allow && max(call.Approvals, 1) > 1:
			left(fmt.Sprintf("needs %d approvals: use its own Allow", call.Approvals))
			continue
		}
		d := confirm.Decide{BatchID: batchID, Key: call.Key, Status: confirm.DecisionDenied, By: c.User, Revision: call.Revision, Surface: surface,
			Need: b.cfg.StepUp.Needs(call.Risk)}
		if c.Allow {
			d.Status = confirm.DecisionAllowed
		} else {
			d.Reason = capReason(c.Reason)
		}
		ds, calls = append(ds, d), append(calls, call)
	}
	if len(ds) == 0 {
		b.rejectClick(ctx, c, conv.ID, batchID, "", "nothing the clicker may decide (all)")
		if len(out.Left) == 0 {
			return out, ErrAlreadyClosed
		}
		return out, nil
	}
	res, err := b.store.DecideAll(ctx, ds)
	if err != nil {
		return out, fmt.Errorf("decide all: %w", err)
	}
	var waited []trace.Link
	for i, r := range res.Calls {
		if !r.Won {
			continue
		}
		out.Decided++
		if l, ok := b.counted(ctx, batch, calls[i], ds[i], r); ok {
			waited = append(waited, l)
		}
	}
	if out.Decided == 0 {
		return out, ErrAlreadyClosed
	}
	if !res.BatchDecided {
		b.refreshCard(ctx, conv, batchID)
		return out, nil
	}
	b.batchDecided(ctx, conv, batchID, confirm.DecideResult{BatchDecided: true, Batch: res.Batch}, waited)
	return out, nil
}
