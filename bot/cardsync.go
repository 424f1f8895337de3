package bot

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/airlockhq/airlock/card"
	"github.com/airlockhq/airlock/confirm"
)

// JobCardSync names the card-sync job: it renders every card message
// behind its batch's state (see syncCards).
const JobCardSync = "card-sync"

// ErrMessageGone is a platform's answer that the message to update no
// longer exists (Slack message_not_found or channel_not_found, Discord
// Unknown Message): the card-sync job marks it gone and never retries it.
// Platforms wrap it; classify with errors.Is.
var ErrMessageGone = errors.New("the message no longer exists on the platform")

// RateLimitedError is a platform's rate limit: nothing is sent to
// Scope before RetryAfter has passed (Slack: the Retry-After of a 429, for
// the whole workspace's method; Discord: the route's retry_after, Scope
// its channel). Platforms return it wrapped; classify with errors.As.
type RateLimitedError struct {
	Platform   string
	Method     string // the platform's method or route ("chat.update", "PATCH message")
	Scope      string // "" the whole platform, else the channel the limit is of
	RetryAfter time.Duration
	Err        error // the client library's error
}

func (e *RateLimitedError) Error() string {
	return fmt.Sprintf("%s %s rate limited, retry after %s: %v", e.Platform, e.Method, e.RetryAfter, e.Err)
}

func (e *RateLimitedError) Unwrap() error { return e.Err }

// CardSyncMetrics record the card-sync job:
// messages behind, the time from a change to its rendering, and a
// platform's rate limits.
type CardSyncMetrics interface {
	CardsBehind(n int)
	CardSynced(d time.Duration)
	PlatformRateLimited(platform, method string)
}

// The card-sync job's bounds. A claim outlives its requests: a chunk of
// cardSyncChunk messages is sent by cardSyncWorkers at once, each request
// bounded by cardRequestTimeout, so a claim ends long before it lapses and
// a replica that takes over a lapsed one never races a live request.
const (
	cardClaimTTL       = time.Minute
	cardRequestTimeout = 15 * time.Second
	cardSyncChunk      = 8
	cardSyncWorkers    = 4
	cardSyncTimeout    = 10 * time.Minute
	cardBackoffBase    = time.Second
	cardBackoffMax     = 5 * time.Minute
	cardSyncPasses     = 4 // inline passes of one batch before the job takes over
)

// cardBackoff is the wait after a message's failures-th failure in a row
// (5xx, network): doubling from a second, at most five minutes.
func cardBackoff(failures int) time.Duration {
	d := cardBackoffBase
	for i := 1; i < failures && d < cardBackoffMax; i++ {
		d *= 2
	}
	return min(d, cardBackoffMax)
}

// cardSync is the process's side of the card-sync job: its wake-up and
// the platforms' rate limits it learnt.
type cardSync struct {
	seq  atomic.Int64 // names each pass's claims
	wake chan struct{}
	mu   sync.Mutex
	hold map[string]time.Time // platform "\x00" scope → nothing sent before
	// unrecorded are subjects (batches, runs, grants) whose change could
	// not be recorded (the database away): the job records it once it can.
	unrecorded map[confirm.Subject]bool
	// unstored are main cards posted whose message could not be stored
	// (the database away): stored once it answers, never posted again
	// by this process.
	unstored map[string]confirm.CardMessage
}

// keep remembers a posted main card whose message could not be stored.
func (s *cardSync) keep(m confirm.CardMessage) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.unstored) < maxCached {
		s.unstored[m.BatchID] = m
	}
}

// kept returns the main cards posted and not yet stored.
func (s *cardSync) kept() []confirm.CardMessage {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]confirm.CardMessage, 0, len(s.unstored))
	for _, m := range s.unstored {
		out = append(out, m)
	}
	return out
}

func (s *cardSync) keptOf(batchID string) (confirm.CardMessage, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	m, ok := s.unstored[batchID]
	return m, ok
}

