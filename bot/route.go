package bot

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/airlockhq/airlock/card"
	"github.com/airlockhq/airlock/confirm"
)

// Router is implemented by platforms that can route cards: an approvals
// channel with a pointer in the thread, and copies in approvers' DMs.
type Router interface {
	// Link returns a URL to a message posted with ref (as PostCard or
	// PostPointer returned it), or to the thread itself when ref is "":
	// a Slack permalink, a Discord jump URL.
	Link(ctx context.Context, th Thread, ref string) (string, error)
	// OpenDM returns the (top-level) thread of a direct message with user.
	OpenDM(ctx context.Context, user string) (Thread, error)
	// PostPointer posts the thread's pointer to a card posted in an
	// approvals channel; UpdatePointer edits it to the outcome. Neither
	// has buttons or pings.
	PostPointer(ctx context.Context, th Thread, p card.Pointer) (ref string, err error)
	UpdatePointer(ctx context.Context, th Thread, ref string, p card.Pointer) error
}

// refHas reports whether a stored card reference names the message: equal,
// or one of its comma-separated messages (a card split over several).
func refHas(ref, message string) bool {
	if ref == "" || message == "" {
		return false
	}
	if ref == message {
		return true
	}
	return strings.Contains(ref, ",") && slices.Contains(strings.Split(ref, ","), message)
}

// cardState is the batch as its messages are about to show it, with the
// card version read first: a change after that read leaves the messages
// behind, for the card-sync job, rather than marked current.
func (b *Bot) cardState(ctx context.Context, batchID string) (int64, *confirm.Batch, error) {
	version, err := b.store.CardVersion(ctx, batchID)
	if err != nil {
		return 0, nil, fmt.Errorf("card version: %w", err)
	}
	stored, err := b.store.Batch(ctx, batchID)
	if err != nil {
		return 0, nil, fmt.Errorf("reload batch: %w", err)
	}
	return version, stored, nil
}

// postCard posts a paused batch's card where its channel's entry says: in
// the thread, or in the approvals channel with a pointer left in the
// thread; and, with notify dm, a copy in each approver's DMs. Every
// message is remembered: a click counts only on the card or a copy. Only
// the main card's failure fails the turn; copies and the pointer are
// logged.
func (b *Bot) postCard(ctx context.Context, conv confirm.Conversation, p Platform, batch *confirm.Batch, intro string) error {
	version, stored, err := b.cardState(ctx, batch.ID)
	if err != nil {
		return err
	}
	th := threadOf(conv)
	approvals, dmCopies := b.cfg.Channels.Route(conv.Platform, conv.Channel, conv.DM)
	r, canRoute := p.(Router)
	c := b.cardOf(conv, stored, intro)
	where := b.cardWhere(conv, p)
	if where != th {
		c.Copy, c.ThreadLink = card.CopyApprovals, b.link(ctx, r, th, "")
	}
	ref, err := p.PostCard(ctx, where, c)
	if err != nil {
		return fmt.Errorf("post card: %w", err)
	}
	b.trace("card_posted")
	// With copies to post, the card is recorded as having them pending
	// until they are: a process killed among them leaves recovery to post
	// (or adopt) the rest.
	copies := b.copiesPlanned(conv, p)
	setRef := b.store.SetCardRef
	if copies {
		setRef = b.store.SetCardRefWithCopies
	}
	if err := setRef(ctx, batch.ID, ref); err != nil {
		// The card is on the platform: keep it, to be stored once the
		// database answers, rather than post it again then.
		b.cs.keep(confirm.CardMessage{BatchID: batch.ID, Kind: confirm.CardMain, Platform: where.Platform,
			Channel: where.Channel, Thread: where.Thread, Ref: ref, Version: version})
		b.cs.nudge()
		return fmt.Errorf("store card ref: %w", err)
	}
	var posted []confirm.CardMessage
	defer func() { b.posted.put(batch.ID, posted) }()
	// Every message is listed, the card in its own thread too: each is
	// synced alike.
	b.remember(ctx, &posted, batch.ID, confirm.CardMain, where, ref, version)
	if where != th {
		ptr := pointerOf(stored, c.Calls, approvals, b.link(ctx, r, where, ref))
		if pref, err := r.PostPointer(ctx, th, ptr); err != nil {
			b.log.Error("post pointer to the approvals channel", "batch", batch.ID, "err", err)
		} else {
			b.remember(ctx, &posted, batch.ID, confirm.CardPointer, th, pref, version)
		}
	}
	if dmCopies && canRoute && !conv.DM {
		dc := c
		dc.Copy, dc.ThreadLink = card.CopyDM, b.link(ctx, r, th, "")
		for _, user := range b.cfg.Channels.People(ctx, conv.Platform, b.approversOf(conv), MaxDMCopies) {
			dm, err := r.OpenDM(ctx, user)
			if err != nil {
				b.log.Error("open a DM for a card copy", "batch", batch.ID, "user", user, "err", err)
				continue
			}
			dref, err := p.PostCard(ctx, dm, dc)
			if err != nil {
				b.log.Error("post a card copy in a DM", "batch", batch.ID, "user", user, "err", err)
				continue
			}
			b.trace("copy_posted")
			b.remember(ctx, &posted, batch.ID, confirm.CardDM, dm, dref, version)
		}
	}
	if copies {
		if err := b.store.CopiesPosted(ctx, batch.ID); err != nil {
			b.log.Error("record a card's copies posted; recovery looks for them", "batch", batch.ID, "err", err)
		}
	}
	b.homesChanged(ctx, conv, stored)
	return nil
}

