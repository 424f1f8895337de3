package discord

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bwmarrin/discordgo"

	"github.com/airlockhq/airlock/bot"
	"github.com/airlockhq/airlock/card"
	"github.com/airlockhq/airlock/confirm"
	"github.com/airlockhq/airlock/internal/pgtest"
	"github.com/airlockhq/airlock/model/modeltest"
	"github.com/airlockhq/airlock/storage"
	"github.com/airlockhq/airlock/tools"
)

// Recovery after a kill on Discord, end to end with the real bot, the
// real discordgo client and the fake Discord, on each database: a card
// posted and not recorded is adopted in its thread and in an approvals
// channel (found through GET /channels/{id}/messages), its copies are
// posted once, a DM copy posted and not recorded is adopted, and only
// the bot's own messages are adopted.

// onBothDBs runs fn on SQLite and, when AIRLOCK_TEST_POSTGRES_DSN is set,
// on a fresh PostgreSQL schema: driver and DSN of the database.
func onBothDBs(t *testing.T, fn func(t *testing.T, driver, dsn string)) {
	t.Run("sqlite", func(t *testing.T) { fn(t, "sqlite", filepath.Join(t.TempDir(), "airlock.db")) })
	t.Run("postgres", func(t *testing.T) {
		pg := os.Getenv("AIRLOCK_TEST_POSTGRES_DSN")
		if pg == "" {
			t.Skip("set AIRLOCK_TEST_POSTGRES_DSN (CI does) to run on PostgreSQL")
		}
		fn(t, "postgres", pgtest.FreshSchema(t, pg, "discordadopt"))
	})
}

// adoptRig is a database, the fake Discord and the model: what outlives
// a process. Each process (start) is a bot and an adapter on them.
type adoptRig struct {
	t           *testing.T
	fd          *fakeDiscord
	driver, dsn string
	channels    []bot.Channel
	model       *modeltest.Scripted
	tool        *countTool
	seq         atomic.Int64
}

type adoptProc struct {
	db  *storage.DB
	bot *bot.Bot
	a   *Adapter
}

func newAdoptRig(t *testing.T, driver, dsn string, channels []bot.Channel) *adoptRig {
	return &adoptRig{t: t, fd: newFakeDiscord(t, false), driver: driver, dsn: dsn, channels: channels,
		model: modeltest.NewScripted(), tool: &countTool{}}
}

// postFails is the adapter whose card posts fail: a process that could
// not post the card.
type postFails struct{ *Adapter }

func (postFails) PostCard(context.Context, bot.Thread, card.Card) (string, error) {
	return "", errors.New("discord: post card: 503 Service Unavailable")
}

// start brings up a process; trace is its bot's trace hook. With
// failPosts its card posts fail.
func (r *adoptRig) start(trace func(string), failPosts bool) *adoptProc {
	r.t.Helper()
	ctx := context.Background()
	db, err := storage.Open(ctx, r.driver, r.dsn)
	if err != nil {
		r.t.Fatal(err)
	}
	r.t.Cleanup(func() { db.Close() })
	set, err := tools.New(nil, tools.Options{})
	if err != nil {
		r.t.Fatal(err)
	}
	if err := set.Add(r.tool); err != nil {
		r.t.Fatal(err)
	}
	b, err := bot.New(bot.Config{Store: db, Model: r.model, Tools: set, Channels: bot.NewChannels(r.channels),
		Timeout: 10 * time.Minute, Trace: trace, WorkerID: fmt.Sprintf("process-%d", r.seq.Add(1))})
	if err != nil {
		r.t.Fatal(err)
	}
	a, err := New(Config{Token: testToken, APIURL: r.fd.APIURL(), Events: db}, b)
	if err != nil {
		r.t.Fatal(err)
	}
	var p bot.Platform = a
	if failPosts {
		p = postFails{a}
	}
	b.Register(Platform, p)
	return &adoptProc{db: db, bot: b, a: a}
}

// killedAt asks a process for the restart in the thread; it dies (its
// goroutine ends, running only its deferred cleanup, as a kill leaves
// the database) when its bot reaches point.
func (r *adoptRig) killedAt(point string, failPosts bool) {
	r.t.Helper()
	r.model.PushCalls(tc("c1", "restart_service", `{"service":"api"}`))
	r.model.PushText("Restarted api.")
	p := r.start(func(at string) {
		if at == point {
			runtime.Goexit()
		}
	}, failPosts)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = p.bot.HandleTurn(context.Background(), bot.Turn{Platform: Platform, Channel: channelID, Thread: threadCh, User: requester, Text: "restart api"})
	}()
	<-done
}

// restart brings up a new process and runs its recovery.
func (r *adoptRig) restart() *adoptProc {
	r.t.Helper()
	p := r.start(nil, false)
	if err := p.bot.RecoverBatches(context.Background()); err != nil {
		r.t.Fatal(err)
	}
	return p
}