func (s *cardSync) stored(batchID string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.unstored, batchID)
}

func (s *cardSync) unrecord(batchID string, failed bool) {
	s.unrecordSubject(confirm.Subject{Kind: confirm.SubjectBatch, ID: batchID}, failed)
}

func (s *cardSync) unrecordSubject(subject confirm.Subject, failed bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if failed {
		if len(s.unrecorded) < maxCached {
			s.unrecorded[subject] = true
		}
		return
	}
	delete(s.unrecorded, subject)
}

func (s *cardSync) unrecordedSubjects() []confirm.Subject {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]confirm.Subject, 0, len(s.unrecorded))
	for subject := range s.unrecorded {
		out = append(out, subject)
	}
	return out
}

func newCardSync() *cardSync {
	return &cardSync{wake: make(chan struct{}, 1), hold: map[string]time.Time{}, unrecorded: map[confirm.Subject]bool{}, unstored: map[string]confirm.CardMessage{}}
}

// nudge wakes the job; a wake-up already pending covers this one.
func (s *cardSync) nudge() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// held returns until when a message of platform in channel must wait
// (the platform's limit, or the channel's), false when it need not.
func (s *cardSync) held(platform, channel string, now time.Time) (time.Time, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	until := s.hold[platform+"\x00"]
	if t := s.hold[platform+"\x00"+channel]; t.After(until) {
		until = t
	}
	return until, until.After(now)
}

func (s *cardSync) limit(rl *RateLimitedError, now time.Time) time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	key := rl.Platform + "\x00" + rl.Scope
	until := now.Add(rl.RetryAfter)
	if until.After(s.hold[key]) {
		s.hold[key] = until
	}
	return s.hold[key]
}

// refreshCard re-renders a batch's card and every copy of it (and the
// thread's pointer) from storage, and returns the batch as loaded (nil
// when it could not be).
func (b *Bot) refreshCard(ctx context.Context, conv confirm.Conversation, batchID string) *confirm.Batch {
	ctx = context.WithoutCancel(ctx)
	// The change is recorded (and its messages claimed) before the batch
	// is loaded, so the state rendered is never older than the version
	// recorded as rendered; the one load serves the render and the caller.
	// One statement for the change and its claims, and one load, because
	// the SQLite decisions/s floor needs them (BENCHMARKS.md, fourteenth
	// round: 806 with a claim per message and two loads).
	cc := b.cardClaim()
	claimed, listed, cerr := b.store.ChangeAndClaimCards(ctx, batchID, cc.Holder, cc.TTL, cc.Limit)
	batch, err := b.store.Batch(ctx, batchID)
	if err != nil {
		b.log.Error("reload batch for card", "batch", batchID, "err", err)
		for _, c := range claimed {
			b.cardRetry(ctx, c, 0, false) // let the job have them
		}
		b.cs.nudge()
		return nil
	}
	if batch.CardRef == "" {
		return batch // no card was posted: the batch never paused
	}
	if conv.ID != batch.ConversationID {
		if conv, err = b.conversation(ctx, batch.ConversationID); err != nil {
			b.log.Error("load conversation for card", "batch", batchID, "err", err)
			return batch
		}
	}
	b.synced(ctx, conv, batch, claimed, listed, cerr, batch)
	b.homesChanged(ctx, conv, batch)
	return batch
}

// refreshCardOf is the entry into card sync, called after every change of
// a batch its card shows (the change is stored by then): it records the
// change (the batch's messages are then behind), renders them at once
// where the platform lets it, and leaves the rest to the card-sync job.
// Whatever happens to the messages, the change stands: a card update
// never undoes a decision. Every message is rendered from storage at send
// time, so it shows the latest state, never an older one after a newer.
func (b *Bot) refreshCardOf(ctx context.Context, conv confirm.Conversation, batch *confirm.Batch) {
	if batch.CardRef == "" {
		return // no card was posted: the batch never paused
	}
	ctx = context.WithoutCancel(ctx)
	// The change and the claims of its messages are one write; the
	// messages are then rendered at once, where the platform lets them,
	// from the batch loaded after it.
	cc := b.cardClaim()
	claimed, listed, err := b.store.ChangeAndClaimCards(ctx, batch.ID, cc.Holder, cc.TTL, cc.Limit)
	b.synced(ctx, conv, batch, claimed, listed, err, nil)
	b.homesChanged(ctx, conv, batch)
}