// cardWhere is where a conversation's card is posted: its thread, or the
// approvals channel its channel's entry names (where the platform routes).
func (b *Bot) cardWhere(conv confirm.Conversation, p Platform) Thread {
	approvals, _ := b.cfg.Channels.Route(conv.Platform, conv.Channel, conv.DM)
	if _, canRoute := p.(Router); approvals != "" && canRoute && !conv.DM {
		return Thread{Platform: conv.Platform, Channel: approvals}
	}
	return threadOf(conv)
}

// copiesPlanned reports whether a conversation's card gets copies: a
// pointer in its thread (the card in an approvals channel) or approvers'
// DM copies.
func (b *Bot) copiesPlanned(conv confirm.Conversation, p Platform) bool {
	if _, canRoute := p.(Router); !canRoute || conv.DM {
		return false
	}
	approvals, dm := b.cfg.Channels.Route(conv.Platform, conv.Channel, conv.DM)
	return approvals != "" || dm
}

// remember stores a message posted for a batch and adds it to posted.
// version is the batch's card version read before the state it shows.
func (b *Bot) remember(ctx context.Context, posted *[]confirm.CardMessage, batchID, kind string, th Thread, ref string, version int64) {
	if ref == "" {
		return
	}
	m := confirm.CardMessage{BatchID: batchID, Kind: kind, Platform: th.Platform, Channel: th.Channel, Thread: th.Thread, Ref: ref, Version: version}
	if b.rememberMsg(ctx, m) {
		*posted = append(*posted, m)
	}
}

func (b *Bot) rememberMsg(ctx context.Context, m confirm.CardMessage) bool {
	if err := b.store.AddCardMessage(ctx, m); err != nil {
		b.log.Error("remember a card message", "batch", m.BatchID, "kind", m.Kind, "err", err)
		return false
	}
	return true
}

// cardMessages lists a batch's card messages: as this process posted them
// when it did (the list is complete once postCard returned), else from
// storage.
func (b *Bot) cardMessages(ctx context.Context, batchID string) ([]confirm.CardMessage, error) {
	if msgs, ok := b.posted.get(batchID); ok {
		return msgs, nil
	}
	return b.store.CardMessages(ctx, batchID)
}

// link returns a URL of a message or thread, cached (links do not change);
// "" when the platform can't say.
func (b *Bot) link(ctx context.Context, r Router, th Thread, ref string) string {
	key := th.Platform + "\x00" + th.Channel + "\x00" + th.Thread + "\x00" + ref
	if v, ok := b.links.get(key); ok {
		return v
	}
	u, err := r.Link(ctx, th, ref)
	if err != nil {
		b.log.Warn("link to a message", "channel", th.Channel, "err", err)
		return ""
	}
	b.links.put(key, u)
	return u
}

// maxCached bounds each cache: a few hundred bytes an entry.
const maxCached = 1024

