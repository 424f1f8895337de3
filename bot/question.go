package bot

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/airlockhq/airlock/card"
	"github.com/airlockhq/airlock/confirm"
)

// Questions: an upstream MCP server asks for input during a call Airlock
// makes (MCP elicitation, form mode). Ask posts the question in the
// call's conversation, with Answer… and Decline; an approver of the
// channel answers or declines; expiry, or the call ending first, cancels
// it. The server's words are quoted, inert; who may answer is the
// channel's, never the server's to say. One conditional UPDATE ends a
// question, so a double click, a replay or two replicas end it once. The
// call waits in the process that runs it, polling the store, so an answer
// clicked on another replica reaches it.

// JobQuestions cancels questions past their expiry that no process is
// waiting on any more (the one that asked died), and updates their
// message.
const JobQuestions = "questions"

// questionPoll is how often a waiting call looks for its answer.
const questionPoll = 200 * time.Millisecond

// Questioner is implemented by platforms that post a server's question
// with its buttons and open its form. On a platform without it a question
// is declined, saying so in the thread.
type Questioner interface {
	PostQuestion(ctx context.Context, th Thread, n card.QuestionNotice) (ref string, err error)
	UpdateQuestion(ctx context.Context, th Thread, ref string, n card.QuestionNotice) error
}

// Errors of a question's buttons (see UserMessage).
var (
	ErrQuestionClosed = errors.New("this question was already answered, declined or cancelled")
	ErrNotOnQuestion  = errors.New("this button is not on this question's message")
)

// whyNoForms is said of a question on a platform that cannot show forms.
const whyNoForms = "this chat cannot show forms"

// runningCall remembers a call this process is running, by idempotency
// key, so a question asked during one finds its conversation.
func (b *Bot) runningCall(key string, c confirm.Call) func() {
	if key == "" {
		return func() {}
	}
	b.running.Store(key, c)
	return func() { b.running.Delete(key) }
}

// Ask posts a server's question in the conversation of the call it was
// asked during and waits for a person: accept with the values, decline,
// or cancel (expiry, ctx ending: the call ended or the server stopped
// waiting). A question Airlock cannot show (a schema of other types, more
// fields than a form holds, a chat without forms) is declined, saying so
// in the thread; one asked during no call of this process's is declined.
func (b *Bot) Ask(ctx context.Context, e confirm.Elicitation) confirm.ElicitAnswer {
	decline := confirm.ElicitAnswer{Action: confirm.ElicitDecline}
	v, ok := b.running.Load(e.IdempotencyKey)
	if !ok {
		b.log.Warn("question from an mcp server during no call this process runs; declined", "server", e.Server, "tool", e.Tool)
		return decline
	}
	call := v.(confirm.Call)
	batch, err := b.store.Batch(ctx, call.BatchID)
	if err != nil {
		b.log.Error("question: load batch; declined", "batch", call.BatchID, "err", err)
		return decline
	}
	conv, err := b.conversation(ctx, batch.ConversationID)
	if err != nil {
		b.log.Error("question: load conversation; declined", "batch", call.BatchID, "err", err)
		return decline
	}
	p, err := b.platform(conv.Platform)
	if err != nil {
		b.log.Error("question: no platform; declined", "platform", conv.Platform, "err", err)
		return decline
	}
	q := confirm.Question{ConversationID: conv.ID, BatchID: call.BatchID, CallKey: call.Key, Server: e.Server, Tool: e.Tool,
		Message: b.scrub(e.Message)}
	fields, ferr := confirm.QuestionFields(e.Schema)
	q.Fields = fields
	_, isQ := p.(Questioner)
	// The row is stored (and audited) even for a question declined at
	// once: the audit says what was asked and why nobody was.
	q, err = b.store.CreateQuestion(context.WithoutCancel(ctx), q, b.cfg.Timeout)
	if err != nil {
		b.log.Error("question: store; declined", "batch", call.BatchID, "err", err)
		return decline
	}
	log := b.log.With("question", q.ID, "server", e.Server, "tool", e.Tool, "batch", call.BatchID, "call", call.Key)
	th := threadOf(conv)
	if ferr != nil || !isQ {
		why := whyNoForms
		if ferr != nil {
			why = b.scrub(ferr.Error())
		}
		if _, err := b.store.EndQuestion(context.WithoutCancel(ctx), q.ID, confirm.QuestionDeclined, nil, "airlock", why); err != nil {
			log.Error("question: end", "err", err)
		}
		log.Info("question declined by airlock", "why", why)
		end, _ := b.store.Question(context.WithoutCancel(ctx), q.ID)
		b.postQuestion(context.WithoutCancel(ctx), p, th, end)
		return decline
	}
	b.postQuestion(context.WithoutCancel(ctx), p, th, q)
	log.Info("question posted")
	return b.awaitAnswer(ctx, q)
}