// synced renders the messages a change claimed (with loaded, the batch
// as loaded after the change; nil: loaded again), then the batch's
// other messages behind, and leaves what it could not to the job.
func (b *Bot) synced(ctx context.Context, conv confirm.Conversation, batch *confirm.Batch, claimed []confirm.CardSync, listed bool, err error, loaded *confirm.Batch) {
	if err != nil {
		b.log.Error("record a change of the card; the card-sync job records it later", "batch", batch.ID, "err", err)
		b.cs.unrecord(batch.ID, true)
		return
	}
	if !listed {
		// A card recorded only as the batch's card_ref (a store that
		// lost its list): listed now, behind, so it is synced as the
		// others.
		b.rememberMsg(ctx, confirm.CardMessage{BatchID: batch.ID, Kind: confirm.CardMain, Platform: conv.Platform,
			Channel: conv.Channel, Thread: conv.Thread, Ref: batch.CardRef})
	} else if len(claimed) > 0 && b.renderClaimed(ctx, claimed, loaded, conv) < len(claimed) {
		b.cs.nudge() // waiting or failing: the job goes on
		return
	}
	// The first pass was the change's own chunk; the rest as the job would.
	for range cardSyncPasses - 1 {
		ids, err := b.store.BehindCards(ctx, "", batch.ID, cardSyncChunk)
		if err != nil {
			b.log.Error("list card messages behind", "batch", batch.ID, "err", err)
			break
		}
		if len(ids) == 0 {
			return
		}
		if b.syncCards(ctx, ids) == 0 {
			break // claimed elsewhere, waiting or failing: the job goes on
		}
	}
	b.cs.nudge()
}

// cardSyncJob records the changes this process could not (the database
// away), then renders the messages behind, oldest change first, of the
// platforms this process serves, until none is left that may be sent now.
func (b *Bot) cardSyncJob(ctx context.Context) error {
	if !b.enter() {
		return nil
	}
	defer b.leave()
	defer b.reportBehind(ctx)
	for _, m := range b.cs.kept() {
		if err := b.storeKept(ctx, m); err != nil {
			return fmt.Errorf("card sync: store a posted card: %w", err)
		}
	}
	for _, subject := range b.cs.unrecordedSubjects() {
		if subject.Kind == confirm.SubjectBatch {
			if err := b.store.ChangeCard(ctx, subject.ID); err != nil {
				return fmt.Errorf("card sync: record a change: %w", err)
			}
			b.cs.unrecordSubject(subject, false)
			continue
		}
		claimed, _, err := b.store.ChangeAndClaim(ctx, subject, b.cardClaim())
		if err != nil {
			return fmt.Errorf("card sync: record a change: %w", err)
		}
		b.cs.unrecordSubject(subject, false)
		b.renderClaimed(ctx, claimed, nil, confirm.Conversation{})
	}
	for _, name := range b.platformNames() {
		for ctx.Err() == nil {
			if _, held := b.cs.held(name, "", b.now()); held {
				break
			}
			ids, err := b.store.BehindCards(ctx, name, "", cardSyncChunk)
			if err != nil {
				return fmt.Errorf("card sync: %w", err)
			}
			if len(ids) == 0 || b.syncCards(ctx, ids) == 0 {
				break
			}
		}
	}
	return nil
}

func (b *Bot) reportBehind(ctx context.Context) {
	m := b.cfg.Metrics
	if n, err := b.store.CardsBehind(context.WithoutCancel(ctx)); err == nil {
		m.CardsBehind(n)
	}
}

