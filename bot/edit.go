package bot

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/airlockhq/airlock/card"
	"github.com/airlockhq/airlock/confirm"
	"github.com/airlockhq/airlock/redact"
	"github.com/airlockhq/airlock/tools"
)

// EditForm is what an Edit… form shows for one waiting call.
type EditForm struct {
	Ref     string // the call's reference (for the submission)
	Number  int    // 1-based position on the card
	Tool    string
	Args    string // the call's current arguments, pretty-printed JSON (untrusted text)
	Summary string // the current read-back (untrusted text)
	// Holds: the call is critical, so submitting stores the edit without
	// allowing it; Allow… then asks for the edited arguments' phrase.
	Holds bool
	// Needs is the step-up an allow of the call needs that the editor
	// (on the web console's page) is not signed in with: submitting
	// stores the edit, and the call waits for an allow made with it.
	Needs confirm.Assurance
}

// EditError is an edit refused for what it says (not JSON, not valid for
// the tool, refused by a rule). Message is safe to show the editor in the
// form; nothing changed.
type EditError struct{ Message string }

func (e *EditError) Error() string { return "edit refused: " + e.Message }

// EditedPrefix begins the tool result of a call an approver edited, so
// the model knows what actually ran.
const EditedPrefix = "An approver changed the arguments before running: "

// MaxEditBytes caps edited arguments.
const MaxEditBytes = 64 << 10

// EditForm returns the form to edit a waiting call: c.Ref names the call,
// c.Message the card it was clicked on. The clicker must be allowed to
// allow the call, as for Decide.
func (b *Bot) EditForm(ctx context.Context, c Click) (EditForm, error) {
	t, leave, err := b.enterClick(ctx, c, b.editTarget)
	if err != nil {
		return EditForm{}, err
	}
	defer leave()
	// Shown with secrets as [redacted] (Edit refuses to run that marker
	// in a secret's place); the call's arguments stay exact.
	f := EditForm{Ref: c.Ref, Number: t.call.Position + 1, Tool: t.call.Tool,
		Args: b.cfg.Redact(prettyJSON(t.call.RunArgs())), Summary: b.cfg.Redact(t.call.Summary),
		Holds: t.call.Risk == confirm.RiskCritical}
	if need := b.cfg.StepUp.Needs(t.call.Risk); !c.assurance.Counts(need) {
		f.Needs = need // only on the page: in chat such an edit is refused
	}
	return f, nil
}

// editTarget resolves and checks a click that edits a call: on one of its
// batch's cards, by someone who may allow it, while it waits.
func (b *Bot) editTarget(ctx context.Context, c Click) (clicked, error) {
	c.edit = true
	t, err := b.resolveClick(ctx, c)
	if err != nil {
		return clicked{}, err
	}
	if err := b.checkRevision(ctx, c, t); err != nil {
		return clicked{}, err
	}
	if c.IsBot || !b.mayDecide(ctx, t.conv, t.batch, t.call, c.User, c.Roles) {
		b.rejectClick(ctx, c, t.conv.ID, t.batch.ID, t.call.Key, "not an approver (edit)")
		return clicked{}, ErrNotApprover
	}
	if c.User == t.batch.RequestedBy && !b.cfg.SelfApproval {
		b.rejectClick(ctx, c, t.conv.ID, t.batch.ID, t.call.Key, "self-approval (edit)")
		return clicked{}, ErrSelfApproval
	}
	// An edit is its editor's Allow: in chat one that needs a step-up is
	// refused with the page's link; on the page it is stored and, without
	// the step-up, the call waits for an allow made with it (Edit).
	if err := b.stepUpRefusal(t.batch, t.call, c); err != nil && !c.page {
		b.rejectClick(ctx, c, t.conv.ID, t.batch.ID, t.call.Key, "step-up needed (edit)")
		return clicked{}, err
	}
	if t.call.Decision != confirm.DecisionPending || b.now().After(t.call.ExpiresAt) {
		b.rejectClick(ctx, c, t.conv.ID, t.batch.ID, t.call.Key, "call no longer pending (edit)")
		return clicked{}, ErrAlreadyClosed
	}
	if _, ok := b.offered(t.conv, t.call.Tool); !ok {
		b.rejectClick(ctx, c, t.conv.ID, t.batch.ID, t.call.Key, "tool gone (edit)")
		return clicked{}, ErrNotEditable
	}
	if t.call.Preview.State != confirm.PreviewNone {
		// The preview shows the model's arguments: an edit would be
		// allowed without a preview of its own.
		b.rejectClick(ctx, c, t.conv.ID, t.batch.ID, t.call.Key, "call has a preview (edit)")
		return clicked{}, ErrPreviewNotEditable
	}
	return t, nil
}

