package slack

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/airlockhq/airlock/bot"
	"github.com/airlockhq/airlock/confirm"
	"github.com/airlockhq/airlock/internal/pgtest"
	"github.com/airlockhq/airlock/model/modeltest"
	"github.com/airlockhq/airlock/storage"
)

// Recovery after a kill, end to end with the real bot, the real slack-go
// client and the fake Slack, on each database: a card posted and not
// recorded is adopted wherever it was posted (here the approvals
// channel), its copies (the thread's pointer, approvers' DM copies) are
// posted once, a DM copy posted and not recorded is adopted, and only
// Airlock's own messages are adopted.

const approvalsChan = "C0APPROVE"

// adoptChannels routes #ops' cards to the approvals channel, with a copy
// in alice's and carol's DMs.
func adoptChannels() *bot.Channels {
	return bot.NewChannels([]bot.Channel{{Platform: Platform, ID: chanOps, Approvers: []string{alice, carol},
		ApprovalsChannel: approvalsChan, Notify: []string{bot.NotifyDM}}})
}

// onBothDBs runs fn on SQLite and, when AIRLOCK_TEST_POSTGRES_DSN is set,
// on a fresh PostgreSQL schema: driver and DSN of the database.
func onBothDBs(t *testing.T, fn func(t *testing.T, driver, dsn string)) {
	t.Run("sqlite", func(t *testing.T) { fn(t, "sqlite", filepath.Join(t.TempDir(), "airlock.db")) })
	t.Run("postgres", func(t *testing.T) {
		pg := os.Getenv("AIRLOCK_TEST_POSTGRES_DSN")
		if pg == "" {
			t.Skip("set AIRLOCK_TEST_POSTGRES_DSN (CI does) to run on PostgreSQL")
		}
		fn(t, "postgres", pgtest.FreshSchema(t, pg, "slackadopt"))
	})
}

// adoptRig is a database, the fake Slack and the model: what outlives a
// process. Each process (start) is a bot and an adapter on them.
type adoptRig struct {
	t           *testing.T
	fake        *fakeSlack
	driver, dsn string
	model       *modeltest.Scripted
	deploy      *countTool
	seq         atomic.Int64
}

type adoptProc struct {
	db  *storage.DB
	bot *bot.Bot
	ad  *Adapter
}

func newAdoptRig(t *testing.T, driver, dsn string) *adoptRig {
	return &adoptRig{t: t, fake: newFakeSlack(t), driver: driver, dsn: dsn, model: modeltest.NewScripted(), deploy: &countTool{name: "deploy", confirm: true}}
}

// start brings up a process; trace is its bot's trace hook.
func (r *adoptRig) start(trace func(string)) *adoptProc {
	r.t.Helper()
	ctx := context.Background()
	db, err := storage.Open(ctx, r.driver, r.dsn)
	if err != nil {
		r.t.Fatal(err)
	}
	r.t.Cleanup(func() { db.Close() })
	b, err := bot.New(bot.Config{Store: db, Model: r.model, Tools: toolSet{"deploy": r.deploy}, Channels: adoptChannels(),
		Timeout: 30 * time.Minute, Trace: trace, WorkerID: fmt.Sprintf("process-%d", r.seq.Add(1))})
	if err != nil {
		r.t.Fatal(err)
	}
	ad, err := New(Config{Mode: ModeHTTP, BotToken: testBotToken, SigningSecret: testSecret, APIURL: r.fake.apiURL(),
		HTTPClient: &http.Client{Timeout: 10 * time.Second}}, b, db)
	if err != nil {
		r.t.Fatal(err)
	}
	b.Register(Platform, ad)
	if err := ad.Start(ctx); err != nil {
		r.t.Fatal(err)
	}
	return &adoptProc{db: db, bot: b, ad: ad}
}

// killedAt asks a process for the deploy; it dies (its goroutine ends,
// running only its deferred cleanup, as a kill leaves the database) when
// its bot reaches point.
func (r *adoptRig) killedAt(point string) {
	r.t.Helper()
	r.model.PushCalls(tc("call_deploy", "deploy", `{"service":"api"}`)).PushText("Deployed.")
	p := r.start(func(at string) {
		if at == point {
			runtime.Goexit()
		}
	})
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = p.bot.HandleTurn(context.Background(), bot.Turn{Platform: Platform, Channel: chanOps, Thread: mentionTS, User: bob, Text: "deploy api"})
	}()
	<-done
}

