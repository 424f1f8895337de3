package slack

import (
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/airlockhq/airlock/bot"
	cardpkg "github.com/airlockhq/airlock/card"
	"github.com/airlockhq/airlock/confirm"
)

// A card's or pointer's update answers in the bot's classes, through
// slack-go against the fake: a 429 is a RateLimitedError with its
// Retry-After, returned at once (the client does not wait it out, so the
// card-sync job sends the latest state later); message_not_found and
// channel_not_found are ErrMessageGone; a 5xx is neither (the job backs
// off). Other messages' updates still ride out a 429 in the client.
func TestCardUpdateAnswers(t *testing.T) {
	ad, fake := newUpdater(t)
	ctx := t.Context()
	th := bot.Thread{Platform: Platform, Channel: "C0OPS"}
	ref := CardRef("C0OPS", "1700000000.000200")
	updates := func() int { return len(fake.callsTo("chat.update")) }

	fake.answerNext("chat.update", fakeAnswer{status: http.StatusTooManyRequests, retryAfter: "7"})
	start := time.Now()
	err := ad.UpdateCard(ctx, th, ref, pendingCard())
	var rl *bot.RateLimitedError
	if !errors.As(err, &rl) || rl.RetryAfter != 7*time.Second || rl.Platform != Platform || rl.Method != "chat.update" || rl.Scope != "" {
		t.Fatalf("429: %#v (%v)", rl, err)
	}
	if updates() != 1 || time.Since(start) > 3*time.Second {
		t.Fatalf("the 429 was retried or waited out: %d calls in %v", updates(), time.Since(start))
	}

	for _, code := range []string{"message_not_found", "channel_not_found"} {
		fake.answerNext("chat.update", fakeAnswer{status: http.StatusOK, body: `{"ok": false, "error": "` + code + `"}`})
		if err := ad.UpdateCard(ctx, th, ref, pendingCard()); !errors.Is(err, bot.ErrMessageGone) {
			t.Fatalf("%s: %v", code, err)
		}
	}
	fake.answerNext("chat.update", fakeAnswer{status: http.StatusOK, body: `{"ok": false, "error": "message_not_found"}`})
	if err := ad.UpdatePointer(ctx, th, ref, cardpkg.Pointer{BatchID: "b1", Channel: "C0APPROVE"}); !errors.Is(err, bot.ErrMessageGone) {
		t.Fatalf("pointer gone: %v", err)
	}
	fake.Down("chat.update", http.StatusBadGateway)
	if err := ad.UpdateCard(ctx, th, ref, pendingCard()); err == nil || errors.Is(err, bot.ErrMessageGone) || errors.As(err, &rl) {
		t.Fatalf("5xx: %v", err)
	}
	fake.Down("chat.update", 0)
	// A hostile error text is not a class: only Slack's own code is.
	fake.answerNext("chat.update", fakeAnswer{status: http.StatusOK, body: `{"ok": false, "error": "invalid_blocks message_not_found"}`})
	if err := ad.UpdateCard(ctx, th, ref, pendingCard()); err == nil || errors.Is(err, bot.ErrMessageGone) {
		t.Fatalf("an error merely containing message_not_found: %v", err)
	}
	if err := ad.UpdateCard(ctx, th, ref, pendingCard()); err != nil {
		t.Fatalf("after the faults: %v", err)
	}

	// A grant notice's update still waits out a 429 in the client.
	fake.answerNext("chat.update", fakeAnswer{status: http.StatusTooManyRequests, retryAfter: "0"})
	if err := ad.updateBlocks(ctx, ref, "grant notice", updateBlocks, "x"); err != nil {
		t.Fatalf("a grant notice's update after a 429: %v", err)
	}
}

// FindCard finds, through conversations.replies, the card Airlock posted
// in a thread for a batch, and nothing for another batch or thread.
func TestFindCard(t *testing.T) {
	ad, _ := newUpdater(t)
	ctx := t.Context()
	if err := ad.Start(ctx); err != nil {
		t.Fatal(err)
	}
	th := bot.Thread{Platform: Platform, Channel: "C0OPS", Thread: "1700000000.000100"}
	c := pendingCard()
	if err := ad.Post(ctx, th, "a message of the agent, no card"); err != nil {
		t.Fatal(err)
	}
	ref, err := ad.PostCard(ctx, th, c)
	if err != nil {
		t.Fatal(err)
	}
	got, found, err := ad.FindCard(ctx, th, c.BatchID)
	if err != nil || !found || got != ref {
		t.Fatalf("FindCard: %q %v %v, want %q", got, found, err, ref)
	}
	if _, found, _ := ad.FindCard(ctx, th, "otherbatch"); found {
		t.Fatal("found a card of another batch")
	}
	if _, found, _ := ad.FindCard(ctx, bot.Thread{Platform: Platform, Channel: "C0OPS", Thread: "1700000000.000999"}, c.BatchID); found {
		t.Fatal("found the card in another thread")
	}
}

