package bot

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/airlockhq/airlock/card"
	"github.com/airlockhq/airlock/confirm"
	"github.com/airlockhq/airlock/internal/ids"
	"github.com/airlockhq/airlock/runbook"
)

// Click is one person's decision on one call, as a platform delivers it.
type Click struct {
	Platform string
	Channel  string // where the click happened
	// Message is the platform's reference of the message the button was
	// on, in the form PostCard returns (Slack "<channel>/<ts>"; Discord
	// one message id of the card). A click counts only on a card message
	// Airlock posted for the button's batch (its main card or a DM copy).
	Message string
	User    string // platform user id of the clicker
	Ref     string // the opaque reference the button carried
	Allow   bool
	Grant   bool     // "Allow for <duration>": allow, and grant later calls of the tool in this thread
	Reason  string   // a deny reason, optional
	Roles   []string // the clicker's roles where the platform has them (Discord)
	IsBot   bool     // clicks by bots are refused
	// Phrase is the confirmation phrase the clicker typed in the prompt
	// an Allow of a critical call opens (see PhraseFor); "" otherwise.
	Phrase string
	// assurance is how the person proved who they are (step-up); the
	// zero value is a chat click's. Only the bot sets it.
	assurance  confirm.Assurance
	credential string // the passkey's id of a passkey vote
	// edit: the click is an Edit…'s submission, its editor's Allow.
	edit bool
	// page: the decision was made on the web console's approval page
	// (DecideOnPage), by a person it signed in: on no message. Only the
	// bot sets it.
	page bool
	// Replayed: the click is worked again from the inbox, the process
	// that acknowledged it having died. Already counted, it changes
	// nothing and is no error; otherwise it counts, or is refused, as
	// any click.
	Replayed bool
}

// MaxReasonLen caps a deny reason, in runes.
const MaxReasonLen = 500

// Errors a click can meet. Each has a safe message for the clicker
// (UserMessage); logs get the detail.
var (
	ErrNotApprover    = errors.New("you can't approve tool calls in this channel")
	ErrAlreadyClosed  = errors.New("this call was already decided, expired or superseded; nothing changed")
	ErrWrongChannel   = errors.New("this button does not belong to this channel")
	ErrSelfApproval   = errors.New("you asked for this call, so you can't allow it")
	ErrAlreadyVoted   = errors.New("you already approved this call")
	ErrNotGrantable   = errors.New("this call can't be allowed with a grant")
	ErrGrantNotActive = errors.New("this grant was already revoked or has expired")
	// ErrEscalationGrant: an escalation step let the clicker decide this
	// card, and that card only: they may not grant later calls.
	ErrEscalationGrant = errors.New("an escalation step let you decide this card only; you can't grant later calls")
	// ErrStaleRevision: the click, form or view showed arguments that an
	// edit has replaced since; nothing changed and the card was updated.
	ErrStaleRevision = errors.New("the arguments changed since you looked")
)

// VoteError is ErrAlreadyVoted with how many more approvals the call needs.
type VoteError struct{ Remaining int }

func (e *VoteError) Error() string {
	return fmt.Sprintf("%v; it needs %d more", ErrAlreadyVoted, e.Remaining)
}
func (e *VoteError) Unwrap() error { return ErrAlreadyVoted }

