package bot

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/airlockhq/airlock/confirm"
	"github.com/airlockhq/airlock/model"
)

// Answers (confirm.AnswerStore): every text the bot stores in a
// conversation's history and then posts in its thread (the model's
// answer, the notice that ends a turn) is stored marked "to be posted",
// in the same transaction, held by this process while it posts it, and
// forgotten once the platform accepted the post. An answer left by a
// process killed before its post, or whose post the platform refused
// (after the retries inside the post), is posted by the answers job of
// exactly one replica, in order within its conversation, with backoff, at
// most answerMaxAttempts times. A kill after the platform accepted a post
// and before it was forgotten posts it a second time: a message posted
// twice beats one lost.

// JobAnswers is the answers job's name (the job label of
// airlock_job_seconds).
const JobAnswers = "answers"

// AnswerLease is how long an answer's claim lives without renewal: a
// replica that dies while posting leaves the answer to the others this
// long after its last renewal (a post renews it while it lasts). SQLite
// serves one process: its start clears the claims, and they are posted
// at once.
const AnswerLease = 30 * time.Second

const (
	// answersBatch bounds the conversations one run of the job posts in.
	answersBatch = 50
	// answerMaxAttempts is how often an answer's post is tried before it
	// is given up (logged as an error): a thread the platform will never
	// take a post in must not be tried forever.
	answerMaxAttempts = 10
	// answerBackoffBase and answerBackoffMax bound the wait after a
	// failed post: doubling from 5 s, at most 10 minutes (the tries span
	// about half an hour).
	answerBackoffBase = 5 * time.Second
	answerBackoffMax  = 10 * time.Minute
	answersTimeout    = 10 * time.Minute
	// answerMarkTimeout bounds the writes after a post (forgotten, or
	// given back), which outlive the turn's context.
	answerMarkTimeout = 10 * time.Second
)

// EmptyAnswer is posted for a model's answer with no text.
const EmptyAnswer = "(the model returned an empty answer)"

// TraceAnswerStored is the trace point between an answer's store and its
// post (crash tests kill the process there).
const TraceAnswerStored = "answer-stored"

// answerBackoff is the wait after an answer's attempts-th failed post.
func answerBackoff(attempts int) time.Duration {
	d := answerBackoffBase
	for i := 1; i < attempts && d < answerBackoffMax; i++ {
		d *= 2
	}
	return min(d, answerBackoffMax)
}

// answerText is what is posted for a stored answer: its text redacted,
// as every text of the model's is before it is shown.
func (b *Bot) answerText(m model.Message) string {
	text := b.cfg.Redact(m.Text)
	if text == "" {
		text = EmptyAnswer
	}
	return text
}

// answer stores msgs, the last of which is the text to post in the
// conversation's thread, with the mark that it is to be posted, in one
// transaction, then posts it (after the conversation's older answers not
// yet posted, in order) and forgets the mark. A post that fails is left
// to the answers job and is no error of the turn: the answer is stored
// and will be posted. Called holding the conversation.
func (b *Bot) answer(ctx context.Context, conv confirm.Conversation, p Platform, msgs ...model.Message) error {
	stored, err := storedMessages(msgs)
	if err != nil {
		return err
	}
	a, earlier, err := b.store.AppendAnswer(ctx, conv.ID, b.inboxWorker(), AnswerLease, stored...)
	if err != nil {
		return fmt.Errorf("append messages: %w", err)
	}
	b.trace(TraceAnswerStored)
	if earlier {
		b.postAnswers(ctx, conv, p, a.ID)
		return nil
	}
	b.postAnswer(ctx, conv, p, a, b.answerText(msgs[len(msgs)-1]))
	return nil
}

// postAnswers posts the conversation's answers not yet posted, oldest
// first: mine (0: none) is held by this process already; the others are
// claimed first. It stops at the first it can't claim (held by a process
// that may be alive, or waiting for its retry) or can't post: the later
// ones wait for it (mine is given back), for the answers job. Called
// holding the conversation.
func (b *Bot) postAnswers(ctx context.Context, conv confirm.Conversation, p Platform, mine int64) {
	list, err := b.store.Answers(ctx, conv.ID)
	if err != nil {
		// Mine's claim lapses and the answers job posts it.
		b.log.Warn("answers: list a conversation's answers to post; left to the answers job", "conversation", conv.ID, "err", err)
		return
	}
	holder := b.inboxWorker()
	for i, a := range list {
		if a.ID != mine {
			got, ok, err := b.store.ClaimAnswer(ctx, a.ID, holder, AnswerLease)
			if err != nil || !ok {
				if err != nil {
					b.log.Warn("answers: claim an answer", "conversation", conv.ID, "seq", a.Seq, "err", err)
				}
				b.giveBack(ctx, list[i:], mine)
				return
			}
			a = got
		}
		if a.Attempts > answerMaxAttempts {
			b.log.Error("answers: an answer was claimed in all its attempts and never posted; given up", "conversation", conv.ID, "seq", a.Seq, "attempts", a.Attempts)
			b.forgetAnswer(ctx, conv, a)
			continue
		}
		m, err := b.storedAnswer(ctx, a)
		if err != nil {
			b.log.Error("answers: an answer that can't be posted; dropped", "conversation", conv.ID, "seq", a.Seq, "err", err)
			b.forgetAnswer(ctx, conv, a)
			continue
		}
		if !b.postAnswer(ctx, conv, p, a, b.answerText(m)) {
			b.giveBack(ctx, list[i+1:], mine)
			return
		}
	}
}

