package slack

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/airlockhq/airlock/bot"
	cardpkg "github.com/airlockhq/airlock/card"
)

// stubBot records clicks; Decide waits until release is closed.
type stubBot struct {
	release  chan struct{}
	started  chan struct{} // one send per Decide
	running  atomic.Int32
	maxSeen  atomic.Int32
	decided  atomic.Int32
	channels *bot.Channels

	// What the edit and extend tests make the bot answer; nil: nothing
	// to say (the click counted).
	editForm func(bot.Click) (bot.EditForm, error)
	edit     func(context.Context, bot.Click, string) error
	extend   func(bot.Click) error

	mu     sync.Mutex
	clicks []stubCall // Extend, EditForm and Edit calls, in order
}

// stubCall is one call of the stub's Extend, EditForm or Edit.
type stubCall struct {
	Method string
	Click  bot.Click
	Args   string
}

func (s *stubBot) record(method string, c bot.Click, args string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.clicks = append(s.clicks, stubCall{Method: method, Click: c, Args: args})
}

func (s *stubBot) calls() []stubCall {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]stubCall(nil), s.clicks...)
}

func (s *stubBot) Extend(_ context.Context, c bot.Click) error {
	s.record("Extend", c, "")
	if s.extend != nil {
		return s.extend(c)
	}
	return nil
}

func (s *stubBot) EditForm(_ context.Context, c bot.Click) (bot.EditForm, error) {
	s.record("EditForm", c, "")
	if s.editForm != nil {
		return s.editForm(c)
	}
	return bot.EditForm{Ref: c.Ref, Number: 1, Tool: "deploy", Args: "{\n  \"service\": \"api\"\n}"}, nil
}

func (s *stubBot) Edit(ctx context.Context, c bot.Click, args string) error {
	s.record("Edit", c, args)
	if s.edit != nil {
		return s.edit(ctx, c, args)
	}
	return nil
}

func newStubBot() *stubBot {
	return &stubBot{release: make(chan struct{}), started: make(chan struct{}, 1024), channels: bot.NewChannels(nil)}
}

func (s *stubBot) Admit(context.Context, bot.Turn) bot.Admission                 { return bot.Admitted }
func (s *stubBot) HandleTurn(context.Context, bot.Turn) error                    { return nil }
func (s *stubBot) Note(context.Context, bot.Turn) error                          { return nil }
func (s *stubBot) HasConversation(context.Context, bot.Thread) (bool, error)     { return true, nil }
func (s *stubBot) Revoke(context.Context, bot.Click) error                       { return nil }
func (s *stubBot) MarkChecked(context.Context, bot.Click) error                  { return nil }
func (s *stubBot) ClickedCard(context.Context, bot.Click) (*cardpkg.Card, error) { return nil, nil }
func (s *stubBot) Channels() *bot.Channels                                       { return s.channels }

// Interact is the real dispatch over the stub's answers.
func (s *stubBot) Interact(ctx context.Context, in bot.Interaction) (bot.Reply, error) {
	return bot.Dispatch(ctx, s, in)
}
func (s *stubBot) Decide(ctx context.Context, c bot.Click) error {
	n := s.running.Add(1)
	defer s.running.Add(-1)
	for {
		m := s.maxSeen.Load()
		if n <= m || s.maxSeen.CompareAndSwap(m, n) {
			break
		}
	}
	s.started <- struct{}{}
	select {
	case <-s.release:
	case <-ctx.Done():
	}
	s.decided.Add(1)
	return nil
}

type stubEvents struct{}

func (stubEvents) MarkEvent(context.Context, string, string) (bool, error) {
	return true, nil
}

type ackRecorder struct {
	mu   sync.Mutex
	acks []string
	durs []time.Duration
}

func (r *ackRecorder) Ack(platform string, d time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.acks = append(r.acks, platform)
	r.durs = append(r.durs, d)
}

func (r *ackRecorder) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.acks)
}