// Edit applies an approver's arguments (JSON text) to a waiting call: they
// are parsed and validated for the tool (*EditError when they are not
// valid), judged by the policy again (*EditError when a rule refuses them
// or the editor may not decide the call with them), stored beside the
// model's, and the edit counts as the editor's Allow (earlier approvals of
// the call are void) — except on a critical call, which goes on waiting
// for an Allow with its confirmation phrase for the edited arguments. It
// returns once the edit is stored; the card updates, the run and the
// model's continuation follow in the background. Other errors are as Decide's (see UserMessage).
func (b *Bot) Edit(ctx context.Context, c Click, text string) error {
	t, leave, err := b.enterClick(ctx, c, b.editTarget)
	if err != nil {
		return err
	}
	defer leave()
	conv, batch, call := t.conv, t.batch, t.call
	refuse := func(why, msg string) error {
		b.rejectClick(ctx, c, conv.ID, batch.ID, call.Key, "edit refused: "+why)
		return &EditError{Message: msg}
	}
	if len(text) > MaxEditBytes {
		return refuse("too large", fmt.Sprintf("the arguments are longer than %d bytes", MaxEditBytes))
	}
	if _, err := tools.DecodeObject([]byte(text)); err != nil {
		return refuse("not a JSON object", "the arguments must be one JSON object: "+b.scrub(err.Error()))
	}
	if hidesSecret(b.cfg.Redact, prettyJSON(call.RunArgs()), text) {
		return refuse("redacted secret", "the form shows a secret of these arguments as "+redact.Marker+
			", and that marker would run in its place: type the value itself, or Deny and ask again")
	}
	var compact bytes.Buffer
	_ = json.Compact(&compact, []byte(text)) // valid: DecodeObject checked it
	args := json.RawMessage(compact.Bytes())
	tc := confirm.ToolCall{ID: call.CallID, Name: call.Tool, Args: args}
	judged := b.judgedCall(ctx, call, tc)
	if err := b.validateCall(ctx, conv, batch.RequestedBy, judged); err != nil {
		return refuse("invalid", b.scrub(err.Error()))
	}
	tool, _ := b.offered(conv, call.Tool)
	info := toolInfo(call.Tool, tool)
	policy, err := b.policyIn(ctx, conv)
	if err != nil {
		return err
	}
	now := b.now().UTC()
	v := policy.Evaluate(confirm.Request{
		Call: judged, Tool: &info, Platform: conv.Platform, Channel: conv.Channel, Requester: batch.RequestedBy, Client: b.clientName(conv), Now: now,
	})
	if v.Deny {
		msg := "refused by rule " + v.DenyRule
		if v.DenyMessage != "" {
			msg += ": " + v.DenyMessage
		}
		return refuse("rule "+v.DenyRule, msg)
	}
	// An edit never lowers what the call needs: the most of what it
	// needed before (its stored quorum, tier and restrictions, a runbook
	// step's gates among them), what its step adds, and the policy's
	// verdict on the new arguments. The store holds the same floor.
	e := confirm.EditCall{BatchID: batch.ID, Key: call.Key, Args: args, Summary: b.summary(tc), By: c.User,
		Restrict: unionRestrict(call.Restrict, v.Restrict), Reasons: unionReasons(call.Reasons, v.Reasons), Revision: t.revision}
	approvals, grantable := b.approvalsOf(v)
	stepApprovals := 0
	if stepBatch(batch) {
		sc, ok, err := b.stepConfigOf(ctx, batch.ID)
		if err != nil {
			return fmt.Errorf("the step of the edited call: %w", err)
		}
		if ok {
			stepApprovals = sc.Approvals
		}
	}
	e.Approvals = max(approvals, call.Approvals, stepApprovals, 1)
	e.Risk = v.Risk.Or(confirm.RiskMedium).Max(call.Risk)
	e.Grantable = grantable && call.Grantable && e.Approvals == 1 && !e.Risk.NoGrant()
	// A critical call's Allow needs its phrase typed, for the edited
	// arguments: the edit is stored and the call waits for it.
	e.Hold = e.Risk == confirm.RiskCritical
	// The editor's vote counts only with the assurance the edited call's
	// tier needs (step_up): an edit made with less is stored, and the call
	// waits for an allow that has it.
	e.Assurance, e.Credential, e.Need = c.assurance, c.credential, b.cfg.StepUp.Needs(e.Risk)
	if !e.Assurance.Counts(e.Need) {
		e.Hold = true
	}
	for _, set := range e.Restrict {
		if !b.cfg.Channels.Admits(ctx, conv.Platform, c.User, c.Roles, set) {
			return refuse("editor not in a restriction", "with these arguments a rule lets only "+setText(set)+" decide this call, and you are not among them")
		}
	}
	res, err := b.store.EditCall(ctx, e)
	if err != nil {
		return fmt.Errorf("edit call: %w", err)
	}
	if res.Stale {
		return b.staleClick(ctx, c, t)
	}
	if !res.Won {
		b.rejectClick(ctx, c, conv.ID, batch.ID, call.Key, "call no longer pending (edit)")
		return ErrAlreadyClosed
	}
	b.log.Info("call edited", "batch", batch.ID, "call", call.Key, "tool", call.Tool, "by", c.User)
	if e.Hold {
		b.refreshCard(ctx, conv, batch.ID)
		return nil
	}
	d := confirm.Decide{BatchID: batch.ID, Key: call.Key, Status: confirm.DecisionAllowed, By: c.User, Surface: confirm.SurfaceEdit}
	// The edit is stored and counted: the editor's form can close now
	// (Slack waits for this answer). The cards, the run and the model's
	// continuation follow in the background; a shutdown waits for them,
	// and a batch cut off is run by recovery at the next start.
	if !b.enter() {
		return nil
	}
	go func() {
		defer b.leave()
		b.decided(context.WithoutCancel(ctx), conv, batch, call, d, res)
	}()
	return nil
}

