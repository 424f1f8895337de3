package bot

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/airlockhq/airlock/agent"
	"github.com/airlockhq/airlock/confirm"
	"github.com/airlockhq/airlock/internal/ids"
	"github.com/airlockhq/airlock/model"
)

// The inbox (confirm.InboxStore): a platform adapter records every
// interaction and mention with Record before it acknowledges it, works it
// as before, and marks it done with Finished. The inbox job renews this
// process's claims on what it has not finished, and works off, through
// the adapter's Replay, what a dead process left: exactly one replica
// claims each. Work done again is idempotent: a click counted before the
// kill is not counted again and is answered with nothing (Click.Replayed),
// a turn whose message was stored is not stored or asked again
// (Turn.Replayed).

// JobInbox is the inbox job's name (the job label of airlock_job_seconds).
const JobInbox = "inbox"

// InboxLease is how long a delivery's claim lives without renewal: a
// replica that dies holding deliveries leaves them to the others this long
// after its last renewal. (SQLite serves one process: its start clears the
// claims, and they are worked at once.)
const InboxLease = 30 * time.Second

const (
	// inboxEvery is the inbox job's interval, in the bot's intervals: it
	// renews this process's claims that often, well inside InboxLease.
	inboxEvery = 5
	// inboxBatch bounds the deliveries one run of the job claims.
	inboxBatch = 100
	// inboxMaxAttempts is how often a delivery is claimed before it is
	// given up (logged as an error): one whose work kills the process
	// every time must not kill every replica forever.
	inboxMaxAttempts = 5
	// inboxRetention is how long deliveries are kept: platforms retry
	// within minutes.
	inboxRetention = 24 * time.Hour
)

// Replayer is a platform adapter that records its deliveries in the
// inbox. Replay works one again that the process which received it did
// not finish: it queues the work (which ends with Finished) and returns;
// an error means it can never be worked (unreadable), ErrNotReady that
// it can't be yet (the claim is given back for the next run).
type Replayer interface {
	Replay(ctx context.Context, it confirm.InboxItem) error
}

// ErrNotReady is a Replayer not yet able to work deliveries.
var ErrNotReady = errors.New("not ready to work deliveries yet")

// inboxWorker is this process's holder name in the inbox: the worker's,
// made unique per start (a restarted container may have the same host
// name and process id, and must not renew what its predecessor left).
func (b *Bot) inboxWorker() string {
	b.inboxOnce.Do(func() { b.inboxID = b.cfg.WorkerID + "/" + ids.New()[:10] })
	return b.inboxID
}

// Record records a delivery in the inbox before the platform acknowledges
// it, held by this process; false when the platform's key is recorded
// already (a retried delivery: acknowledge it and do nothing). An error
// means it was not recorded: do not acknowledge it as taken.
func (b *Bot) Record(ctx context.Context, it confirm.InboxItem) (bool, error) {
	return b.store.RecordInbox(ctx, it, b.inboxWorker(), InboxLease)
}

// Finished marks a recorded delivery done once its work ended. A failure
// is logged: the delivery is then worked again later, which is safe (see
// the inbox above).
func (b *Bot) Finished(ctx context.Context, platform, key string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if err := b.store.FinishInbox(ctx, platform, key); err != nil {
		b.log.Warn("inbox: mark a delivery done; it will be worked again", "platform", platform, "key", key, "err", err)
	}
}

// inboxJob renews this process's claims and hands what dead processes
// left to their platforms, which work them in the background.
func (b *Bot) inboxJob(ctx context.Context) error {
	worker := b.inboxWorker()
	if _, err := b.store.RenewInbox(ctx, worker, InboxLease); err != nil {
		return fmt.Errorf("renew inbox claims: %w", err)
	}
	replayers := map[string]Replayer{}
	b.mu.Lock()
	for name, p := range b.platforms {
		if r, ok := p.(Replayer); ok {
			replayers[name] = r
		}
	}
	stopping := b.stopping
	b.mu.Unlock()
	if len(replayers) == 0 || stopping {
		return nil
	}
	names := make([]string, 0, len(replayers))
	for name := range replayers {
		names = append(names, name)
	}
	slices.Sort(names)
	items, err := b.store.ClaimInbox(ctx, worker, names, InboxLease, inboxBatch)
	for _, it := range items {
		log := b.log.With("platform", it.Platform, "key", it.Key, "kind", it.Kind, "received", it.ReceivedAt, "attempt", it.Attempts)
		if it.Attempts > inboxMaxAttempts {
			log.Error("inbox: a delivery could not be worked in its attempts; given up")
			b.Finished(ctx, it.Platform, it.Key)
			continue
		}
		log.Warn("inbox: working a delivery its receiver did not finish")
		switch rerr := replayers[it.Platform].Replay(ctx, it); {
		case errors.Is(rerr, ErrNotReady):
			if err := b.store.ReleaseInbox(ctx, it.Platform, it.Key, worker); err != nil {
				log.Warn("inbox: give a delivery back", "err", err)
			}
		case rerr != nil:
			log.Error("inbox: a delivery that can't be worked; dropped", "err", rerr)
			b.Finished(ctx, it.Platform, it.Key)
		}
	}
	if err != nil {
		return fmt.Errorf("claim inbox: %w", err)
	}
	return nil
}