func (b *Bot) platformNames() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	names := make([]string, 0, len(b.platforms))
	for n := range b.platforms {
		names = append(names, n)
	}
	return names
}

// syncCards claims the messages (each by one replica: the claim's
// affected row decides), loads each batch once after its messages'
// claims (so the state is at least the version each claim read), and
// renders them, at most one request per message, a few messages at a
// time. It returns how many were rendered.
func (b *Bot) syncCards(ctx context.Context, ids []int64) int {
	holder := b.cardHolder()
	var claimed []confirm.CardSync
	for _, id := range ids {
		c, ok, err := b.store.ClaimCard(ctx, id, holder, cardClaimTTL)
		if err != nil {
			b.log.Error("claim a card message", "id", id, "err", err)
			continue
		}
		if ok {
			claimed = append(claimed, c)
		}
	}
	return b.renderClaimed(ctx, claimed, nil, confirm.Conversation{})
}

// cardHolder names a pass's claims: each pass claims under a name of its
// own, so two passes of one process (two clicks' changes) never both hold
// a message.
func (b *Bot) cardHolder() string { return fmt.Sprintf("%s#%d", b.cfg.WorkerID, b.cs.seq.Add(1)) }

// cardClaim is a change's claim of its own chunk of messages, for a
// store write that records the change with its claims.
func (b *Bot) cardClaim() confirm.CardClaim {
	return confirm.CardClaim{Holder: b.cardHolder(), TTL: cardClaimTTL, Limit: cardSyncChunk}
}

// renderClaimed renders the claimed messages from storage (a message of
// a platform or channel under a rate limit waits for it) and returns how
// many were rendered. pre, when not nil, is a batch already loaded after
// its messages were claimed, in conversation conv.
func (b *Bot) renderClaimed(ctx context.Context, all []confirm.CardSync, pre *confirm.Batch, conv confirm.Conversation) int {
	var claimed []confirm.CardSync
	for _, c := range all {
		if until, held := b.cs.held(c.Message.Platform, c.Message.Channel, b.now()); held {
			b.cardRetry(ctx, c, until.Sub(b.now()), false)
			continue
		}
		claimed = append(claimed, c)
	}
	if len(claimed) == 0 {
		return 0
	}
	subjects := map[confirm.Subject]*subjectState{}
	if pre != nil {
		subjects[confirm.Subject{Kind: confirm.SubjectBatch, ID: pre.ID}] = &subjectState{batch: pre, conv: conv}
	}
	for _, c := range claimed {
		if s := c.Message.Subject(); subjects[s] == nil {
			subjects[s] = b.loadSubject(ctx, s)
		}
	}
	var (
		mu       sync.Mutex
		rendered int
		wg       sync.WaitGroup
		work     = make(chan confirm.CardSync)
	)
	for range min(cardSyncWorkers, len(claimed)) {
		wg.Go(func() {
			for c := range work {
				l := subjects[c.Message.Subject()]
				if until, held := b.cs.held(c.Message.Platform, c.Message.Channel, b.now()); held {
					// A rate limit another message met meanwhile.
					b.cardRetry(ctx, c, until.Sub(b.now()), false)
					continue
				}
				err := l.err
				if err == nil {
					rctx, cancel := context.WithTimeout(ctx, cardRequestTimeout)
					err = b.renderSynced(rctx, l, c.Message)
					cancel()
				}
				if b.cardOutcome(ctx, c, err) {
					mu.Lock()
					rendered++
					mu.Unlock()
				}
			}
		})
	}
	for _, c := range claimed {
		work <- c
	}
	close(work)
	wg.Wait()
	return rendered
}

