package bot_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/airlockhq/airlock/bot"
	"github.com/airlockhq/airlock/bot/bottest"
	cardpkg "github.com/airlockhq/airlock/card"
	"github.com/airlockhq/airlock/confirm"
	"github.com/airlockhq/airlock/internal/testkit"
)

// questionPlatform is the recording platform with questions.
type questionPlatform struct {
	*bottest.Platform
	mu      sync.Mutex
	posted  []cardpkg.QuestionNotice
	updated []cardpkg.QuestionNotice
	slow    time.Duration // how long PostQuestion takes after the message is up
}

func (p *questionPlatform) PostQuestion(_ context.Context, _ bot.Thread, n cardpkg.QuestionNotice) (string, error) {
	p.mu.Lock()
	p.posted = append(p.posted, n)
	ref := fmt.Sprintf("q-msg-%d", len(p.posted))
	slow := p.slow
	p.mu.Unlock()
	time.Sleep(slow) // the message is up: a person may click now
	return ref, nil
}

func (p *questionPlatform) UpdateQuestion(_ context.Context, _ bot.Thread, _ string, n cardpkg.QuestionNotice) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.updated = append(p.updated, n)
	return nil
}

func (p *questionPlatform) questions() (posted, updated []cardpkg.QuestionNotice) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]cardpkg.QuestionNotice(nil), p.posted...), append([]cardpkg.QuestionNotice(nil), p.updated...)
}

var _ bot.Questioner = (*questionPlatform)(nil)

// askTool asks its server's question through the bot during its run, as
// mcptools does, and returns what it was told.
type askTool struct {
	fakeTool
	b      func() *bot.Bot
	schema string
	stop   chan struct{} // closed: the server stops waiting (the question's context ends)
}

func (a *askTool) Run(ctx context.Context, _ json.RawMessage, key string) (string, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-a.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	ans := a.b().Ask(ctx, confirm.Elicitation{Server: "deployer", Tool: "ask", IdempotencyKey: key,
		Message: "Ship where? <@alice> <!channel>", Schema: json.RawMessage(a.schema)})
	out := ans.Action
	for _, k := range []string{"env", "replicas"} {
		if v, ok := ans.Content[k]; ok {
			out += fmt.Sprintf(" %s=%v", k, v)
		}
	}
	return out, nil
}

const shipSchema = `{"type":"object","properties":{"env":{"type":"string","enum":["prod","staging"]},"replicas":{"type":"integer","minimum":1}},"required":["env"]}`

// questionHarness is a bot whose ungated tool "ask" asks a question, on a
// platform with questions; the turn runs in the background.
func questionHarness(t *testing.T, schema string) (*harness, *questionPlatform, <-chan error) {
	h, qp, done, _ := questionHarnessStop(t, schema)
	return h, qp, done
}

func questionHarnessStop(t *testing.T, schema string) (*harness, *questionPlatform, <-chan error, chan struct{}) {
	t.Helper()
	h := newHarness(t, "")
	qp := &questionPlatform{Platform: h.plat}
	tool := &askTool{schema: schema, stop: make(chan struct{})}
	b, err := bot.New(bot.Config{
		Store: h.store, Model: h.model, Tools: toolSetWith{"ask": tool}, Policy: confirm.ForTools(),
		Channels: bot.NewChannels([]bot.Channel{{Platform: "test", ID: "C1", Approvers: []string{"alice", "carol"}}}),
		Timeout:  10 * time.Minute,
		Now:      func() time.Time { return time.Unix(0, h.now.Load()).UTC() },
	})
	if err != nil {
		t.Fatal(err)
	}
	b.Register("test", qp)
	h.bot = b
	tool.b = func() *bot.Bot { return b }
	h.push(calls(tc("a", "ask", `{}`)), text("done"))
	done := make(chan error, 1)
	go func() {
		done <- b.HandleTurn(context.Background(), bot.Turn{Platform: "test", Channel: "C1", Thread: "T1", User: "bob", Text: "ship"})
	}()
	return h, qp, done, tool.stop
}

func waitQuestion(t *testing.T, qp *questionPlatform) cardpkg.QuestionNotice {
	t.Helper()
	testkit.Eventually(t, 10*time.Second, "the question", func() bool { p, _ := qp.questions(); return len(p) == 1 })
	p, _ := qp.questions()
	return p[0]
}