// refusals are the clicks refused by the rules (someone else's button, a
// second approval by the same person, the requester allowing their own
// call, a closed call, …), each with what the clicker is told: nothing
// changed and nothing failed.
var refusals = []struct {
	err error
	msg string
}{
	{ErrSelfApproval, "You asked for this call, so you can't allow it yourself (confirmation.self_approval is off). Another approver must decide; you can still deny it."},
	{ErrNotGrantable, "This call can't be allowed with a grant (it needs more than one approval, or a rule rules it out). Use Allow."},
	{ErrStaleRevision, "The arguments changed since you looked — see the updated card."},
	{ErrEscalationGrant, "An escalation step let you decide this card, and this card only: a grant would also allow later calls, so it is not yours to give. Use Allow."},
	{ErrGrantNotActive, "This grant was already revoked or has expired."},
	{ErrAlreadyExtended, "This card was already extended once."},
	{ErrNotEditable, "This call's arguments can't be edited (its tool is no longer available here)."},
	{ErrAlreadyChecked, "This run was already marked checked (or its outcome is known)."},
	{ErrNotAllowedToStop, "Only the person who started this run or an approver can stop it, and only an approver can mark a step done or retry it."},
	{runbook.ErrRunEnded, "This run has already ended, or is no longer halted."},
	{ErrNotRunButton, unknownButton},
	{ErrNotApprover, "You can't approve tool calls in this channel."},
	{ErrPhraseRequired, "This call is critical: allowing it needs its confirmation phrase typed. Use the card's Allow… button, which asks for it."},
	{ErrWrongPhrase, "The phrase you typed doesn't match the one asked for."},
	{ErrAlreadyClosed, "This call was already decided, has expired, or was superseded."},
	{ErrStepUp, "This call needs a stronger proof of who is allowing it, on the web console."},
	{ErrQuestionClosed, "This question was already answered, declined or cancelled."},
	{ErrNotOnQuestion, unknownButton},
	{confirm.ErrBadAnswer, "Your answer doesn't fit the form."},
	{confirm.ErrBadRef, unknownButton},
	{ErrWrongChannel, unknownButton},
	{confirm.ErrNotFound, unknownButton},
}

const unknownButton = "This button is not one I know."

// IsRefusal reports whether err is a click refused by the rules (see
// refusals). Platforms log refusals as information, other errors as errors.
func IsRefusal(err error) bool {
	if errors.Is(err, ErrAlreadyVoted) {
		return true
	}
	for _, r := range refusals {
		if errors.Is(err, r.err) {
			return true
		}
	}
	return false
}

// UserMessage is what the clicker is told when a click changes nothing.
func UserMessage(err error) string {
	var ve *VoteError
	var ee *EditError
	var ae *confirm.AnswerError
	var su *StepUpError
	switch {
	case err == nil:
		return ""
	case errors.As(err, &ve):
		more := "one more approval"
		if ve.Remaining != 1 {
			more = fmt.Sprintf("%d more approvals", ve.Remaining)
		}
		return "You already approved this call; it needs " + more + " from someone else. Nothing changed."
	case errors.As(err, &ee):
		return "Edit refused: " + ee.Message + ". Nothing changed."
	case errors.As(err, &ae):
		return "Answer refused: " + ae.Message + ". Nothing changed."
	case errors.As(err, &su):
		how := "a fresh sign-in (within 5 minutes)"
		if su.Needs == confirm.AssurancePasskey {
			how = "your passkey"
		}
		return "This call needs " + how + " to allow: allow it on its page, " + su.URL + " . Nothing changed."
	case errors.Is(err, ErrShuttingDown):
		return "Airlock is restarting; nothing changed. Click again in a minute."
	case errors.Is(err, confirm.ErrUnavailable):
		return "I couldn't record your decision — please click again. (My database can't be reached right now; nothing changed.)"
	}
	for _, r := range refusals {
		if errors.Is(err, r.err) {
			return r.msg + " Nothing changed."
		}
	}
	return "Something went wrong; nothing was run. The operators have the details in the logs."
}