// newAckAdapter is an HTTP-mode adapter over a stub bot, started against
// the fake Slack, served on a test server.
func newAckAdapter(t *testing.T, b *stubBot, workers int, rec *ackRecorder) (*Adapter, *httptest.Server) {
	t.Helper()
	fake := newFakeSlack(t)
	ad, err := New(Config{Mode: ModeHTTP, BotToken: testBotToken, SigningSecret: testSecret, APIURL: fake.apiURL(),
		Workers: workers, Metrics: rec}, b, stubEvents{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	if err := ad.Start(ctx); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(ad.Handler())
	t.Cleanup(func() {
		select {
		case <-b.release:
		default:
			close(b.release)
		}
		cancel()
		ad.Wait()
		srv.Close()
	})
	return ad, srv
}

func postClick(t *testing.T, srv *httptest.Server, ref string) int {
	t.Helper()
	raw, _ := json.Marshal(blockAction(alice, chanOps, mentionTS, ActionAllow, ref))
	body := []byte(url.Values{"payload": {string(raw)}}.Encode())
	w := &world{t: t, events: srv}
	code, _ := w.post(body, formHeader(), true, time.Now())
	return code
}

// A click is acknowledged (200, recorded as an ack) while its decision is
// still being worked on: nothing of the work happens before the ack.
func TestHTTPAckBeforeWork(t *testing.T) {
	b := newStubBot()
	rec := &ackRecorder{}
	_, srv := newAckAdapter(t, b, 2, rec)
	done := make(chan int, 1)
	go func() { done <- postClick(t, srv, "abcdefgh.0") }()
	select {
	case code := <-done:
		if code != http.StatusOK {
			t.Fatalf("click: HTTP %d, want 200", code)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the click was not acknowledged while its decision waits")
	}
	<-b.started // the decision runs after the ack, and still waits
	if got := b.decided.Load(); got != 0 {
		t.Fatalf("%d decisions finished before release", got)
	}
	rec.mu.Lock()
	acks := append([]string(nil), rec.acks...)
	rec.mu.Unlock()
	if len(acks) != 1 || acks[0] != Platform {
		t.Fatalf("acks recorded %v, want one for %q", acks, Platform)
	}
	close(b.release)
}

// A burst of clicks is acknowledged at once and worked on by at most
// Workers goroutines; the waiting ones cost a queue slot, not a goroutine.
func TestHTTPBurstBoundedWorkers(t *testing.T) {
	const clicks, workers = 60, 3
	b := newStubBot()
	rec := &ackRecorder{}
	ad, srv := newAckAdapter(t, b, workers, rec)
	for i := range workers {
		if code := postClick(t, srv, "abcdefgh."+string(rune('0'+i))); code != http.StatusOK {
			t.Fatalf("click %d: HTTP %d", i, code)
		}
		<-b.started
	}
	before := runtime.NumGoroutine()
	for i := workers; i < clicks; i++ {
		if code := postClick(t, srv, "abcdefgh.0"); code != http.StatusOK {
			t.Fatalf("click %d: HTTP %d", i, code)
		}
	}
	if grown := runtime.NumGoroutine() - before; grown > 10 {
		t.Errorf("%d queued clicks added %d goroutines", clicks-workers, grown)
	}
	// The ack is recorded just after the response is flushed: the client
	// may read it first.
	for deadline := time.Now().Add(5 * time.Second); rec.count() != clicks && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
	if n := rec.count(); n != clicks {
		t.Errorf("acks recorded %d, want %d", n, clicks)
	}
	close(b.release)
	ad.Wait()
	if got := b.decided.Load(); got != clicks {
		t.Errorf("%d decisions, want %d", got, clicks)
	}
	if m := b.maxSeen.Load(); m > workers {
		t.Errorf("%d decisions ran at once, want at most %d", m, workers)
	}
}

// Socket Mode: an envelope's ack is recorded once it is sent.
func TestSocketAckRecorded(t *testing.T) {
	b := newStubBot()
	close(b.release)
	rec := &ackRecorder{}
	fake := newFakeSlack(t)
	ad, err := New(Config{Mode: ModeSocket, BotToken: testBotToken, AppToken: testAppToken, APIURL: fake.apiURL(),
		HTTPClient: &http.Client{Timeout: 10 * time.Second}, Metrics: rec}, b, stubEvents{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := ad.Start(ctx); err != nil {
		t.Fatal(err)
	}
	runErr := make(chan error, 1)
	go func() { runErr <- ad.Run(ctx) }()
	waitFor(t, "socket mode connection", func() bool { return fake.connections() > 0 })
	id := fake.sendEnvelope("interactive", blockAction(alice, chanOps, mentionTS, ActionAllow, "abcdefgh.0"), 0)
	waitFor(t, "ack of "+id, func() bool { return fake.acked(id) })
	waitFor(t, "the ack recorded", func() bool { return rec.count() == 1 })
	ad.Wait()
	if b.decided.Load() != 1 {
		t.Errorf("decisions %d, want 1", b.decided.Load())
	}
	cancel()
	<-runErr
}

func TestPoolFIFO(t *testing.T) {
	var p pool
	p.max = 1
	if !p.push(job{what: "a"}) {
		t.Fatal("first push must start a worker")
	}
	for i := 0; i < 5000; i++ {
		if p.push(job{what: "b"}) {
			t.Fatal("a second worker started past max")
		}
	}
	if j, ok := p.pop(); !ok || j.what != "a" {
		t.Fatalf("pop = %q, %v; want a", j.what, ok)
	}
	n := 0
	for {
		j, ok := p.pop()
		if !ok {
			break
		}
		if j.what != "b" {
			t.Fatalf("pop = %q", j.what)
		}
		n++
	}
	if n != 5000 || p.running != 0 || p.queue != nil {
		t.Fatalf("popped %d, running %d, queue kept %d slots", n, p.running, cap(p.queue))
	}
}

func (s *stubBot) RunAction(context.Context, bot.Click, cardpkg.ActionKind) error { return nil }
func (s *stubBot) DecideAll(context.Context, bot.Click) (bot.AllResult, error) {
	return bot.AllResult{}, nil
}

func (s *stubBot) PhraseFor(context.Context, bot.Click) (bot.PhrasePrompt, bool, error) {
	return bot.PhrasePrompt{}, false, nil
}

func (s *stubBot) QuestionForm(context.Context, bot.Click) (cardpkg.QuestionNotice, error) {
	return cardpkg.QuestionNotice{}, nil
}
func (s *stubBot) AnswerQuestion(context.Context, bot.Click, []string) error { return nil }
func (s *stubBot) DeclineQuestion(context.Context, bot.Click) error          { return nil }