// cardOutcome records what a message's rendering came to; true when it
// was rendered.
func (b *Bot) cardOutcome(ctx context.Context, c confirm.CardSync, err error) bool {
	ctx = context.WithoutCancel(ctx)
	m := c.Message
	var rl *RateLimitedError
	switch {
	case err == nil:
		ok, err := b.store.CardRendered(ctx, c.ID, c.Holder, c.Version)
		if err != nil {
			b.log.Error("record a card message rendered", "batch", m.BatchID, "kind", m.Kind, "err", err)
		}
		if ok && !c.ChangedAt.IsZero() {
			b.cfg.Metrics.CardSynced(b.now().Sub(c.ChangedAt))
		}
		return ok
	case errors.Is(err, ErrMessageGone):
		b.log.Warn("a card message is gone from the platform; it is no longer updated", "batch", m.BatchID, "kind", m.Kind, "channel", m.Channel, "err", err)
		if err := b.store.CardGone(ctx, c.ID, c.Holder); err != nil {
			b.log.Error("mark a card message gone", "batch", m.BatchID, "err", err)
		}
	case errors.As(err, &rl):
		until := b.cs.limit(rl, b.now())
		b.log.Warn("platform rate limit; the card catches up after it", "platform", rl.Platform, "method", rl.Method, "retry_after", rl.RetryAfter, "batch", m.BatchID)
		b.cfg.Metrics.PlatformRateLimited(rl.Platform, rl.Method)
		b.cardRetry(ctx, c, until.Sub(b.now()), false)
	default:
		wait := cardBackoff(c.Failures + 1)
		b.log.Error("update card; retrying later", "batch", m.BatchID, "kind", m.Kind, "failures", c.Failures+1, "retry_in", wait, "err", err)
		b.cardRetry(ctx, c, wait, true)
	}
	return false
}

func (b *Bot) cardRetry(ctx context.Context, c confirm.CardSync, after time.Duration, failed bool) {
	if err := b.store.CardRetry(context.WithoutCancel(ctx), c.ID, c.Holder, max(after, 0), failed); err != nil {
		b.log.Error("keep a card message queued", "batch", c.Message.BatchID, "err", err)
	}
}

// subjectState is a synced message's subject as loaded after its claim:
// a batch, a run (with its runbook and steps) or a grant, and its
// conversation.
type subjectState struct {
	batch *confirm.Batch
	run   *runView
	grant *confirm.Grant
	home  confirm.HomeKey
	conv  confirm.Conversation
	err   error
}

// loadSubject loads a subject from storage, after its messages' claims.
func (b *Bot) loadSubject(ctx context.Context, s confirm.Subject) *subjectState {
	l := &subjectState{}
	var convID int64
	switch s.Kind {
	case confirm.SubjectRun:
		if l.run, l.err = b.loadRun(ctx, s.ID); l.err == nil {
			convID = l.run.run.ConversationID
		}
	case confirm.SubjectGrant:
		if l.grant, l.err = b.store.Grant(ctx, s.ID); l.err == nil {
			convID = l.grant.ConversationID
		}
	case confirm.SubjectHome:
		var ok bool
		if l.home, ok = confirm.ParseHomeID(s.ID); !ok {
			l.err = fmt.Errorf("a home's id %q", s.ID)
		}
		return l // a home is no conversation's
	default:
		if l.batch, l.err = b.store.Batch(ctx, s.ID); l.err == nil {
			convID = l.batch.ConversationID
		}
	}
	if l.err == nil {
		l.conv, l.err = b.conversation(ctx, convID)
	}
	return l
}

// renderSynced sends one synced message's rendering of its subject: a
// card message, a run's message or a grant's notice.
func (b *Bot) renderSynced(ctx context.Context, l *subjectState, m confirm.CardMessage) error {
	where := Thread{Platform: m.Platform, Channel: m.Channel, Thread: m.Thread}
	switch m.Kind {
	case confirm.CardRun:
		p, err := b.platform(m.Platform)
		if err != nil {
			return err
		}
		rm, ok := p.(RunMessenger)
		if !ok {
			return nil
		}
		return rm.UpdateRun(ctx, where, m.Ref, b.runCard(ctx, l.run))
	case confirm.CardGrant:
		p, err := b.platform(m.Platform)
		if err != nil {
			return err
		}
		gn, ok := p.(GrantNoticer)
		if !ok {
			return nil
		}
		return gn.UpdateGrantNotice(ctx, where, m.Ref, grantNotice(*l.grant))
	case confirm.CardHome:
		return b.renderHome(ctx, l.home)
	}
	return b.renderMessage(ctx, l.conv, l.batch, m)
}