// Decide records one click. It checks the reference, the channel and the
// clicker (an approver of the channel, or of every set a rule restricted
// the call to; the requester may withdraw but, unless self-approval is on,
// not allow), takes the single-use transition (or counts one approval of a
// call that needs several), updates the card, and when the batch is fully
// decided runs it and continues the conversation. A click that changes
// nothing returns an error for UserMessage and is audited.
func (b *Bot) Decide(ctx context.Context, c Click) error {
	t, leave, err := b.enterClick(ctx, c, b.resolveClick)
	if err != nil {
		return err
	}
	defer leave()
	if c.Replayed && counted(t.call, c, b.cfg.StepUp.Needs(t.call.Risk)) {
		b.log.Info("inbox: a click worked again was counted before; nothing changed", "batch", t.batch.ID, "call", t.call.Key, "user", c.User)
		return nil
	}
	if err := b.checkRevision(ctx, c, t); err != nil {
		return err
	}
	batch, call, conv, batchID := t.batch, t.call, t.conv, t.batch.ID
	if c.Allow && call.Decision == confirm.DecisionPending && call.Preview.State == confirm.PreviewRunning {
		b.rejectClick(ctx, c, conv.ID, batchID, call.Key, "preview running")
		return ErrPreviewRunning
	}
	if err := b.clickRefusal(ctx, conv, batch, call, c); err != nil {
		why := "not an approver"
		switch {
		case errors.Is(err, ErrSelfApproval):
			why = "self-approval"
		case errors.Is(err, ErrStepUp):
			why = "step-up needed"
		}
		b.rejectClick(ctx, c, conv.ID, batchID, call.Key, why)
		return err
	}
	d := confirm.Decide{BatchID: batchID, Key: call.Key, Status: confirm.DecisionDenied, By: c.User, Revision: t.revision,
		Surface: b.clickSurface(ctx, conv, batch, c), Assurance: c.assurance, Credential: c.credential, Need: b.cfg.StepUp.Needs(call.Risk)}
	if c.Allow {
		d.Status = confirm.DecisionAllowed
		if c.Grant {
			if b.cfg.GrantFor <= 0 || !call.Grantable || call.Approvals > 1 {
				b.rejectClick(ctx, c, conv.ID, batchID, call.Key, "not grantable")
				return ErrNotGrantable
			}
			if !b.mayGrant(ctx, conv, call, c.User, c.Roles) {
				b.rejectClick(ctx, c, conv.ID, batchID, call.Key, "grant by an escalation-only decider")
				return ErrEscalationGrant
			}
			now := b.now().UTC()
			d.Grant = &confirm.Grant{ID: ids.New(), Tool: call.Tool, CreatedBy: c.User, CreatorRoles: c.Roles,
				Requester: batch.RequestedBy, ExpiresAt: now.Add(b.cfg.GrantFor), ToolDef: b.toolDefinition(call.Tool)}
		}
		if err := b.checkPhrase(ctx, c, t); err != nil {
			return err
		}
	} else {
		d.Reason = capReason(c.Reason)
	}
	res, err := b.store.Decide(ctx, d)
	if err != nil {
		return fmt.Errorf("decide: %w", err)
	}
	if res.Stale {
		return b.staleClick(ctx, c, t)
	}
	if res.AlreadyVoted {
		b.rejectClick(ctx, c, conv.ID, batchID, call.Key, "already approved")
		return &VoteError{Remaining: max(res.Required-res.Votes, 1)}
	}
	if !res.Won {
		b.rejectClick(ctx, c, conv.ID, batchID, call.Key, "call no longer pending")
		return ErrAlreadyClosed
	}
	b.decided(ctx, conv, batch, call, d, res)
	return nil
}

// clickRefusal is why c may not decide call (ErrNotApprover,
// ErrSelfApproval), or nil: the clicker must be one who may decide it,
// or, denying, its requester (a withdrawal can only stop things); the
// requester may not allow it unless self-approval is on.
func (b *Bot) clickRefusal(ctx context.Context, conv confirm.Conversation, batch *confirm.Batch, call confirm.Call, c Click) error {
	approver := !c.IsBot && b.mayDecide(ctx, conv, batch, call, c.User, c.Roles)
	requester := !c.IsBot && c.User != "" && c.User == batch.RequestedBy
	switch {
	case !approver && !(requester && !c.Allow):
		return ErrNotApprover
	case c.Allow && requester && !b.cfg.SelfApproval:
		return ErrSelfApproval
	}
	return b.stepUpRefusal(batch, call, c)
}

// ErrStepUp: an allow of a call whose tier needs more than a chat click
// (confirmation.step_up) was not made with it. A *StepUpError says where
// it can be.
var ErrStepUp = errors.New("this call needs a stronger proof of who is allowing it")

// StepUpError is an allow that needs Needs, to be made on the call's page
// at URL.
type StepUpError struct {
	Needs confirm.Assurance
	URL   string
}

func (e *StepUpError) Error() string        { return fmt.Sprintf("%v (%s, on %s)", ErrStepUp, e.Needs, e.URL) }
func (e *StepUpError) Is(target error) bool { return target == ErrStepUp }

// stepUpRefusal is why an allow of call by c does not count: its tier
// needs a step-up c was not made with; nil for a deny or when it was.
func (b *Bot) stepUpRefusal(batch *confirm.Batch, call confirm.Call, c Click) error {
	if !c.Allow && !c.edit || b.cfg.StepUp.Satisfied(call.Risk, c.assurance) {
		return nil
	}
	return &StepUpError{Needs: b.cfg.StepUp.Needs(call.Risk), URL: b.consoleURL(batch.ID)}
}