// A question during a call is posted in the call's thread with the
// server's words as they are (the renderer keeps them inert) and a form of
// its fields. Only an approver, on the question's own message, may answer;
// an answer that does not fit changes nothing; the answer reaches the
// tool once; a second answer, and a decline after it, change nothing; a
// replayed answer is no error.
func TestQuestionAnsweredOnceByAnApprover(t *testing.T) {
	h, qp, done := questionHarness(t, shipSchema)
	q := waitQuestion(t, qp)
	if !q.Open() || q.Server != "deployer" || q.Tool != "ask" || q.Message != "Ship where? <@alice> <!channel>" || len(q.Fields) != 2 ||
		len(q.Actions()) != 2 {
		t.Fatalf("question posted: %+v", q)
	}
	ctx := context.Background()
	click := func(user, msg string) bot.Click {
		return bot.Click{Platform: "test", Channel: "C1", User: user, Ref: q.Ref, Message: msg}
	}
	if err := h.bot.AnswerQuestion(ctx, click("bob", "q-msg-1"), []string{"prod", ""}); !errors.Is(err, bot.ErrNotApprover) {
		t.Fatalf("the requester answered: %v", err)
	}
	if err := h.bot.AnswerQuestion(ctx, click("alice", "card-other"), []string{"prod", ""}); !errors.Is(err, bot.ErrNotOnQuestion) {
		t.Fatalf("an answer from another message: %v", err)
	}
	if err := h.bot.AnswerQuestion(ctx, bot.Click{Platform: "test", Channel: "C1", User: "alice", Ref: confirm.QuestionRef("nope"), Message: "q-msg-1"}, []string{"prod", ""}); !errors.Is(err, confirm.ErrBadRef) {
		t.Fatalf("an unknown question: %v", err)
	}
	isBot := click("alice", "q-msg-1")
	isBot.IsBot = true
	if err := h.bot.AnswerQuestion(ctx, isBot, []string{"prod", ""}); !errors.Is(err, bot.ErrNotApprover) {
		t.Fatalf("a bot answered: %v", err)
	}
	var ae *confirm.AnswerError
	if err := h.bot.AnswerQuestion(ctx, click("alice", "q-msg-1"), []string{"prod", "0"}); !errors.As(err, &ae) || ae.Field != 1 {
		t.Fatalf("replicas 0: %v", err)
	}
	select {
	case err := <-done:
		t.Fatalf("the turn ended before an answer: %v", err)
	default:
	}
	if err := h.bot.AnswerQuestion(ctx, click("alice", "q-msg-1"), []string{"Prod", "3"}); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	res := lastToolResults(t, h.lastRequest())
	if len(res) != 1 || res[0].Content != "accept env=prod replicas=3" {
		t.Fatalf("the tool was told %+v", res)
	}
	if err := h.bot.AnswerQuestion(ctx, click("carol", "q-msg-1"), []string{"staging", ""}); !errors.Is(err, bot.ErrQuestionClosed) {
		t.Fatalf("a second answer: %v", err)
	}
	if err := h.bot.DeclineQuestion(ctx, click("carol", "q-msg-1")); !errors.Is(err, bot.ErrQuestionClosed) {
		t.Fatalf("a decline after the answer: %v", err)
	}
	replay := click("alice", "q-msg-1")
	replay.Replayed = true
	if err := h.bot.AnswerQuestion(ctx, replay, []string{"prod", "3"}); err != nil {
		t.Fatalf("a replayed answer: %v", err)
	}
	_, updated := qp.questions()
	if len(updated) != 1 || updated[0].Status != confirm.QuestionAccepted || updated[0].By != "alice" || updated[0].Answer["replicas"] != float64(3) ||
		len(updated[0].Actions()) != 0 {
		t.Fatalf("the question's message after the answer: %+v", updated)
	}
	evs, err := h.store.AuditEvents(ctx, confirm.AuditFilter{})
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, e := range evs {
		if strings.HasPrefix(string(e.Kind), "question_") || e.Kind == confirm.AuditRejectedClick {
			kinds = append(kinds, string(e.Kind)+":"+e.Actor)
		}
	}
	if got := strings.Join(kinds, " "); got != "question_asked:airlock rejected_click:bob rejected_click:alice rejected_click:alice rejected_click:alice question_answered:alice" {
		t.Fatalf("audit: %s", got)
	}
}