// posted are the bot's messages posted in channel, with buttons (cards)
// or without.
func (r *adoptRig) posted(channel string, buttons bool) []postedCard {
	var out []postedCard
	for _, c := range r.fd.Recorded("POST", "/channels/"+channel+"/messages") {
		if c.Status == 200 && strings.Contains(string(c.Body), `"components":[{`) == buttons {
			out = append(out, decodeMessage(r.t, c))
		}
	}
	return out
}

// allowOn is user's Allow on a posted card message in channel.
func (r *adoptRig) allowOn(p *adoptProc, channel, user string, roles []string, m postedCard) error {
	allow, _, _ := buttonIDs(r.t, m.components)
	_, ref, _ := parseCustomID(allow[0])
	return p.bot.Decide(context.Background(), bot.Click{Platform: Platform, Channel: channel, User: user, Roles: roles,
		Ref: ref, Message: m.id, Allow: true})
}

// Killed after posting the card in the thread, before recording it: the
// restarted process finds the card among the thread's messages and adopts
// it instead of posting a second one; its Allow counts.
func TestAdoptCardInThread(t *testing.T) {
	onBothDBs(t, func(t *testing.T, driver, dsn string) {
		r := newAdoptRig(t, driver, dsn, defaultChannels())
		r.killedAt("card_posted", false)
		if n := len(r.posted(threadCh, true)); n != 1 {
			t.Fatalf("%d cards before the restart", n)
		}
		p := r.restart()
		cards := r.posted(threadCh, true)
		if len(cards) != 1 {
			t.Fatalf("%d cards in the thread after recovery, want the first adopted", len(cards))
		}
		if err := r.allowOn(p, threadCh, moderator, []string{modRole}, cards[0]); err != nil {
			t.Fatalf("Allow on the adopted card: %v", err)
		}
		if n := r.tool.runs.Load(); n != 1 {
			t.Fatalf("the tool ran %d times", n)
		}
	})
}

// routed sends the ops channel's cards to the approvals channel, with a
// copy in two approvers' DMs.
func routed() []bot.Channel {
	return []bot.Channel{{Platform: Platform, ID: channelID, Approvers: []string{dmUser, moderator},
		ApprovalsChannel: approvalsCh, Notify: []string{bot.NotifyDM}}}
}

// wantOnce checks the card is in the approvals channel once, the pointer
// in the thread once and a copy in each approver's DM once.
func (r *adoptRig) wantOnce() {
	r.t.Helper()
	if n := len(r.posted(approvalsCh, true)); n != 1 {
		r.t.Errorf("%d cards in the approvals channel, want 1", n)
	}
	if n := len(r.posted(threadCh, false)); n != 1 {
		r.t.Errorf("%d pointers in the thread, want 1", n)
	}
	if n := len(r.posted(threadCh, true)); n != 0 {
		r.t.Errorf("%d cards in the thread, want none", n)
	}
	for _, u := range []string{dmUser, moderator} {
		if n := len(r.posted(r.fd.DMOf(u), true)); n != 1 {
			r.t.Errorf("%d copies in %s's DM, want 1", n, u)
		}
	}
}

// Killed after posting the card in the approvals channel, before
// recording it: the restarted process adopts it there and posts its
// pointer and its DM copies once; the adopted card's Allow counts.
func TestAdoptCardInApprovalsChannel(t *testing.T) {
	onBothDBs(t, func(t *testing.T, driver, dsn string) {
		r := newAdoptRig(t, driver, dsn, routed())
		r.killedAt("card_posted", false)
		p := r.restart()
		r.wantOnce()
		if t.Failed() {
			return
		}
		if err := r.allowOn(p, approvalsCh, dmUser, nil, r.posted(approvalsCh, true)[0]); err != nil {
			t.Fatalf("Allow on the adopted card: %v", err)
		}
		if n := r.tool.runs.Load(); n != 1 {
			t.Fatalf("the tool ran %d times", n)
		}
	})
}

// Killed after posting the first approver's DM copy, before recording
// it: the restarted process adopts that copy and posts the other's; an
// Allow on the adopted copy counts.
func TestAdoptDMCopy(t *testing.T) {
	onBothDBs(t, func(t *testing.T, driver, dsn string) {
		r := newAdoptRig(t, driver, dsn, routed())
		r.killedAt("copy_posted", false)
		if len(r.posted(r.fd.DMOf(dmUser), true)) != 1 || r.fd.DMOf(moderator) != "" {
			t.Fatal("the kill did not come after the first DM copy")
		}
		p := r.restart()
		r.wantOnce()
		if t.Failed() {
			return
		}
		dm := r.fd.DMOf(dmUser)
		if err := r.allowOn(p, dm, dmUser, nil, r.posted(dm, true)[0]); err != nil {
			t.Fatalf("Allow on the adopted DM copy: %v", err)
		}
		if n := r.tool.runs.Load(); n != 1 {
			t.Fatalf("the tool ran %d times", n)
		}
	})
}