// consoleURL is the web console's page of a batch ("" without a console).
func (b *Bot) consoleURL(batchID string) string {
	if b.cfg.ConsoleURL == "" {
		return ""
	}
	return strings.TrimSuffix(b.cfg.ConsoleURL, "/") + "/ui/approvals/" + batchID
}

// decided finishes a counted decision: metrics and the wait's span, the
// card and its copies updated, a grant's notice, and, when the batch is
// fully decided, its run and the conversation's continuation.
func (b *Bot) decided(ctx context.Context, conv confirm.Conversation, batch *confirm.Batch, call confirm.Call, d confirm.Decide, res confirm.DecideResult) {
	var waited []trace.Link
	if l, ok := b.counted(ctx, batch, call, d, res); ok {
		waited = append(waited, l)
	}
	if !res.BatchDecided {
		b.refreshCard(ctx, conv, batch.ID)
	}
	if res.Decided && d.Grant != nil {
		b.postGrantNotice(ctx, conv, d.Grant)
	}
	b.batchDecided(ctx, conv, batch.ID, res, waited)
}

// counted logs a counted decision and, when it decided its call, records
// its metrics and the wait's span (the link returned).
func (b *Bot) counted(ctx context.Context, batch *confirm.Batch, call confirm.Call, d confirm.Decide, res confirm.DecideResult) (trace.Link, bool) {
	b.log.Info("call decided", "batch", batch.ID, "call", call.Key, "tool", call.Tool, "decision", d.Status, "by", d.By,
		"votes", res.Votes, "required", res.Required, "decided", res.Decided)
	if !res.Decided {
		return trace.Link{}, false
	}
	outcome := "denied"
	if d.Status == confirm.DecisionAllowed {
		outcome = "allowed"
	}
	now := b.now()
	b.cfg.Metrics.Decision(outcome, now.Sub(batch.CreatedAt))
	b.cfg.Metrics.CallDecided(call.Tool, outcome, d.Surface, now.Sub(batch.CreatedAt))
	return b.recordWait(ctx, batch, call, outcome, d.By, res.Votes, res.Required, now), true
}

// batchDecided runs a batch its decisions decided (res.BatchDecided) and
// continues the conversation; see decided.
func (b *Bot) batchDecided(ctx context.Context, conv confirm.Conversation, batchID string, res confirm.DecideResult, waited []trace.Link) {
	if res.BatchDecided {
		b.trace("decided")
		// The batch runs now. Its card is updated once, after the run,
		// unless running takes longer than Config.RunningCardDelay: then it
		// shows the decision and "running" first.
		lc := b.cardLater(ctx, conv, batchID)
		// The click counted; what follows is the bot's work, not the
		// clicker's problem: failures are logged and told in the thread.
		rctx, span := b.startResume(withLateCard(ctx, lc), resumeClick, conv, batchID, waited...)
		// The batch as deciding it left it, unless its card's reference
		// was stored after that (a click racing the card's post): then
		// it is loaded, so the card is updated.
		decided := res.Batch
		if decided != nil && decided.CardRef == "" {
			decided = nil
		}
		err := b.resume(rctx, conv, batchID, decided)
		endSpan(span, err)
		if err != nil {
			b.log.Error("run decided batch", "batch", batchID, "err", err)
		}
		if !lc.finish() {
			b.refreshCard(ctx, conv, batchID) // another worker ran it, or it failed
		}
	}
}

// DefaultRunningCardDelay is how long a decided batch may run before its
// card is updated to show the decision and "running" (Config.RunningCardDelay);
// a faster run updates the card once, with its outcome.
const DefaultRunningCardDelay = 300 * time.Millisecond

// lateCard is a card update deferred while its batch runs.
type lateCard struct {
	mu      sync.Mutex
	timer   *time.Timer
	stopped bool // no timed update any more
	final   bool // the card was updated after the run
}

type lateCardKey struct{}

func withLateCard(ctx context.Context, lc *lateCard) context.Context {
	return context.WithValue(ctx, lateCardKey{}, lc)
}

func lateCardFrom(ctx context.Context) *lateCard {
	lc, _ := ctx.Value(lateCardKey{}).(*lateCard)
	return lc
}