// cache is a small bounded map of values that never change once known;
// when full it starts over.
type cache[K comparable, V any] struct {
	mu sync.Mutex
	m  map[K]V
}

func (c *cache[K, V]) get(k K) (V, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	v, ok := c.m[k]
	return v, ok
}

func (c *cache[K, V]) put(k K, v V) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil || len(c.m) >= maxCached {
		c.m = map[K]V{}
	}
	c.m[k] = v
}

type (
	linkCache   = cache[string, string]                // permalinks
	convCache   = cache[int64, confirm.Conversation]   // conversations by id
	postedCache = cache[string, []confirm.CardMessage] // card messages by batch
)

// pointerOf is the thread's pointer to a batch's card in an approvals
// channel; calls are the card's.
func pointerOf(batch *confirm.Batch, calls []card.Call, approvals, cardLink string) card.Pointer {
	return card.Pointer{BatchID: batch.ID, Channel: approvals, CardLink: cardLink, Status: batch.Status, Calls: calls}
}

func mainCard(msgs []confirm.CardMessage) *confirm.CardMessage {
	for i := range msgs {
		if msgs[i].Kind == confirm.CardMain {
			return &msgs[i]
		}
	}
	return nil
}

// onCard reports whether a click came from one of the batch's card
// messages (its main card or a DM copy) on the conversation's platform. A
// click right after a card was posted may come before its reference is
// stored: for a young batch the turn posting it is waited for once.
func (b *Bot) onCard(ctx context.Context, conv confirm.Conversation, batch *confirm.Batch, c Click) bool {
	if c.Platform != conv.Platform || c.Message == "" {
		return false
	}
	if refHas(batch.CardRef, c.Message) {
		return true
	}
	match := func() bool {
		msgs, err := b.cardMessages(ctx, batch.ID)
		if err != nil {
			b.log.Error("list card messages", "batch", batch.ID, "err", err)
			return false
		}
		for _, m := range msgs {
			if (m.Kind == confirm.CardMain || m.Kind == confirm.CardDM) && m.Platform == c.Platform && refHas(m.Ref, c.Message) {
				return true
			}
		}
		return false
	}
	if match() {
		return true
	}
	if b.now().Sub(batch.CreatedAt) > time.Minute {
		return false
	}
	if unlock, err := b.lockConversation(ctx, conv.ID); err == nil {
		unlock()
	}
	if fresh, err := b.store.Batch(ctx, batch.ID); err == nil && refHas(fresh.CardRef, c.Message) {
		return true
	}
	return match()
}

// clickSurface names where a click that counts came from, for the audit:
// the terminal, an approver's DM copy, or the card, in the conversation's
// channel (its thread) or in an approvals channel.
func (b *Bot) clickSurface(ctx context.Context, conv confirm.Conversation, batch *confirm.Batch, c Click) string {
	if c.Platform == "shell" {
		return confirm.SurfaceTerminal
	}
	if c.page {
		return confirm.SurfaceWeb
	}
	channel := c.Channel
	if msgs, err := b.cardMessages(ctx, batch.ID); err == nil {
		for _, m := range msgs {
			if m.Platform != c.Platform || !refHas(m.Ref, c.Message) {
				continue
			}
			if m.Kind == confirm.CardDM {
				return confirm.SurfaceDM
			}
			if m.Kind == confirm.CardMain {
				channel = m.Channel
				break
			}
		}
	}
	if channel != "" && channel != conv.Channel {
		return confirm.SurfaceApprovals
	}
	return confirm.SurfaceThread
}

// Errors of Extend and Edit.
var (
	ErrAlreadyExtended = errors.New("this card was already extended once")
	ErrNotEditable     = errors.New("this call's arguments can't be edited")
)

