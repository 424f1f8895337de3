package discord

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/airlockhq/airlock/adapters/discord/discordtest"
	"github.com/airlockhq/airlock/bot"
	"github.com/airlockhq/airlock/card"
	"github.com/airlockhq/airlock/confirm"
)

// A card update's answer in the bot's classes, through discordgo against
// the fake: a route's 429 is a RateLimitedError with its retry_after,
// returned at once (discordgo does not sleep it out), for the channel; an
// Unknown Message is ErrMessageGone; a 5xx is neither (the job backs off).
func TestCardUpdateAnswers(t *testing.T) {
	f := newFakeDiscord(t, false)
	a := nopAdapter(t, f)
	ctx := context.Background()
	th := bot.Thread{Platform: Platform, Channel: approvalsCh}
	ref, err := a.PostCard(ctx, th, sampleCard())
	if err != nil {
		t.Fatal(err)
	}
	edits := func() int { return len(f.Recorded("PATCH", "/channels/"+approvalsCh+"/messages/"+ref)) }

	f.AnswerEdits(discordtest.RateLimited(1500 * time.Millisecond))
	start := time.Now()
	err = a.UpdateCard(ctx, th, ref, sampleCard())
	var rl *bot.RateLimitedError
	if !errors.As(err, &rl) || rl.RetryAfter != 1500*time.Millisecond || rl.Platform != Platform || rl.Scope != approvalsCh || rl.Method == "" {
		t.Fatalf("429: %#v (%v)", rl, err)
	}
	if time.Since(start) > time.Second || edits() != 1 {
		t.Fatalf("the 429 was waited out or retried (%d edits, %v)", edits(), time.Since(start))
	}
	if errors.Is(err, bot.ErrMessageGone) {
		t.Fatal("a rate limit is not a message gone")
	}

	f.AnswerEdits(discordtest.UnknownMessage)
	if err := a.UpdateCard(ctx, th, ref, sampleCard()); !errors.Is(err, bot.ErrMessageGone) || errors.As(err, &rl) {
		t.Fatalf("Unknown Message: %v", err)
	}
	f.AnswerEdits(discordtest.UnknownMessage)
	if err := a.UpdatePointer(ctx, th, ref, card.Pointer{BatchID: "b1", Channel: approvalsCh}); !errors.Is(err, bot.ErrMessageGone) {
		t.Fatalf("Unknown Message of a pointer: %v", err)
	}

	f.AnswerEdits(discordtest.Answer{Status: http.StatusInternalServerError, Body: `{"message": "500: Internal Server Error", "code": 0}`})
	if err := a.UpdateCard(ctx, th, ref, sampleCard()); err == nil || errors.Is(err, bot.ErrMessageGone) || errors.As(err, &rl) {
		t.Fatalf("5xx: %v", err)
	}
	if err := a.UpdateCard(ctx, th, ref, sampleCard()); err != nil {
		t.Fatalf("after the faults: %v", err)
	}
}

// A run message's and a grant notice's edits answer in the bot's
// classes, as a card's do (card sync renders them): a route's 429 is
// returned at once as a RateLimitedError for the channel, not slept out
// by discordgo; Unknown Message is ErrMessageGone.
func TestRunAndGrantUpdateAnswers(t *testing.T) {
	f := newFakeDiscord(t, false)
	a := nopAdapter(t, f)
	ctx := context.Background()
	th := bot.Thread{Platform: Platform, Channel: channelID}
	run := card.Run{ID: "run1", Runbook: "restart", RequestedBy: requester, Status: confirm.RunbookRunning}
	notice := card.GrantNotice{Ref: confirm.GrantRef("g1"), GrantID: "g1", Tool: "deploy", By: requester, For: requester, Until: time.Now().Add(time.Hour)}
	runRef, err := a.PostRun(ctx, th, run)
	if err != nil {
		t.Fatal(err)
	}
	noticeRef, err := a.PostGrantNotice(ctx, th, notice)
	if err != nil {
		t.Fatal(err)
	}
	for what, c := range map[string]struct {
		ref    string
		update func() error
	}{
		"run message":  {runRef, func() error { return a.UpdateRun(ctx, th, runRef, run) }},
		"grant notice": {noticeRef, func() error { return a.UpdateGrantNotice(ctx, th, noticeRef, notice) }},
	} {
		edits := func() int { return len(f.Recorded("PATCH", "/channels/"+channelID+"/messages/"+c.ref)) }
		before := edits()
		f.AnswerEdits(discordtest.RateLimited(1500 * time.Millisecond))
		start := time.Now()
		err := c.update()
		var rl *bot.RateLimitedError
		if !errors.As(err, &rl) || rl.RetryAfter != 1500*time.Millisecond || rl.Scope != channelID {
			t.Fatalf("%s, 429: %v", what, err)
		}
		if time.Since(start) > time.Second || edits()-before != 1 {
			t.Fatalf("%s: the 429 was waited out or retried (%d edits, %v)", what, edits()-before, time.Since(start))
		}
		f.AnswerEdits(discordtest.UnknownMessage)
		if err := c.update(); !errors.Is(err, bot.ErrMessageGone) {
			t.Fatalf("%s, Unknown Message: %v", what, err)
		}
		if err := c.update(); err != nil {
			t.Fatalf("%s after the faults: %v", what, err)
		}
	}
}

// A card posted as several messages answers as one card, as on Slack: a
// message of it deleted is skipped and the others still updated (the
// card is not gone); only every message gone is the card gone; a rate
// limit on the first message stops the update there (card sync sends
// them all after it).
func TestCardOfSeveralMessagesUpdates(t *testing.T) {
	f := newFakeDiscord(t, false)
	a := nopAdapter(t, f)
	ctx := context.Background()
	c := longCard()
	th := bot.Thread{Platform: Platform, Channel: approvalsCh}
	ref, err := a.PostCard(ctx, th, c)
	if err != nil {
		t.Fatal(err)
	}
	ids := strings.Split(ref, ",")
	if len(ids) < 2 {
		t.Fatalf("the card was not split: %q", ref)
	}
	edits := func() int {
		n := 0
		for _, id := range ids {
			n += len(f.Recorded("PATCH", "/channels/"+approvalsCh+"/messages/"+id))
		}
		return n
	}

	f.AnswerEdits(discordtest.UnknownMessage)
	if err := a.UpdateCard(ctx, th, ref, c); err != nil {
		t.Fatalf("one message of the card deleted: %v, want the others updated and no error", err)
	}
	if n := edits(); n != len(ids) {
		t.Fatalf("%d edits, want every message's (%d)", n, len(ids))
	}

	gone := make([]discordtest.Answer, len(ids))
	for i := range gone {
		gone[i] = discordtest.UnknownMessage
	}
	f.AnswerEdits(gone...)
	if err := a.UpdateCard(ctx, th, ref, c); !errors.Is(err, bot.ErrMessageGone) {
		t.Fatalf("every message deleted: %v, want ErrMessageGone", err)
	}

	before := edits()
	f.AnswerEdits(discordtest.RateLimited(time.Second))
	var rl *bot.RateLimitedError
	if err := a.UpdateCard(ctx, th, ref, c); !errors.As(err, &rl) {
		t.Fatalf("rate limited: %v", err)
	}
	if n := edits() - before; n != 1 {
		t.Fatalf("%d edits after a rate limit on the first message, want it to stop there (1)", n)
	}
}