// manyCalls is a waiting card of n calls, of which only every third
// waits for a person (the others ran by policy): some of its messages
// carry no button.
func manyCalls(n int) cardpkg.Card {
	c := pendingCard()
	c.Calls = nil
	for i := range n {
		call := cardpkg.Call{Ref: confirm.Ref(c.BatchID, i), Number: i + 1, Tool: "deploy", Args: "{}",
			State: cardpkg.State{Kind: cardpkg.AllowedByPolicy, At: &t0}}
		if i%3 == 0 {
			call.Flagged, call.Approvals, call.State = true, 1, cardpkg.State{Kind: cardpkg.Waiting}
		}
		c.Calls = append(c.Calls, call)
	}
	return c
}

// A card over several messages is found whole, in order, its parts
// without buttons too; a post cut short (some of its messages) is not
// found, so it is posted again rather than adopted in part.
func TestFindCardOfSeveralMessages(t *testing.T) {
	ad, _ := newUpdater(t)
	ctx := t.Context()
	if err := ad.Start(ctx); err != nil {
		t.Fatal(err)
	}
	th := bot.Thread{Platform: Platform, Channel: "C0OPS", Thread: "1700000000.000100"}
	c := manyCalls(3 * CallsPerMessage)
	ref, err := ad.PostCard(ctx, th, c)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(strings.Split(ref, ",")); n != 3 {
		t.Fatalf("posted in %d messages, want 3", n)
	}
	got, found, err := ad.FindCard(ctx, th, c.BatchID)
	if err != nil || !found || got != ref {
		t.Fatalf("FindCard: %q %v %v, want %q", got, found, err, ref)
	}

	cut := bot.Thread{Platform: Platform, Channel: "C0OPS", Thread: "1700000000.000200"}
	msgs := RenderMessages(c, nil)
	for _, m := range msgs[:2] {
		if _, err := ad.postBlocks(ctx, cut, "card", m.Blocks, m.Text); err != nil {
			t.Fatal(err)
		}
	}
	if got, found, _ := ad.FindCard(ctx, cut, c.BatchID); found {
		t.Fatalf("found %q, a card of which a message was never posted", got)
	}
}

// Every message of a card over several is updated; a deleted one is
// skipped (the card is gone only when all are); a rate limit stops the
// update at once, for the card-sync job to send it all again.
func TestUpdateCardOfSeveralMessages(t *testing.T) {
	ad, fake := newUpdater(t)
	ctx := t.Context()
	th := bot.Thread{Platform: Platform, Channel: "C0OPS", Thread: "1700000000.000100"}
	c := manyCalls(2 * CallsPerMessage)
	ref, err := ad.PostCard(ctx, th, c)
	if err != nil {
		t.Fatal(err)
	}
	parts := strings.Split(ref, ",")
	updates := func() int { return len(fake.callsTo("chat.update")) }
	if err := ad.UpdateCard(ctx, th, ref, c); err != nil || updates() != 2 {
		t.Fatalf("update: %v, %d messages updated, want 2", err, updates())
	}
	fake.answerNext("chat.update", fakeAnswer{status: http.StatusTooManyRequests, retryAfter: "7"})
	var rl *bot.RateLimitedError
	if err := ad.UpdateCard(ctx, th, ref, c); !errors.As(err, &rl) || updates() != 3 {
		t.Fatalf("429 on the first message: %v after %d updates, want the limit after 3", err, updates())
	}
	ch, ts, _ := ParseCardRef(parts[1])
	fake.Delete(ch, ts)
	if err := ad.UpdateCard(ctx, th, ref, c); err != nil {
		t.Fatalf("one message deleted: %v", err)
	}
	if shown, _ := fake.Shown(ParseCardRefMust(t, parts[0])); shown.Method != "chat.update" {
		t.Fatal("the message left was not updated")
	}
	ch, ts, _ = ParseCardRef(parts[0])
	fake.Delete(ch, ts)
	if err := ad.UpdateCard(ctx, th, ref, c); !errors.Is(err, bot.ErrMessageGone) {
		t.Fatalf("every message deleted: %v, want gone", err)
	}
}

// ParseCardRefMust is ParseCardRef, failing the test on a bad reference.
func ParseCardRefMust(t *testing.T, ref string) (string, string) {
	t.Helper()
	ch, ts, err := ParseCardRef(ref)
	if err != nil {
		t.Fatal(err)
	}
	return ch, ts
}