// postQuestion posts the question's message (as text where the platform
// has no Questioner) and records its reference.
func (b *Bot) postQuestion(ctx context.Context, p Platform, th Thread, q confirm.Question) {
	n := questionNotice(q)
	qn, ok := p.(Questioner)
	if !ok {
		n.Message = quote(n.Message)
		if err := p.Post(ctx, th, n.Text()); err != nil {
			b.log.Error("post question", "question", q.ID, "err", err)
		}
		return
	}
	ref, err := qn.PostQuestion(ctx, th, n)
	if err != nil {
		b.log.Error("post question", "question", q.ID, "err", err)
		return
	}
	if err := b.store.SetQuestionNoticeRef(ctx, q.ID, ref); err != nil {
		b.log.Error("store question ref", "question", q.ID, "err", err)
	}
}

// updateQuestion re-renders a question's message from storage.
func (b *Bot) updateQuestion(ctx context.Context, id string) {
	q, err := b.store.Question(ctx, id)
	if err != nil {
		b.log.Error("reload question", "question", id, "err", err)
		return
	}
	if q.NoticeRef == "" {
		return
	}
	conv, err := b.conversation(ctx, q.ConversationID)
	if err != nil {
		b.log.Error("question: load conversation", "question", id, "err", err)
		return
	}
	p, err := b.platform(conv.Platform)
	if err != nil {
		return
	}
	if qn, ok := p.(Questioner); ok {
		if err := qn.UpdateQuestion(ctx, threadOf(conv), q.NoticeRef, questionNotice(q)); err != nil {
			b.log.Error("update question", "question", id, "err", err)
		}
	}
}

// awaitAnswer waits until q ends (a person, on any replica), expires, or
// ctx ends, and says what the server is told.
func (b *Bot) awaitAnswer(ctx context.Context, q confirm.Question) confirm.ElicitAnswer {
	bg := context.WithoutCancel(ctx)
	tick := time.NewTicker(questionPoll)
	defer tick.Stop()
	for {
		cur, err := b.store.Question(bg, q.ID)
		if err == nil && cur.Status != confirm.QuestionPending {
			return answerOf(cur)
		}
		if err == nil && !b.now().Before(cur.ExpiresAt) {
			b.cancelQuestion(bg, q.ID, card.WhyExpired)
			continue
		}
		select {
		case <-ctx.Done():
			b.cancelQuestion(bg, q.ID, card.WhyCallEnded)
			if cur, err := b.store.Question(bg, q.ID); err == nil && cur.Status != confirm.QuestionPending {
				return answerOf(cur) // an answer that won just before stands
			}
			return confirm.ElicitAnswer{Action: confirm.ElicitCancel}
		case <-tick.C:
		}
	}
}

// cancelQuestion cancels a pending question (why: card.WhyExpired or
// card.WhyCallEnded) and updates its message; a question already ended
// is left as it is.
func (b *Bot) cancelQuestion(ctx context.Context, id, why string) {
	won, err := b.store.EndQuestion(ctx, id, confirm.QuestionCancelled, nil, "airlock", why)
	if err != nil {
		b.log.Error("cancel question", "question", id, "err", err)
		return
	}
	if won {
		b.log.Info("question cancelled", "question", id, "why", why)
		b.updateQuestion(ctx, id)
	}
}

// answerOf is what the server is told of an ended question.
func answerOf(q confirm.Question) confirm.ElicitAnswer {
	a := confirm.ElicitAnswer{Action: q.Status.Action()}
	if q.Status == confirm.QuestionAccepted {
		a.Content = q.Answer
		if a.Content == nil {
			a.Content = map[string]any{}
		}
	}
	return a
}

// questionNotice is the question as its message shows it.
func questionNotice(q confirm.Question) card.QuestionNotice {
	return card.QuestionNotice{Ref: confirm.QuestionRef(q.ID), Server: q.Server, Tool: q.Tool, Message: q.Message, Fields: q.Fields,
		Status: q.Status, By: q.By, At: q.EndedAt, Expires: q.ExpiresAt, Why: q.Why, Answer: q.Answer}
}

// questionJob cancels questions past their expiry whose asker is gone.
func (b *Bot) questionJob(ctx context.Context) error {
	qs, err := b.store.ExpiredQuestions(ctx, 100)
	if err != nil {
		return err
	}
	for _, q := range qs {
		b.cancelQuestion(ctx, q.ID, card.WhyExpired)
	}
	return nil
}

