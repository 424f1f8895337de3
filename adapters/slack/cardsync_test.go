package slack

import (
	"encoding/json"
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

	// A thread line's update (an unknown outcome's notice) still waits
	// out a 429 in the client.
	fake.answerNext("chat.update", fakeAnswer{status: http.StatusTooManyRequests, retryAfter: "0"})
	if err := ad.updateBlocks(ctx, ref, "unknown outcome", updateBlocks, "x"); err != nil {
		t.Fatalf("an unknown outcome's update after a 429: %v", err)
	}
}

// A run message's and a grant notice's updates answer in the bot's
// classes, as a card's do (card sync renders them): a 429 is returned at
// once as a RateLimitedError, not waited out by the client; a deleted
// message is ErrMessageGone.
func TestRunAndGrantUpdateAnswers(t *testing.T) {
	ad, fake := newUpdater(t)
	ctx := t.Context()
	th := bot.Thread{Platform: Platform, Channel: "C0OPS", Thread: "1700000000.000100"}
	ref := CardRef("C0OPS", "1700000000.000300")
	run := cardpkg.Run{ID: "run1", Runbook: "restart", RequestedBy: "U1", Status: confirm.RunbookRunning}
	notice := cardpkg.GrantNotice{Ref: confirm.GrantRef("g1"), GrantID: "g1", Tool: "deploy", By: "U1", For: "U2", Until: time.Now().Add(time.Hour)}
	for what, update := range map[string]func() error{
		"run message":  func() error { return ad.UpdateRun(ctx, th, ref, run) },
		"grant notice": func() error { return ad.UpdateGrantNotice(ctx, th, ref, notice) },
	} {
		before := len(fake.callsTo("chat.update"))
		fake.answerNext("chat.update", fakeAnswer{status: http.StatusTooManyRequests, retryAfter: "9"})
		err := update()
		var rl *bot.RateLimitedError
		if !errors.As(err, &rl) || rl.RetryAfter != 9*time.Second || rl.Platform != Platform {
			t.Fatalf("%s, 429: %v", what, err)
		}
		if n := len(fake.callsTo("chat.update")) - before; n != 1 {
			t.Fatalf("%s: the 429 was retried by the client (%d calls)", what, n)
		}
		fake.answerNext("chat.update", fakeAnswer{status: http.StatusOK, body: `{"ok": false, "error": "message_not_found"}`})
		if err := update(); !errors.Is(err, bot.ErrMessageGone) {
			t.Fatalf("%s, message_not_found: %v", what, err)
		}
		if err := update(); err != nil {
			t.Fatalf("%s after the faults: %v", what, err)
		}
	}
}

// FindCard finds, through conversations.replies, the card Airlock posted
// in a thread for a batch, and through conversations.history one posted
// at the top level of a channel or a DM; nothing for another batch or
// place, nothing posted before `since`, and never a message of someone
// else carrying the batch's buttons.
func TestFindCard(t *testing.T) {
	ad, fake := newUpdater(t)
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
	got, found, err := ad.FindCard(ctx, th, c.BatchID, time.Time{})
	if err != nil || !found || got != ref {
		t.Fatalf("FindCard: %q %v %v, want %q", got, found, err, ref)
	}
	if _, found, _ := ad.FindCard(ctx, th, "otherbatch", time.Time{}); found {
		t.Fatal("found a card of another batch")
	}
	if _, found, _ := ad.FindCard(ctx, bot.Thread{Platform: Platform, Channel: "C0OPS", Thread: "1700000000.000999"}, c.BatchID, time.Time{}); found {
		t.Fatal("found the card in another thread")
	}
	if _, found, _ := ad.FindCard(ctx, th, c.BatchID, time.Unix(1900000000, 0)); found {
		t.Fatal("found a card posted before since")
	}

	// At the top level of a channel (an approvals channel) and of a DM.
	for _, ch := range []string{"C0APPROVE", "DALICE"} {
		top := bot.Thread{Platform: Platform, Channel: ch}
		if _, found, err := ad.FindCard(ctx, top, c.BatchID, time.Time{}); err != nil || found {
			t.Fatalf("%s before the card: %v %v", ch, found, err)
		}
		var blocks []any
		if err := json.Unmarshal(mustJSON(RenderWith(c, nil)), &blocks); err != nil {
			t.Fatal(err)
		}
		lookAlike := mustJSON(blocks)
		fake.PostAs(ch, "", "UMALLORY", "", "pasted", lookAlike)
		fake.PostAs(ch, "", "UOTHER", "BOTHER", "another app", lookAlike)
		if _, found, err := ad.FindCard(ctx, top, c.BatchID, time.Time{}); err != nil || found {
			t.Fatalf("%s: a look-alike by someone else was found: %v %v", ch, found, err)
		}
		ref, err := ad.PostCard(ctx, top, c)
		if err != nil {
			t.Fatal(err)
		}
		if got, found, err := ad.FindCard(ctx, top, c.BatchID, time.Time{}); err != nil || !found || got != ref {
			t.Fatalf("%s: FindCard %q %v %v, want %q", ch, got, found, err, ref)
		}
	}
	// A place the bot may not read: ErrCannotLook.
	fake.answerNext("conversations.history", fakeAnswer{status: http.StatusOK, body: `{"ok": false, "error": "missing_scope"}`})
	if _, _, err := ad.FindCard(ctx, bot.Thread{Platform: Platform, Channel: "C0PRIVATE"}, c.BatchID, time.Time{}); !errors.Is(err, bot.ErrCannotLook) {
		t.Fatalf("missing_scope: %v, want ErrCannotLook", err)
	}
	fake.answerNext("conversations.history", fakeAnswer{status: http.StatusOK, body: `{"ok": false, "error": "internal_error"}`})
	if _, _, err := ad.FindCard(ctx, bot.Thread{Platform: Platform, Channel: "C0PRIVATE"}, c.BatchID, time.Time{}); err == nil || errors.Is(err, bot.ErrCannotLook) {
		t.Fatalf("a failure that may pass: %v, want an error that is not ErrCannotLook", err)
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
	got, found, err := ad.FindCard(ctx, th, c.BatchID, time.Time{})
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
	if got, found, _ := ad.FindCard(ctx, cut, c.BatchID, time.Time{}); found {
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