// Extend pushes a waiting card's deadline by confirmation.timeout, once
// per card: c.Ref is any call reference of the card, c.Message the card
// message. Only someone who may decide a waiting call of it may.
func (b *Bot) Extend(ctx context.Context, c Click) error {
	t, leave, err := b.enterClick(ctx, c, b.resolveClick)
	if err != nil {
		return err
	}
	defer leave()
	may := false
	for _, call := range t.batch.Calls {
		if call.Decision == confirm.DecisionPending && !c.IsBot && b.mayDecide(ctx, t.conv, t.batch, call, c.User, c.Roles) {
			may = true
			break
		}
	}
	if !may {
		b.rejectClick(ctx, c, t.conv.ID, t.batch.ID, t.call.Key, "not an approver (extend)")
		return ErrNotApprover
	}
	until := t.batch.ExpiresAt.Add(b.cfg.Timeout)
	ok, err := b.store.ExtendBatch(ctx, t.batch.ID, c.User, until)
	if err != nil {
		return fmt.Errorf("extend: %w", err)
	}
	if !ok {
		if t.batch.ExtendedBy != "" {
			b.rejectClick(ctx, c, t.conv.ID, t.batch.ID, "", "already extended")
			return ErrAlreadyExtended
		}
		b.rejectClick(ctx, c, t.conv.ID, t.batch.ID, "", "card no longer waiting (extend)")
		return ErrAlreadyClosed
	}
	b.log.Info("card extended", "batch", t.batch.ID, "by", c.User, "until", until.UTC())
	b.refreshCard(ctx, t.conv, t.batch.ID)
	return nil
}

// ClickedCard returns the waiting card a button belongs to, for forms that show it
// (a deny reason, the full arguments): c.Ref names a call of the card and
// c.Message must be one of the batch's card messages (the card, a DM copy),
// so a routed card works wherever it was posted. It returns
// confirm.ErrNotFound for a reference Airlock did not post there.
func (b *Bot) ClickedCard(ctx context.Context, c Click) (*card.Card, error) {
	ref, err := confirm.ParseCallRef(c.Ref)
	if err != nil {
		return nil, confirm.ErrNotFound
	}
	batch, err := b.store.Batch(ctx, ref.Batch)
	if err != nil {
		b.clickedCardFailed(c, err)
		return nil, err
	}
	conv, err := b.conversation(ctx, batch.ConversationID)
	if err != nil {
		b.clickedCardFailed(c, err)
		return nil, err
	}
	if batch.Status != confirm.BatchPending || !b.onCard(ctx, conv, batch, c) {
		return nil, confirm.ErrNotFound
	}
	if ref.Position < len(batch.Calls) {
		if err := b.checkRevision(ctx, c, clicked{batch: batch, call: batch.Calls[ref.Position], conv: conv, revision: ref.Revision}); err != nil {
			return nil, err
		}
	}
	cd := b.cardOf(conv, batch, b.introOf(ctx, batch))
	return &cd, nil
}

// clickedCardFailed logs a card that could not be loaded for a form or
// a view (a card not found is no failure: it no longer waits).
func (b *Bot) clickedCardFailed(c Click, err error) {
	if !errors.Is(err, confirm.ErrNotFound) {
		b.log.Error("load the clicked card", "platform", c.Platform, "channel", c.Channel, "user", c.User, "err", err)
	}
}

// postUncarded posts the card of each waiting batch whose card was never
// recorded: the process died between storing the batch and recording its
// card, or the post failed. Without it nobody could decide the batch
// until it expired. A card this process posted while the database was
// away is stored instead (see storeKept); one posted by a process that
// died before storing it is looked for where it was posted (its thread
// or the approvals channel), where the platform can (a CardFinder), and
// adopted rather than posted a second time. The copies of a card
// recorded with copies pending (its pointer, its DM copies) are then
// completed: each DM copy posted but not recorded is adopted, the rest
// posted. A conversation a live worker holds is left to it.
func (b *Bot) postUncarded(ctx context.Context) error {
	ids, err := b.store.UncardedBatches(ctx)
	if err != nil {
		return fmt.Errorf("list batches without a card: %w", err)
	}
	for _, id := range ids {
		if err := b.postUncardedBatch(ctx, id); err != nil {
			b.log.Error("post the card of a batch left without one", "batch", id, "err", err)
		}
	}
	return nil
}

// findMargin is how much earlier than its batch's creation (by the
// database's clock) a card is looked for: the platform's clock may be
// behind.
const findMargin = time.Minute