// restart brings up a new process and runs its recovery.
func (r *adoptRig) restart() *adoptProc {
	r.t.Helper()
	p := r.start(nil)
	if err := p.bot.RecoverBatches(context.Background()); err != nil {
		r.t.Fatal(err)
	}
	return p
}

// cardsIn are the cards (with their copies) the bot posted in channel
// (posts Slack refused aside).
func (r *adoptRig) cardsIn(channel string) []apiCall {
	var out []apiCall
	for _, c := range r.fake.callsTo("chat.postMessage") {
		if _, shown := r.fake.Shown(channel, c.TS); shown && c.param("channel") == channel && isCard(c) {
			out = append(out, c)
		}
	}
	return out
}

// pointers are the messages without a card the bot posted in the thread.
func (r *adoptRig) pointers() []apiCall {
	var out []apiCall
	for _, c := range r.fake.callsTo("chat.postMessage") {
		if c.param("channel") == chanOps && c.param("thread_ts") == mentionTS && !isCard(c) && c.param("text") != "Deployed." {
			out = append(out, c)
		}
	}
	return out
}

// allowOn clicks alice's Allow on a posted card message.
func (r *adoptRig) allowOn(p *adoptProc, user string, msg apiCall) error {
	return p.bot.Decide(context.Background(), bot.Click{Platform: Platform, Channel: msg.param("channel"), User: user,
		Ref: refByStyle(r.t, msg, "primary"), Message: CardRef(msg.param("channel"), msg.TS), Allow: true})
}

// wantOnce checks the card is in the approvals channel once, the pointer
// in the thread once and a copy in each approver's DM once.
func (r *adoptRig) wantOnce() {
	r.t.Helper()
	for _, ch := range []string{approvalsChan, "DALICE", "DCAROL"} {
		if n := len(r.cardsIn(ch)); n != 1 {
			r.t.Errorf("%d cards posted in %s, want 1", n, ch)
		}
	}
	if n := len(r.pointers()); n != 1 {
		r.t.Errorf("%d pointers posted in the thread, want 1", n)
	}
	if n := len(r.cardsIn(chanOps)); n != 0 {
		r.t.Errorf("%d cards in the thread, want none (they go to the approvals channel)", n)
	}
}

// Killed after posting the card in the approvals channel, before
// recording it: the restarted process adopts that card (not posted
// again), and posts its pointer and its DM copies once; the adopted
// card's Allow counts.
func TestAdoptCardInApprovalsChannel(t *testing.T) {
	onBothDBs(t, func(t *testing.T, driver, dsn string) {
		r := newAdoptRig(t, driver, dsn)
		r.killedAt("card_posted")
		if n := len(r.cardsIn(approvalsChan)); n != 1 || len(r.pointers()) != 0 || len(r.cardsIn("DALICE")) != 0 {
			t.Fatalf("before the restart: %d cards, %d pointers, %d DM copies", n, len(r.pointers()), len(r.cardsIn("DALICE")))
		}
		p := r.restart()
		r.wantOnce()
		if t.Failed() {
			return
		}
		if err := r.allowOn(p, alice, r.cardsIn(approvalsChan)[0]); err != nil {
			t.Fatalf("Allow on the adopted card: %v", err)
		}
		if n := r.deploy.runs.Load(); n != 1 {
			t.Fatalf("deploy ran %d times", n)
		}
		// Recovery again: nothing more is posted.
		if err := p.bot.RecoverBatches(context.Background()); err != nil {
			t.Fatal(err)
		}
		r.wantOnce()
	})
}