// cardLater updates the batch's card after Config.RunningCardDelay unless the run
// finished first.
func (b *Bot) cardLater(ctx context.Context, conv confirm.Conversation, batchID string) *lateCard {
	lc := &lateCard{}
	lc.timer = time.AfterFunc(b.cfg.RunningCardDelay, func() {
		lc.mu.Lock()
		defer lc.mu.Unlock()
		if !lc.stopped {
			b.refreshCard(context.WithoutCancel(ctx), conv, batchID)
		}
	})
	return lc
}

// stop cancels the timed update, waiting for one in progress, so an update
// that follows is the newest.
func (lc *lateCard) stop() {
	if lc == nil {
		return
	}
	lc.timer.Stop()
	lc.mu.Lock()
	lc.stopped = true
	lc.mu.Unlock()
}

// ran records that the card was updated after the run.
func (lc *lateCard) ran() {
	if lc != nil {
		lc.mu.Lock()
		lc.final = true
		lc.mu.Unlock()
	}
}

// finish stops the timed update and reports whether the card was updated
// after the run.
func (lc *lateCard) finish() bool {
	lc.stop()
	lc.mu.Lock()
	defer lc.mu.Unlock()
	return lc.final
}

// clicked is what a click names, checked: its batch, call and
// conversation, and the revision of the call's arguments the button, form
// or view showed.
type clicked struct {
	batch    *confirm.Batch
	call     confirm.Call
	conv     confirm.Conversation
	revision int
}

// checkRevision refuses a click made on arguments an edit has replaced
// since (see staleClick). A call no longer pending is left to the checks
// that say so.
func (b *Bot) checkRevision(ctx context.Context, c Click, t clicked) error {
	if t.revision == t.call.Revision || t.call.Decision != confirm.DecisionPending {
		return nil
	}
	return b.staleClick(ctx, c, t)
}

// staleClick answers a click, form or view whose revision of the call's
// arguments is not the call's any more: it changes nothing, is audited,
// and the card is rendered again, so every copy shows the current
// arguments and buttons.
func (b *Bot) staleClick(ctx context.Context, c Click, t clicked) error {
	b.rejectClick(ctx, c, t.conv.ID, t.batch.ID, t.call.Key, "stale revision")
	b.refreshCard(ctx, t.conv, t.batch.ID)
	if t.call.Preview.State != confirm.PreviewNone && len(t.call.EditedArgs) == 0 {
		return ErrStalePreview // no edit: the revision the click missed is the preview's
	}
	return ErrStaleRevision
}

// resolveClick loads what a click's reference names and checks that the
// click came from one of that batch's card messages. A click that fails is
// audited and the error is one for UserMessage.
func (b *Bot) resolveClick(ctx context.Context, c Click) (clicked, error) {
	ref, err := confirm.ParseCallRef(c.Ref)
	if err != nil {
		b.rejectClick(ctx, c, 0, "", "", "malformed reference")
		return clicked{}, err
	}
	batchID, pos := ref.Batch, ref.Position
	batch, err := b.store.Batch(ctx, batchID)
	if err != nil {
		b.rejectClick(ctx, c, 0, batchID, "", "unknown batch")
		return clicked{}, fmt.Errorf("load batch: %w", err)
	}
	if pos >= len(batch.Calls) {
		b.rejectClick(ctx, c, batch.ConversationID, batchID, "", "unknown call position")
		return clicked{}, confirm.ErrBadRef
	}
	call := batch.Calls[pos]
	conv, err := b.conversation(ctx, batch.ConversationID)
	if err != nil {
		return clicked{}, fmt.Errorf("load conversation: %w", err)
	}
	if !c.page && !b.onCard(ctx, conv, batch, c) {
		b.rejectClick(ctx, c, conv.ID, batchID, call.Key, "button not on this batch's card")
		return clicked{}, ErrWrongChannel
	}
	return clicked{batch: batch, call: call, conv: conv, revision: ref.Revision}, nil
}