// giveBack gives mine back when it is among rest (answers not posted
// because an older one could not be): untried, for the answers job.
func (b *Bot) giveBack(ctx context.Context, rest []confirm.Answer, mine int64) {
	if mine == 0 || !slices.ContainsFunc(rest, func(a confirm.Answer) bool { return a.ID == mine }) {
		return
	}
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), answerMarkTimeout)
	defer cancel()
	if err := b.store.ReleaseAnswer(wctx, mine, b.inboxWorker()); err != nil {
		b.log.Warn("answers: give an answer back; its claim lapses", "answer", mine, "err", err)
	}
}

// storedAnswer loads an answer's message: the bot's own text, never a
// call, a result or a person's words.
func (b *Bot) storedAnswer(ctx context.Context, a confirm.Answer) (model.Message, error) {
	sm, err := b.store.Message(ctx, a.ConversationID, a.Seq)
	if err != nil {
		return model.Message{}, err
	}
	var m model.Message
	if err := json.Unmarshal(sm.Body, &m); err != nil {
		return model.Message{}, fmt.Errorf("decode message %d: %w", a.Seq, err)
	}
	if m.Role != model.RoleAssistant || len(m.ToolCalls) > 0 || len(m.Results) > 0 {
		return model.Message{}, fmt.Errorf("message %d is not an answer (role %s, %d calls)", a.Seq, m.Role, len(m.ToolCalls))
	}
	return m, nil
}

// postAnswer posts an answer this process holds, renewing its claim while
// the post lasts, and forgets it once posted. A failed post gives it back
// for a retry after a backoff (the platform's Retry-After at least), or,
// past answerMaxAttempts, gives it up with an error logged. It reports
// whether the answer was posted.
func (b *Bot) postAnswer(ctx context.Context, conv confirm.Conversation, p Platform, a confirm.Answer, text string) bool {
	stop := b.holdAnswer(a.ID)
	err := p.Post(ctx, threadOf(conv), text)
	stop()
	if err == nil {
		b.forgetAnswer(ctx, conv, a)
		return true
	}
	log := b.log.With("conversation", conv.ID, "seq", a.Seq, "attempt", a.Attempts, "err", err)
	if a.Attempts >= answerMaxAttempts {
		log.Error("answers: the platform refused an answer in all its attempts; given up")
		b.forgetAnswer(ctx, conv, a)
		return false
	}
	after := answerBackoff(a.Attempts)
	if rl := (*RateLimitedError)(nil); errors.As(err, &rl) {
		after = max(after, rl.RetryAfter)
	}
	log.Warn("answers: the platform refused an answer; it is posted again later", "retry_in", after)
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), answerMarkTimeout)
	defer cancel()
	if err := b.store.RetryAnswer(wctx, a.ID, b.inboxWorker(), after); err != nil {
		log.Warn("answers: give a failed answer back; its claim lapses", "err", err)
	}
	return false
}

// forgetAnswer forgets an answer posted or given up.
func (b *Bot) forgetAnswer(ctx context.Context, conv confirm.Conversation, a confirm.Answer) {
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), answerMarkTimeout)
	defer cancel()
	if err := b.store.AnswerPosted(wctx, a.ID); err != nil {
		b.log.Warn("answers: mark an answer posted; it may be posted again", "conversation", conv.ID, "seq", a.Seq, "err", err)
	}
}

// holdAnswer renews this process's claim on an answer until the returned
// stop is called, so that no other process takes it over while its post
// lasts (the platforms ride out rate limits inside a post).
func (b *Bot) holdAnswer(id int64) (stop func()) {
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		t := time.NewTicker(AnswerLease / 3)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				ctx, cancel := context.WithTimeout(context.Background(), AnswerLease/3)
				if _, err := b.store.RenewAnswer(ctx, id, b.inboxWorker(), AnswerLease); err != nil {
					b.log.Warn("answers: renew the claim on an answer being posted", "answer", id, "err", err)
				}
				cancel()
			}
		}
	}()
	return func() { close(done); <-finished }
}

// answersJob posts the answers left unposted (a process died before their
// post, or the platform refused it): per conversation, oldest first, by
// the replica that claims them, leaving a conversation some turn holds
// (it posts them).
func (b *Bot) answersJob(ctx context.Context) error {
	if !b.enter() {
		return nil
	}
	defer b.leave()
	b.mu.Lock()
	names := make([]string, 0, len(b.platforms))
	for name := range b.platforms {
		names = append(names, name)
	}
	b.mu.Unlock()
	slices.Sort(names)
	ids, err := b.store.DueAnswers(ctx, names, answersBatch)
	if err != nil {
		return fmt.Errorf("due answers: %w", err)
	}
	for _, id := range ids {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		conv, err := b.conversation(ctx, id)
		if err != nil {
			b.log.Warn("answers: load a conversation", "conversation", id, "err", err)
			continue
		}
		p, err := b.platform(conv.Platform)
		if err != nil {
			continue
		}
		unlock, ok, err := b.tryLockConversation(ctx, id)
		if err != nil || !ok {
			continue // a turn holds it: it posts them, or the next run does
		}
		b.log.Warn("answers: posting answers left unposted", "conversation", id)
		b.postAnswers(ctx, conv, p, 0)
		unlock()
	}
	return nil
}