// Killed after posting alice's DM copy, before recording it: the
// restarted process adopts that copy (not posted again) and posts
// carol's; Allow on the adopted copy counts.
func TestAdoptDMCopy(t *testing.T) {
	onBothDBs(t, func(t *testing.T, driver, dsn string) {
		r := newAdoptRig(t, driver, dsn)
		r.killedAt("copy_posted")
		if len(r.cardsIn("DALICE")) != 1 || len(r.cardsIn("DCAROL")) != 0 {
			t.Fatalf("before the restart: %d copies for alice, %d for carol", len(r.cardsIn("DALICE")), len(r.cardsIn("DCAROL")))
		}
		p := r.restart()
		r.wantOnce()
		if t.Failed() {
			return
		}
		if err := r.allowOn(p, alice, r.cardsIn("DALICE")[0]); err != nil {
			t.Fatalf("Allow on the adopted DM copy: %v", err)
		}
		if n := r.deploy.runs.Load(); n != 1 {
			t.Fatalf("deploy ran %d times", n)
		}
	})
}

// lookAlike is a message's blocks carrying the Allow button of a call,
// as a person pasting a card (or another app) could post them.
func lookAlike(t *testing.T, ref string) json.RawMessage {
	blocks, err := json.Marshal([]any{
		map[string]any{"type": "section", "block_id": "header", "text": map[string]any{"type": "mrkdwn", "text": "*Approval needed*"}},
		map[string]any{"type": "actions", "elements": []any{map[string]any{"type": "button", "action_id": ActionAllow,
			"text": map[string]any{"type": "plain_text", "text": "Allow"}, "style": "primary", "value": ref}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return blocks
}

// A card that was never posted (its post failed) is posted by recovery,
// whatever look-alikes wait where it would be: a person's message and
// another app's, each carrying the batch's buttons, in the approvals
// channel, the thread and an approver's DM, are never adopted; their
// buttons do not count, the real card's do.
func TestAdoptNoLookAlike(t *testing.T) {
	onBothDBs(t, func(t *testing.T, driver, dsn string) {
		r := newAdoptRig(t, driver, dsn)
		r.fake.answerNext("chat.postMessage", fakeAnswer{status: http.StatusOK, body: `{"ok": false, "error": "channel_not_found"}`})
		r.killedAt("never")
		first := r.start(nil)
		ids, err := first.db.UncardedBatches(context.Background())
		if err != nil || len(ids) != 1 || len(r.cardsIn(approvalsChan)) != 0 {
			t.Fatalf("a batch left without a card: %v, %v; %d cards", ids, err, len(r.cardsIn(approvalsChan)))
		}
		batch, err := first.db.Batch(context.Background(), ids[0])
		if err != nil {
			t.Fatal(err)
		}
		ref := confirm.RefAt(batch.ID, 0, batch.Calls[0].Revision)
		fakes := map[string]string{
			"a person's in the approvals channel":    CardRef(approvalsChan, r.fake.PostAs(approvalsChan, "", mallory, "", "Approval needed", lookAlike(t, ref))),
			"another app's in the approvals channel": CardRef(approvalsChan, r.fake.PostAs(approvalsChan, "", "UOTHERBOT", "BOTHER", "Approval needed", lookAlike(t, ref))),
			"a person's in the thread":               CardRef(chanOps, r.fake.PostAs(chanOps, mentionTS, mallory, "", "Approval needed", lookAlike(t, ref))),
			"alice's own paste in her DM":            CardRef("DALICE", r.fake.PostAs("DALICE", "", alice, "", "Approval needed", lookAlike(t, ref))),
		}
		p := r.restart()
		r.wantOnce()
		for what, msg := range fakes {
			ch, _, _ := ParseCardRef(msg)
			err := p.bot.Decide(context.Background(), bot.Click{Platform: Platform, Channel: ch, User: alice, Ref: ref, Message: msg, Allow: true})
			if !errors.Is(err, bot.ErrWrongChannel) {
				t.Errorf("Allow on %s look-alike: %v, want refused as not the batch's card", what, err)
			}
		}
		if n := r.deploy.runs.Load(); n != 0 {
			t.Fatalf("a look-alike's Allow ran the deploy (%d runs)", n)
		}
		if err := r.allowOn(p, alice, r.cardsIn(approvalsChan)[0]); err != nil {
			t.Fatalf("Allow on the card recovery posted: %v", err)
		}
		if n := r.deploy.runs.Load(); n != 1 {
			t.Fatalf("deploy ran %d times", n)
		}
	})
}

// awayOnce is a store whose first record of a card finds the database
// away.
type awayOnce struct {
	bot.Store
	failed atomic.Bool
}

func (s *awayOnce) SetCardRefWithCopies(ctx context.Context, batchID, ref string) error {
	if s.failed.CompareAndSwap(false, true) {
		return fmt.Errorf("set card ref: %w", confirm.ErrUnavailable)
	}
	return s.Store.SetCardRefWithCopies(ctx, batchID, ref)
}

// A card posted in the moment the database went away is stored once it
// answers (not posted again), and then gets its pointer and its DM
// copies, once.
func TestKeptCardGetsItsCopies(t *testing.T) {
	onBothDBs(t, func(t *testing.T, driver, dsn string) {
		r := newAdoptRig(t, driver, dsn)
		r.model.PushCalls(tc("call_deploy", "deploy", `{"service":"api"}`)).PushText("Deployed.")
		p := r.start(nil)
		away := &awayOnce{Store: p.db}
		b, err := bot.New(bot.Config{Store: away, Model: r.model, Tools: toolSet{"deploy": r.deploy}, Channels: adoptChannels(),
			Timeout: 30 * time.Minute, WorkerID: "away"})
		if err != nil {
			t.Fatal(err)
		}
		b.Register(Platform, p.ad)
		err = b.HandleTurn(context.Background(), bot.Turn{Platform: Platform, Channel: chanOps, Thread: mentionTS, User: bob, Text: "deploy api"})
		if !errors.Is(err, confirm.ErrUnavailable) {
			t.Fatalf("turn: %v, want the database away", err)
		}
		for _, j := range b.Jobs(time.Second) {
			if j.Name == bot.JobCardSync {
				if err := j.Run(context.Background()); err != nil {
					t.Fatal(err)
				}
			}
		}
		if err := b.RecoverBatches(context.Background()); err != nil {
			t.Fatal(err)
		}
		r.wantOnce()
	})
}

// Killed after posting alice's DM copy, before recording it, and the
// request is decided on the card before any recovery runs: the copy
// posted but not recorded must not go on offering Allow. Recovery adopts
// it although the batch no longer waits, posts no new copy, and card
// sync brings it to the decided state.
func TestAdoptDMCopyOfADecidedCard(t *testing.T) {
	onBothDBs(t, func(t *testing.T, driver, dsn string) {
		r := newAdoptRig(t, driver, dsn)
		r.killedAt("copy_posted")
		if len(r.cardsIn("DALICE")) != 1 || len(r.cardsIn(approvalsChan)) != 1 {
			t.Fatalf("before the restart: %d copies for alice, %d cards", len(r.cardsIn("DALICE")), len(r.cardsIn(approvalsChan)))
		}
		p := r.start(nil) // no recovery yet
		if err := r.allowOn(p, alice, r.cardsIn(approvalsChan)[0]); err != nil {
			t.Fatalf("Allow on the card: %v", err)
		}
		if n := r.deploy.runs.Load(); n != 1 {
			t.Fatalf("deploy ran %d times", n)
		}
		if err := p.bot.RecoverBatches(context.Background()); err != nil {
			t.Fatal(err)
		}
		for _, j := range p.bot.Jobs(time.Second) {
			if j.Name == bot.JobCardSync {
				if err := j.Run(context.Background()); err != nil {
					t.Fatal(err)
				}
			}
		}
		if n := len(r.cardsIn("DCAROL")); n != 0 {
			t.Errorf("%d copies posted for carol after the request was decided, want none", n)
		}
		copies := r.cardsIn("DALICE")
		if len(copies) != 1 {
			t.Fatalf("%d copies in alice's DM, want the one posted before the kill", len(copies))
		}
		shown, _ := r.fake.Shown("DALICE", copies[0].TS)
		if strings.Contains(shown.Param("blocks"), ActionAllow) {
			t.Errorf("alice's DM copy still offers Allow after the request was decided and recovery ran: %s", shown.Param("blocks"))
		}
	})
}