// A card that was never posted is posted by recovery, whatever
// look-alikes wait in its thread: a person's message and another bot's,
// each carrying the batch's buttons, and the bot's own message merely
// naming them, are never adopted; their buttons do not count.
func TestAdoptNoLookAlike(t *testing.T) {
	onBothDBs(t, func(t *testing.T, driver, dsn string) {
		r := newAdoptRig(t, driver, dsn, defaultChannels())
		r.killedAt("never", true)
		first := r.start(nil, false)
		ids, err := first.db.UncardedBatches(context.Background())
		if err != nil || len(ids) != 1 || len(r.posted(threadCh, true)) != 0 {
			t.Fatalf("a batch left without a card: %v, %v", ids, err)
		}
		batch, err := first.db.Batch(context.Background(), ids[0])
		if err != nil {
			t.Fatal(err)
		}
		ref := confirm.RefAt(batch.ID, 0, batch.Calls[0].Revision)
		row := []any{map[string]any{"type": 1, "components": []any{
			map[string]any{"type": 2, "style": 3, "label": "Allow", "custom_id": customID(actionAllow, ref)}}}}
		fakes := map[string]string{
			"a person's":     r.fd.PostAs(threadCh, outsider, false, "Approval needed", row),
			"another bot's":  r.fd.PostAs(threadCh, peerUser, true, "Approval needed", row),
			"the bot's text": r.fd.PostAs(threadCh, botID, true, "see "+customID(actionAllow, ref), nil),
		}
		p := r.restart()
		cards := r.posted(threadCh, true)
		if len(cards) != 1 {
			t.Fatalf("%d cards posted by recovery, want 1", len(cards))
		}
		for what, id := range fakes {
			err := p.bot.Decide(context.Background(), bot.Click{Platform: Platform, Channel: threadCh, User: moderator, Roles: []string{modRole},
				Ref: ref, Message: id, Allow: true})
			if !errors.Is(err, bot.ErrWrongChannel) {
				t.Errorf("Allow on %s look-alike: %v, want refused as not the batch's card", what, err)
			}
		}
		if n := r.tool.runs.Load(); n != 0 {
			t.Fatalf("a look-alike's Allow ran the tool (%d runs)", n)
		}
		if err := r.allowOn(p, threadCh, moderator, []string{modRole}, cards[0]); err != nil {
			t.Fatalf("Allow on the card recovery posted: %v", err)
		}
		if n := r.tool.runs.Load(); n != 1 {
			t.Fatalf("the tool ran %d times", n)
		}
	})
}

// FindCard on a card split over several messages returns the first
// posting's messages in order, as PostCard returned them, and nothing in
// another channel or before since; a channel the bot may not read is
// ErrCannotLook.
func TestFindCardOfSeveralMessages(t *testing.T) {
	f := newFakeDiscord(t, false)
	a := nopAdapter(t, f)
	ctx := context.Background()
	c := longCard()
	th := bot.Thread{Platform: Platform, Channel: channelID, Thread: threadCh}
	f.PostAs(threadCh, botID, true, "the agent's answer", nil)
	first, err := a.PostCard(ctx, th, c)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(first, ",") {
		t.Fatalf("the card was not split: %q", first)
	}
	if _, err := a.PostCard(ctx, th, c); err != nil {
		t.Fatal(err)
	}
	got, found, err := a.FindCard(ctx, th, c.BatchID, time.Time{})
	if err != nil || !found || got != first {
		t.Fatalf("FindCard = %q, %v, %v; want the first posting: %q", got, found, err, first)
	}
	// since: the messages listed are those after it (the fake's ids are
	// far in the future of any clock, so a time after them finds none).
	last, _ := discordgo.SnowflakeTimestamp("9100000000000000000")
	if _, found, _ := a.FindCard(ctx, th, c.BatchID, last); found {
		t.Fatal("found a card posted before since")
	}
	if _, found, _ := a.FindCard(ctx, bot.Thread{Platform: Platform, Channel: approvalsCh}, c.BatchID, time.Time{}); found {
		t.Fatal("found the card in another channel")
	}
	if _, found, _ := a.FindCard(ctx, th, "otherbatchotherbatchotherb", time.Time{}); found {
		t.Fatal("found a card of another batch")
	}
	for _, code := range []int{discordgo.ErrCodeMissingAccess, discordgo.ErrCodeMissingPermissions} {
		err := classifyLook(&discordgo.RESTError{Message: &discordgo.APIErrorMessage{Code: code}})
		if !errors.Is(err, bot.ErrCannotLook) {
			t.Errorf("code %d: %v, want ErrCannotLook", code, err)
		}
	}
	if err := classifyLook(&discordgo.RESTError{Message: &discordgo.APIErrorMessage{Code: 0}}); errors.Is(err, bot.ErrCannotLook) {
		t.Error("a 5xx is not ErrCannotLook")
	}
}