// clickedQuestion resolves a question button's click: the question, that
// the click came from its message, and that the clicker may answer (an
// approver of the conversation's channel, not a bot). Anything else is
// refused and audited as a rejected click.
func (b *Bot) clickedQuestion(ctx context.Context, c Click) (confirm.Question, error) {
	id, err := confirm.ParseQuestionRef(c.Ref)
	if err != nil {
		b.rejectClick(ctx, c, 0, "", "", "malformed question reference")
		return confirm.Question{}, err
	}
	q, err := b.store.Question(ctx, id)
	if errors.Is(err, confirm.ErrNotFound) {
		b.rejectClick(ctx, c, 0, "", "", "unknown question")
		return confirm.Question{}, confirm.ErrBadRef
	} else if err != nil {
		return confirm.Question{}, fmt.Errorf("load question: %w", err)
	}
	q = b.awaitNoticeRef(ctx, q)
	conv, err := b.conversation(ctx, q.ConversationID)
	if err != nil {
		return confirm.Question{}, fmt.Errorf("load conversation: %w", err)
	}
	if c.Platform != conv.Platform || c.Message == "" || !refHas(q.NoticeRef, c.Message) {
		b.rejectClick(ctx, c, conv.ID, q.BatchID, q.CallKey, "question button not on its message")
		return confirm.Question{}, ErrNotOnQuestion
	}
	if c.IsBot || !b.cfg.Channels.CanApprove(ctx, conv.Platform, conv.Channel, conv.DM, c.User, c.Roles) {
		b.rejectClick(ctx, c, conv.ID, q.BatchID, q.CallKey, "not an approver (question)")
		return confirm.Question{}, ErrNotApprover
	}
	if q.Status != confirm.QuestionPending || !b.now().Before(q.ExpiresAt) {
		return confirm.Question{}, ErrQuestionClosed
	}
	return q, nil
}

// noticeRefWait bounds how long a click waits for the reference of a
// question's message posted a moment ago (it is stored right after the
// post returns, and a person may click between the two).
const noticeRefWait = 3 * time.Second

// awaitNoticeRef is q once its message's reference is stored, waiting at
// most noticeRefWait for a pending question that has none yet.
func (b *Bot) awaitNoticeRef(ctx context.Context, q confirm.Question) confirm.Question {
	deadline := time.Now().Add(noticeRefWait)
	for q.NoticeRef == "" && q.Status == confirm.QuestionPending && time.Now().Before(deadline) {
		select {
		case <-ctx.Done():
			return q
		case <-time.After(50 * time.Millisecond):
		}
		if fresh, err := b.store.Question(ctx, q.ID); err == nil {
			q = fresh
		}
	}
	return q
}

// QuestionForm checks the clicker may answer and returns what Answer…
// opens.
func (b *Bot) QuestionForm(ctx context.Context, c Click) (card.QuestionNotice, error) {
	if !b.enter() {
		return card.QuestionNotice{}, ErrShuttingDown
	}
	defer b.leave()
	q, err := b.clickedQuestion(ctx, c)
	if err != nil {
		return card.QuestionNotice{}, err
	}
	return questionNotice(q), nil
}

// AnswerQuestion answers a question with the values typed in its form
// (one per field, in order; a question without fields takes none): an
// answer that does not fit is an *confirm.AnswerError and changes
// nothing. Values are scrubbed of the config's secrets before they are
// stored and sent.
func (b *Bot) AnswerQuestion(ctx context.Context, c Click, values []string) error {
	return b.onQuestion(ctx, c, func(q confirm.Question) error {
		for i := range values {
			values[i] = b.scrub(values[i])
		}
		answer, err := confirm.ParseAnswer(q.Fields, values)
		if err != nil {
			return err
		}
		return b.endQuestion(ctx, q, confirm.QuestionAccepted, answer, c)
	})
}

// DeclineQuestion declines a question: the server is told no.
func (b *Bot) DeclineQuestion(ctx context.Context, c Click) error {
	return b.onQuestion(ctx, c, func(q confirm.Question) error {
		return b.endQuestion(ctx, q, confirm.QuestionDeclined, nil, c)
	})
}

// onQuestion works a question's button with do, once the click is found
// to be on a waiting question and from someone who may answer; a replayed
// click of a question already ended is no error.
func (b *Bot) onQuestion(ctx context.Context, c Click, do func(confirm.Question) error) error {
	if !b.enter() {
		return ErrShuttingDown
	}
	defer b.leave()
	q, err := b.clickedQuestion(ctx, c)
	if errors.Is(err, ErrQuestionClosed) && c.Replayed {
		return nil
	} else if err != nil {
		return err
	}
	return do(q)
}

func (b *Bot) endQuestion(ctx context.Context, q confirm.Question, st confirm.QuestionStatus, answer map[string]any, c Click) error {
	won, err := b.store.EndQuestion(ctx, q.ID, st, answer, c.User, "")
	if err != nil {
		return fmt.Errorf("end question: %w", err)
	}
	if !won {
		if c.Replayed {
			return nil
		}
		return ErrQuestionClosed
	}
	b.log.Info("question "+string(st), "question", q.ID, "by", c.User, "server", q.Server, "tool", q.Tool)
	b.updateQuestion(ctx, q.ID)
	return nil
}