// syncSubject records a change of a run or a grant that its message
// shows, and renders the message at once where the platform lets it (the
// card-sync job does the rest). It reports whether the subject has a
// message listed.
func (b *Bot) syncSubject(ctx context.Context, s confirm.Subject) bool {
	ctx = context.WithoutCancel(ctx)
	claimed, listed, err := b.store.ChangeAndClaim(ctx, s, b.cardClaim())
	if err != nil {
		b.log.Error("record a change of a message; the card-sync job records it later", "subject", s.Kind, "id", s.ID, "err", err)
		b.cs.unrecordSubject(s, true)
		b.cs.nudge()
		return true
	}
	if len(claimed) > 0 {
		b.renderClaimed(ctx, claimed, nil, confirm.Conversation{})
	}
	if listed {
		// Whatever could not go now (a rate limit, a render in flight
		// elsewhere, a change during this one) goes with the job.
		b.cs.nudge()
	}
	return listed
}

// renderMessage sends one card message's rendering of the batch: the
// card, as the main card or a copy, or the thread's pointer.
func (b *Bot) renderMessage(ctx context.Context, conv confirm.Conversation, batch *confirm.Batch, m confirm.CardMessage) error {
	p, err := b.platform(m.Platform)
	if err != nil {
		return err
	}
	c := b.cardOf(conv, batch, b.introOf(ctx, batch))
	th := threadOf(conv)
	where := Thread{Platform: m.Platform, Channel: m.Channel, Thread: m.Thread}
	r, canRoute := p.(Router)
	if m.Kind == confirm.CardPointer {
		if !canRoute {
			return nil
		}
		msgs, err := b.cardMessages(ctx, batch.ID)
		if err != nil {
			return err
		}
		main := mainCard(msgs)
		if main == nil {
			return nil
		}
		cardLink := b.link(ctx, r, Thread{Platform: main.Platform, Channel: main.Channel, Thread: main.Thread}, main.Ref)
		return r.UpdatePointer(ctx, where, m.Ref, pointerOf(batch, c.Calls, main.Channel, cardLink))
	}
	if where != th && canRoute {
		c.Copy, c.ThreadLink = card.CopyApprovals, b.link(ctx, r, th, "")
		if m.Kind == confirm.CardDM {
			c.Copy = card.CopyDM
		}
	}
	return p.UpdateCard(ctx, where, m.Ref, c)
}

// storeKept stores a main card this process posted while the database
// was away, so that its buttons count and it is not posted again; its
// copies, if it gets any, are then left pending for recovery to post.
func (b *Bot) storeKept(ctx context.Context, m confirm.CardMessage) error {
	batch, err := b.store.Batch(ctx, m.BatchID)
	if err != nil {
		return err
	}
	conv, err := b.conversation(ctx, batch.ConversationID)
	if err != nil {
		return err
	}
	setRef := b.store.SetCardRef
	if p, err := b.platform(conv.Platform); err == nil && b.copiesPlanned(conv, p) {
		setRef = b.store.SetCardRefWithCopies
	}
	if err := setRef(ctx, m.BatchID, m.Ref); err != nil {
		return err
	}
	if err := b.store.AddCardMessage(ctx, m); err != nil {
		return err
	}
	b.cs.stored(m.BatchID)
	b.log.Info("stored a card posted while the database was away", "batch", m.BatchID)
	if batch, err := b.store.Batch(ctx, m.BatchID); err == nil {
		b.refreshCardOf(ctx, conv, batch) // it may have changed since it was posted
	}
	return nil
}