// unionRestrict is every approver set of a and b (each set once): an
// edited call is decided only by those its earlier arguments and its new
// ones admit.
func unionRestrict(a, b []confirm.Approvers) []confirm.Approvers {
	out := slices.Clone(a)
	for _, x := range b {
		if !slices.ContainsFunc(out, func(y confirm.Approvers) bool { return sameApprovers(x, y) }) {
			out = append(out, x)
		}
	}
	return out
}

func sameApprovers(a, b confirm.Approvers) bool {
	return slices.Equal(a.Users, b.Users) && slices.Equal(a.Groups, b.Groups) && slices.Equal(a.Roles, b.Roles)
}

// unionReasons is every reason of a and b, each once, a's first.
func unionReasons(a, b []confirm.Reason) []confirm.Reason {
	out := slices.Clone(a)
	for _, r := range b {
		if !slices.Contains(out, r) {
			out = append(out, r)
		}
	}
	return out
}

// setText names the members of an approver set for an editor.
func setText(a confirm.Approvers) string {
	parts := a.Names()
	if len(parts) == 0 {
		return "nobody"
	}
	return fmt.Sprint(parts)
}

// validateCall checks a call as a pause does: the tool is offered in the
// conversation's channel, its arguments are valid (in the conversation's
// context where the tool checks it), and its read-back can be built.
func (b *Bot) validateCall(ctx context.Context, conv confirm.Conversation, requester string, c confirm.ToolCall) error {
	t, ok := b.offered(conv, c.Name)
	if !ok {
		return fmt.Errorf("unknown tool %q", c.Name)
	}
	// A tool that checks where it would act (Discord moderation: the
	// bot's role against the member's) gets the conversation.
	if tv, ok := t.(interface {
		ValidateContext(context.Context, json.RawMessage) error
	}); ok {
		info := confirm.RunInfo{Platform: conv.Platform, Channel: conv.Channel, Thread: conv.Thread, RequestedBy: requester}
		if err := tv.ValidateContext(confirm.WithRunInfo(ctx, info), c.Args); err != nil {
			return err
		}
	} else if err := t.Validate(c.Args); err != nil {
		return err
	}
	if _, err := t.Summary(c.Args); err != nil {
		return fmt.Errorf("the read-back a person would approve could not be built from these arguments: %w", err)
	}
	return nil
}

// changes lists the top-level keys whose values differ between the
// model's arguments and the edited ones, in key order, as compact JSON.
func changes(before, after json.RawMessage) []card.Change {
	var a, z map[string]json.RawMessage
	_ = json.Unmarshal(before, &a)
	_ = json.Unmarshal(after, &z)
	keys := slices.Collect(maps.Keys(a))
	for k := range z {
		if _, ok := a[k]; !ok {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	var out []card.Change
	for _, k := range keys {
		x, y := compactJSON(a[k]), compactJSON(z[k])
		if x != y {
			out = append(out, card.Change{Key: k, Before: x, After: y})
		}
	}
	return out
}

func compactJSON(raw json.RawMessage) string {
	if len(raw) == 0 {
		return ""
	}
	var buf bytes.Buffer
	if json.Compact(&buf, raw) != nil {
		return string(raw)
	}
	return buf.String()
}

// hidesSecret reports whether an edit's text holds the marker while the
// form showed the call's arguments (shown, before scrubbing) with a secret
// replaced by it: the marker would run in the secret's place.
func hidesSecret(scrub func(string) string, shown, text string) bool {
	return strings.Contains(text, redact.Marker) && scrub(shown) != shown
}