// mayDecide reports whether the user may decide the call: when rules
// restricted it, only people in every restriction; otherwise the channel's
// approvers, and from each escalation step that fired, its approvers.
func (b *Bot) mayDecide(ctx context.Context, conv confirm.Conversation, batch *confirm.Batch, call confirm.Call, user string, roles []string) bool {
	if len(call.Restrict) == 0 {
		if b.cfg.Channels.CanApprove(ctx, conv.Platform, conv.Channel, conv.DM, user, roles) {
			return true
		}
		for _, step := range batch.Escalated {
			if step >= 0 && step < len(b.cfg.Escalation) && b.cfg.Channels.Admits(ctx, conv.Platform, user, roles, b.cfg.Escalation[step].Approvers) {
				return true
			}
		}
		return false
	}
	for _, set := range call.Restrict {
		if !b.cfg.Channels.Admits(ctx, conv.Platform, user, roles, set) {
			return false
		}
	}
	return true
}

// postGrantNotice announces a new grant in its thread, with Revoke. The
// notice is then kept in sync with the grant by card sync (its Revoke).
func (b *Bot) postGrantNotice(ctx context.Context, conv confirm.Conversation, g *confirm.Grant) {
	p, err := b.platform(conv.Platform)
	if err != nil {
		return
	}
	gn, ok := p.(GrantNoticer)
	if !ok {
		if err := p.Post(ctx, threadOf(conv), grantNotice(*g).Text()); err != nil {
			b.log.Error("post grant notice", "grant", g.ID, "err", err)
		}
		return
	}
	// The version is read before the state the notice shows: a revoke
	// landing meanwhile leaves it behind, for the card-sync job.
	s := confirm.Subject{Kind: confirm.SubjectGrant, ID: g.ID}
	version, err := b.store.SubjectVersion(ctx, s)
	if err != nil {
		b.log.Error("grant notice version", "grant", g.ID, "err", err)
		return
	}
	if stored, err := b.store.Grant(ctx, g.ID); err == nil {
		g = stored
	}
	th := threadOf(conv)
	ref, err := gn.PostGrantNotice(ctx, th, grantNotice(*g))
	if err != nil {
		b.log.Error("post grant notice", "grant", g.ID, "err", err)
		return
	}
	if err := b.store.SetGrantNoticeRef(ctx, g.ID, ref); err != nil {
		b.log.Error("store grant notice ref", "grant", g.ID, "err", err)
	}
	if b.rememberMsg(ctx, confirm.CardMessage{GrantID: g.ID, Kind: confirm.CardGrant, Platform: th.Platform, Channel: th.Channel, Thread: th.Thread, Ref: ref, Version: version}) {
		b.cs.nudge()
	}
}

func grantNotice(g confirm.Grant) card.GrantNotice {
	return card.GrantNotice{Ref: confirm.GrantRef(g.ID), GrantID: g.ID, Tool: g.Tool, By: g.CreatedBy, For: g.Requester, Until: g.ExpiresAt, RevokedBy: g.RevokedBy, RevokedAt: g.RevokedAt}
}

// Revoke revokes the grant a Revoke button names. Only an approver of the
// grant's channel may; the notice is updated.
func (b *Bot) Revoke(ctx context.Context, c Click) error {
	if !b.enter() {
		return ErrShuttingDown
	}
	defer b.leave()
	id, err := confirm.ParseGrantRef(c.Ref)
	if err != nil {
		b.rejectClick(ctx, c, 0, "", "", "malformed grant reference")
		return err
	}
	g, err := b.store.Grant(ctx, id)
	if err != nil {
		b.rejectClick(ctx, c, 0, "", "", "unknown grant")
		return fmt.Errorf("load grant: %w", err)
	}
	conv, err := b.conversation(ctx, g.ConversationID)
	if err != nil {
		return fmt.Errorf("load conversation: %w", err)
	}
	if conv.Platform != c.Platform || conv.Channel != c.Channel {
		b.rejectClick(ctx, c, conv.ID, g.BatchID, g.CallKey, "grant button from another channel")
		return ErrWrongChannel
	}
	if c.IsBot || !b.cfg.Channels.CanApprove(ctx, conv.Platform, conv.Channel, conv.DM, c.User, c.Roles) {
		b.rejectClick(ctx, c, conv.ID, g.BatchID, g.CallKey, "not an approver (revoke)")
		return ErrNotApprover
	}
	ok, err := b.store.RevokeGrant(ctx, id, c.User)
	if err != nil {
		return fmt.Errorf("revoke grant: %w", err)
	}
	if !ok {
		return ErrGrantNotActive
	}
	b.log.Info("grant revoked", "grant", id, "by", c.User)
	b.refreshGrantNotice(ctx, conv, id)
	return nil
}