// appendTurn stores a turn's message; with the turn's delivery, as that
// delivery's message (a replay finds it there).
func (b *Bot) appendTurn(ctx context.Context, convID int64, t Turn, m model.Message) error {
	if t.Inbox == "" {
		return b.append(ctx, convID, m)
	}
	sm, err := storedMessage(m)
	if err != nil {
		return err
	}
	if err := b.store.AppendInboxMessage(ctx, convID, t.Platform, t.Inbox, sm); err != nil {
		return fmt.Errorf("append messages: %w", err)
	}
	return nil
}

// replayedTurn handles a turn worked again whose message a first attempt
// stored (done true; otherwise it is worked as any turn): when nothing
// came after it, the model is asked to answer it (the first attempt died
// before the answer was stored); else it was answered, or kept as
// context, and the model is not asked: an answer stored and not posted
// is posted, once (see postAnswers). Called holding the conversation.
func (b *Bot) replayedTurn(ctx context.Context, conv confirm.Conversation, t Turn) (done bool, err error) {
	convID, seq, ok, err := b.store.InboxMessage(ctx, t.Platform, t.Inbox)
	if err != nil {
		return true, fmt.Errorf("load the turn's stored message: %w", err)
	}
	if !ok {
		return false, nil
	}
	if convID != conv.ID {
		b.log.Warn("inbox: a turn worked again was stored in another conversation; nothing done", "conversation", conv.ID, "stored_in", convID)
		return true, nil
	}
	msgs, err := b.store.Messages(ctx, conv.ID)
	if err != nil {
		return true, fmt.Errorf("load history: %w", err)
	}
	if len(msgs) == 0 || msgs[len(msgs)-1].Seq != seq {
		// Its answer may be stored and not posted (the first attempt died
		// in between): posted now if no live process holds it, else by
		// the answers job; never asked for again.
		b.log.Info("inbox: a turn worked again was answered before; nothing more is asked", "conversation", conv.ID, "seq", seq)
		if p, err := b.platform(conv.Platform); err == nil {
			b.postAnswers(ctx, conv, p, 0)
		}
		return true, nil
	}
	var last model.Message
	if err := json.Unmarshal(msgs[len(msgs)-1].Body, &last); err != nil {
		return true, fmt.Errorf("decode message %d: %w", seq, err)
	}
	if last.Role != model.RoleUser || last.Aside {
		return true, nil // kept as context: nothing to answer
	}
	b.log.Warn("inbox: asking the model to answer a turn its receiver stored and did not answer", "conversation", conv.ID, "seq", seq)
	return true, b.agent.Converse(ctx, conv, agent.Requester{User: t.User, Roles: t.Roles}, nil)
}

// replayedStored reports whether a turn worked again had its message
// stored by a first attempt.
func (b *Bot) replayedStored(ctx context.Context, t Turn) (bool, error) {
	if !t.Replayed || t.Inbox == "" {
		return false, nil
	}
	_, _, ok, err := b.store.InboxMessage(ctx, t.Platform, t.Inbox)
	return ok, err
}

// counted reports whether a click's decision is already the call's: a
// click worked again after it was counted (the process died before its
// delivery was marked done) changes nothing and is answered with nothing.
// need is what a vote needs to count (step_up).
func counted(call confirm.Call, c Click, need confirm.Assurance) bool {
	if c.User == "" {
		return false
	}
	if c.Allow {
		return slices.ContainsFunc(countingVotes(call.Votes, need), func(v confirm.Vote) bool { return v.By == c.User }) ||
			(call.DecidedBy == c.User && call.Decision.Allowed())
	}
	return call.DecidedBy == c.User && call.Decision == confirm.DecisionDenied
}

// countingVotes are the votes made with need or more: a vote cast before
// step_up asked more of the call's tier is not counted, nor shown as one.
func countingVotes(votes []confirm.Vote, need confirm.Assurance) []confirm.Vote {
	var out []confirm.Vote
	for _, v := range votes {
		if v.Via.Counts(need) {
			out = append(out, v)
		}
	}
	return out
}