func (b *Bot) postUncardedBatch(ctx context.Context, id string) error {
	batch, err := b.store.Batch(ctx, id)
	if err != nil {
		return fmt.Errorf("load batch: %w", err)
	}
	conv, err := b.conversation(ctx, batch.ConversationID)
	if err != nil {
		return fmt.Errorf("load conversation: %w", err)
	}
	p, err := b.platform(conv.Platform)
	if err != nil {
		return nil // a process serving that platform will post it
	}
	unlock, ok, err := b.tryLockConversation(ctx, conv.ID)
	if err != nil || !ok {
		return err // a live worker has it (and posts its card)
	}
	defer unlock()
	if batch, err = b.store.Batch(ctx, id); err != nil {
		return fmt.Errorf("load batch: %w", err)
	}
	if batch.Status != confirm.BatchPending {
		if batch.CardRef != "" && batch.CopiesPending {
			// Decided before its copies were complete: a copy posted
			// but not recorded would go on offering its buttons.
			return b.completeCopies(ctx, conv, p, batch)
		}
		return nil
	}
	if batch.CardRef != "" {
		if !batch.CopiesPending {
			return nil
		}
		return b.completeCopies(ctx, conv, p, batch)
	}
	if m, ok := b.cs.keptOf(id); ok {
		// Posted by this process while the database was away.
		if err := b.storeKept(ctx, m); err != nil {
			return err
		}
		return b.completeCopiesOf(ctx, conv, p, id)
	}
	if f, ok := p.(CardFinder); ok {
		// Posted by a process killed before it recorded the card: adopt
		// that card rather than post a second one whose twin's buttons
		// would be refused.
		where := b.cardWhere(conv, p)
		ref, found, err := f.FindCard(ctx, where, id, batch.CreatedAt.Add(-findMargin))
		switch {
		case err != nil && !errors.Is(err, ErrCannotLook):
			return fmt.Errorf("look for its card, posted but not recorded (the next recovery looks again): %w", err)
		case err != nil:
			b.log.Warn("cannot look for a card posted but not recorded; posting it", "batch", id, "err", err)
		case found:
			b.log.Warn("adopting the card of a waiting request posted but never recorded", "batch", id, "conversation", conv.ID, "channel", where.Channel)
			return b.adoptCard(ctx, conv, p, batch, confirm.CardMessage{BatchID: id, Kind: confirm.CardMain,
				Platform: where.Platform, Channel: where.Channel, Thread: where.Thread, Ref: ref})
		}
	}
	b.log.Warn("posting the card of a waiting request whose card was never recorded", "batch", id, "conversation", conv.ID)
	return b.postCard(ctx, conv, p, batch, b.introOf(ctx, batch))
}

// adoptCard records a card found on the platform as the batch's card,
// then posts (or adopts) its copies. It is recorded at version 0: a
// change since it was posted leaves it behind, for card sync.
func (b *Bot) adoptCard(ctx context.Context, conv confirm.Conversation, p Platform, batch *confirm.Batch, m confirm.CardMessage) error {
	copies := b.copiesPlanned(conv, p)
	setRef := b.store.SetCardRef
	if copies {
		setRef = b.store.SetCardRefWithCopies
	}
	if err := setRef(ctx, batch.ID, m.Ref); err != nil {
		return fmt.Errorf("record an adopted card: %w", err)
	}
	b.rememberMsg(ctx, m) // if not, the next change lists it (see synced)
	b.cs.nudge()
	if !copies {
		return nil
	}
	return b.completeCopiesOf(ctx, conv, p, batch.ID)
}

func (b *Bot) completeCopiesOf(ctx context.Context, conv confirm.Conversation, p Platform, id string) error {
	batch, err := b.store.Batch(ctx, id)
	if err != nil {
		return fmt.Errorf("load batch: %w", err)
	}
	if !batch.CopiesPending {
		return nil
	}
	return b.completeCopies(ctx, conv, p, batch)
}