// Decline tells the tool no; a question nobody answers is cancelled at its
// expiry; a question whose call ends first is cancelled with it.
func TestQuestionDeclinedExpiredOrLeft(t *testing.T) {
	t.Run("declined", func(t *testing.T) {
		h, qp, done := questionHarness(t, shipSchema)
		q := waitQuestion(t, qp)
		if err := h.bot.DeclineQuestion(context.Background(), bot.Click{Platform: "test", Channel: "C1", User: "alice", Ref: q.Ref, Message: "q-msg-1"}); err != nil {
			t.Fatal(err)
		}
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if res := lastToolResults(t, h.lastRequest()); res[0].Content != "decline" {
			t.Fatalf("the tool was told %+v", res)
		}
	})
	t.Run("expired", func(t *testing.T) {
		h, qp, done := questionHarness(t, shipSchema)
		waitQuestion(t, qp)
		h.now.Add(int64(11 * time.Minute))
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if res := lastToolResults(t, h.lastRequest()); res[0].Content != "cancel" {
			t.Fatalf("the tool was told %+v", res)
		}
		_, updated := qp.questions()
		if len(updated) != 1 || updated[0].Status != confirm.QuestionCancelled || updated[0].Why != cardpkg.WhyExpired {
			t.Fatalf("the expired question's message: %+v", updated)
		}
	})
	t.Run("call ended", func(t *testing.T) {
		h, qp, done, stop := questionHarnessStop(t, shipSchema)
		q := waitQuestion(t, qp)
		close(stop)
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if res := lastToolResults(t, h.lastRequest()); res[0].Content != "cancel" {
			t.Fatalf("the tool was told %+v", res)
		}
		_, updated := qp.questions()
		if len(updated) != 1 || updated[0].Why != cardpkg.WhyCallEnded {
			t.Fatalf("the message of a question whose call ended: %+v", updated)
		}
		if err := h.bot.AnswerQuestion(context.Background(), bot.Click{Platform: "test", Channel: "C1", User: "alice", Ref: q.Ref, Message: "q-msg-1"}, []string{"prod", ""}); !errors.Is(err, bot.ErrQuestionClosed) {
			t.Fatalf("an answer after the call ended: %v", err)
		}
	})
	t.Run("during no call", func(t *testing.T) {
		h := newHarness(t, "")
		if a := h.bot.Ask(context.Background(), confirm.Elicitation{IdempotencyKey: "b/#1", Schema: json.RawMessage(shipSchema)}); a.Action != confirm.ElicitDecline || len(h.plat.Posts) != 0 {
			t.Fatalf("a question during no call: %+v, posts %v", a, h.plat.Posts)
		}
	})
}

// A click on a question whose message is up but whose reference is not
// stored yet (the post has not returned) is judged once it is, not
// refused.
func TestQuestionClickedBeforeItsReferenceIsStored(t *testing.T) {
	h := newHarness(t, "")
	qp := &questionPlatform{Platform: h.plat, slow: 500 * time.Millisecond}
	tool := &askTool{schema: shipSchema, stop: make(chan struct{})}
	b, err := bot.New(bot.Config{Store: h.store, Model: h.model, Tools: toolSetWith{"ask": tool}, Policy: confirm.ForTools(),
		Channels: bot.NewChannels([]bot.Channel{{Platform: "test", ID: "C1", Approvers: []string{"alice"}}}),
		Timeout:  10 * time.Minute, Now: func() time.Time { return time.Unix(0, h.now.Load()).UTC() }})
	if err != nil {
		t.Fatal(err)
	}
	b.Register("test", qp)
	tool.b = func() *bot.Bot { return b }
	h.push(calls(tc("a", "ask", `{}`)), text("done"))
	done := make(chan error, 1)
	go func() {
		done <- b.HandleTurn(context.Background(), bot.Turn{Platform: "test", Channel: "C1", Thread: "T1", User: "bob", Text: "ship"})
	}()
	q := waitQuestion(t, qp)
	if err := b.AnswerQuestion(context.Background(), bot.Click{Platform: "test", Channel: "C1", User: "alice", Ref: q.Ref, Message: "q-msg-1"}, []string{"prod", ""}); err != nil {
		t.Fatalf("an answer while the post returns: %v", err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// A question Airlock cannot show (a list) is declined at once, saying so
// on a message without buttons, and audited.
func TestQuestionAirlockCannotShowIsDeclined(t *testing.T) {
	h, qp, done := questionHarness(t, `{"type":"object","properties":{"tags":{"type":"array","items":{"type":"string"}}}}`)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if res := lastToolResults(t, h.lastRequest()); res[0].Content != "decline" {
		t.Fatalf("the tool was told %+v", res)
	}
	posted, _ := qp.questions()
	if len(posted) != 1 || posted[0].Status != confirm.QuestionDeclined || posted[0].By != "airlock" || !strings.Contains(posted[0].Why, "array") ||
		len(posted[0].Actions()) != 0 {
		t.Fatalf("posted %+v", posted)
	}
}

// A pending question past its expiry whose asker is gone (the process
// died) is cancelled by the questions job, and its message updated.
func TestQuestionJobCancelsTheAbandoned(t *testing.T) {
	h, qp, _ := questionHarness(t, shipSchema)
	q := waitQuestion(t, qp)
	id, _ := confirm.ParseQuestionRef(q.Ref)
	var job func(context.Context) error
	for _, j := range h.bot.Jobs(time.Second) {
		if j.Name == bot.JobQuestions {
			job = j.Run
		}
	}
	h.now.Add(int64(11 * time.Minute))
	if err := job(context.Background()); err != nil {
		t.Fatal(err)
	}
	got, err := h.store.Question(context.Background(), id)
	if err != nil || got.Status != confirm.QuestionCancelled {
		t.Fatalf("after the job: %+v, %v", got, err)
	}
}