// refreshGrantNotice records a change of the grant and renders its
// notice (card sync).
func (b *Bot) refreshGrantNotice(ctx context.Context, conv confirm.Conversation, id string) {
	if b.syncSubject(ctx, confirm.Subject{Kind: confirm.SubjectGrant, ID: id}) {
		return
	}
	// A notice posted but not listed (by an older release): listed now,
	// behind, for the card-sync job.
	if g, err := b.store.Grant(context.WithoutCancel(ctx), id); err == nil && g.NoticeRef != "" {
		th := threadOf(conv)
		b.rememberMsg(context.WithoutCancel(ctx), confirm.CardMessage{GrantID: id, Kind: confirm.CardGrant, Platform: th.Platform, Channel: th.Channel, Thread: th.Thread, Ref: g.NoticeRef})
		b.cs.nudge()
	}
}

func (b *Bot) trace(point string) {
	if b.cfg.Trace != nil {
		b.cfg.Trace(point)
	}
}

// capReason trims a deny reason and caps it at MaxReasonLen runes.
func capReason(reason string) string {
	reason = strings.TrimSpace(reason)
	if r := []rune(reason); len(r) > MaxReasonLen {
		reason = string(r[:MaxReasonLen]) + "…"
	}
	return reason
}

// denyMessage is what the model is told for a person's deny: the default
// message, and the person's reason when given, quoted as theirs.
func denyMessage(user, reason string) string {
	if reason == "" {
		return confirm.DefaultDenyMessage
	}
	return fmt.Sprintf("%s Reason given by the approver (%s): %q", confirm.DefaultDenyMessage, user, reason)
}

func (b *Bot) rejectClick(ctx context.Context, c Click, convID int64, batchID, key, why string) {
	detail, _ := json.Marshal(map[string]any{"why": why, "allow": c.Allow, "platform": c.Platform, "channel": c.Channel, "ref": card.Excerpt(c.Ref, 100)})
	// Coalesced: one audit row (and webhook event) per person, batch and
	// reason a minute, across replicas; the repeats are counted.
	written, err := b.store.AuditRejectedClick(ctx, confirm.AuditEvent{
		Kind: confirm.AuditRejectedClick, ConversationID: convID,
		BatchID: batchID, CallKey: key, Actor: c.User, Detail: string(detail),
	}, why)
	if err != nil {
		b.log.Error("audit rejected click", "err", err)
	}
	log := b.log.Warn
	if err == nil && !written {
		log = b.log.Debug // a repeat within the minute: counted, not audited
	}
	log("click rejected", "why", why, "user", c.User, "channel", c.Channel, "batch", batchID)
}

// PendingCard returns the card of the thread's pending pause, or
// confirm.ErrNotFound when nothing waits.
func (b *Bot) PendingCard(ctx context.Context, th Thread) (*card.Card, error) {
	conv, err := b.store.FindConversation(ctx, th.Platform, th.Channel, th.Thread)
	if err != nil {
		return nil, err // ErrNotFound: a thread without a conversation waits on nothing
	}
	batch, err := b.store.PendingBatch(ctx, conv.ID)
	if err != nil {
		return nil, err
	}
	c := b.cardOf(conv, batch, b.introOf(ctx, batch))
	return &c, nil
}

// PendingCards returns the cards of every pending batch of the thread,
// oldest first: the model's pause and the cards of its runs' steps;
// confirm.ErrNotFound when none waits.
func (b *Bot) PendingCards(ctx context.Context, th Thread) ([]card.Card, error) {
	conv, err := b.store.FindConversation(ctx, th.Platform, th.Channel, th.Thread)
	if err != nil {
		return nil, err // ErrNotFound: a thread without a conversation waits on nothing
	}
	pending, err := b.pendingBatches(ctx, conv.ID)
	if err != nil {
		return nil, err
	}
	var out []card.Card
	for _, batch := range pending {
		out = append(out, b.cardOf(conv, batch, b.introOf(ctx, batch)))
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("pending cards: %w", confirm.ErrNotFound)
	}
	return out, nil
}