// completeCopies posts the copies of a recorded card that are missing
// (the process that posted the card died among them, or the card was
// adopted): the thread's pointer to a card in an approvals channel, and
// each approver's DM copy, adopted when the approver's DM already holds
// one posted but not recorded. Once every copy is there it records the
// copies posted; a copy it could not look for (a rate limit, a 5xx) is
// left, with the mark, for the next recovery pass. For a batch no longer
// waiting it posts nothing: it only adopts the copies posted but not
// recorded, so that card sync shows them the decision.
func (b *Bot) completeCopies(ctx context.Context, conv confirm.Conversation, p Platform, batch *confirm.Batch) error {
	waiting := batch.Status == confirm.BatchPending
	r, canRoute := p.(Router)
	if !canRoute || conv.DM {
		return b.store.CopiesPosted(ctx, batch.ID)
	}
	msgs, err := b.store.CardMessages(ctx, batch.ID)
	if err != nil {
		return fmt.Errorf("list card messages: %w", err)
	}
	main := mainCard(msgs)
	if main == nil {
		// Recorded only as the batch's card_ref (its listing failed).
		where := b.cardWhere(conv, p)
		m := confirm.CardMessage{BatchID: batch.ID, Kind: confirm.CardMain, Platform: where.Platform, Channel: where.Channel, Thread: where.Thread, Ref: batch.CardRef}
		if !b.rememberMsg(ctx, m) {
			return errors.New("list the card: the next recovery tries again")
		}
		main = &m
	}
	version, stored, err := b.cardState(ctx, batch.ID)
	if err != nil {
		return err
	}
	th := threadOf(conv)
	c := b.cardOf(conv, stored, b.introOf(ctx, stored))
	at := Thread{Platform: main.Platform, Channel: main.Channel, Thread: main.Thread}
	has := func(kind string, place Thread) bool {
		for _, m := range msgs {
			if m.Kind == kind && m.Platform == place.Platform && m.Channel == place.Channel && m.Thread == place.Thread {
				return true
			}
		}
		return false
	}
	var posted []confirm.CardMessage
	if waiting && at != th && !has(confirm.CardPointer, th) {
		ptr := pointerOf(stored, c.Calls, main.Channel, b.link(ctx, r, at, main.Ref))
		if pref, err := r.PostPointer(ctx, th, ptr); err != nil {
			b.log.Error("post pointer to the approvals channel", "batch", batch.ID, "err", err)
		} else {
			b.remember(ctx, &posted, batch.ID, confirm.CardPointer, th, pref, version)
		}
	}
	left := 0 // copies not looked for: the next pass tries them
	if _, dmCopies := b.cfg.Channels.Route(conv.Platform, conv.Channel, conv.DM); dmCopies {
		dc := c
		dc.Copy, dc.ThreadLink = card.CopyDM, b.link(ctx, r, th, "")
		f, canFind := p.(CardFinder)
		for _, user := range b.cfg.Channels.People(ctx, conv.Platform, b.approversOf(conv), MaxDMCopies) {
			dm, err := r.OpenDM(ctx, user)
			if err != nil {
				b.log.Error("open a DM for a card copy", "batch", batch.ID, "user", user, "err", err)
				continue
			}
			if has(confirm.CardDM, dm) {
				continue
			}
			if canFind {
				ref, found, err := f.FindCard(ctx, dm, batch.ID, batch.CreatedAt.Add(-findMargin))
				if err != nil && !errors.Is(err, ErrCannotLook) {
					b.log.Warn("look for a DM copy posted but not recorded; the next recovery looks again", "batch", batch.ID, "user", user, "err", err)
					left++
					continue
				}
				if found {
					b.log.Warn("adopting a DM copy of a card posted but never recorded", "batch", batch.ID, "user", user)
					b.remember(ctx, &posted, batch.ID, confirm.CardDM, dm, ref, 0)
					continue
				}
			}
			if !waiting {
				continue
			}
			dref, err := p.PostCard(ctx, dm, dc)
			if err != nil {
				b.log.Error("post a card copy in a DM", "batch", batch.ID, "user", user, "err", err)
				continue
			}
			b.remember(ctx, &posted, batch.ID, confirm.CardDM, dm, dref, version)
		}
	}
	if cached, ok := b.posted.get(batch.ID); ok {
		b.posted.put(batch.ID, append(slices.Clone(cached), posted...))
	}
	b.cs.nudge() // an adopted copy may be behind
	if left > 0 {
		return fmt.Errorf("%d DM copies could not be looked for; the next recovery tries again", left)
	}
	return b.store.CopiesPosted(ctx, batch.ID)
}
