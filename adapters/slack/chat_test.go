package slack

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/slack-go/slack"

	"github.com/airlockhq/airlock/bot"
)

// newUpdater is an adapter over a stub bot whose Web API is the fake.
func newUpdater(t *testing.T) (*Adapter, *fakeSlack) {
	t.Helper()
	fake := newFakeSlack(t)
	ad, err := New(Config{Mode: ModeHTTP, BotToken: testBotToken, SigningSecret: testSecret, APIURL: fake.apiURL()}, newStubBot(), stubEvents{})
	if err != nil {
		t.Fatal(err)
	}
	return ad, fake
}

var updateBlocks = []slack.Block{slack.NewSectionBlock(slack.NewTextBlockObject(slack.MarkdownType, "*allowed* <@U1> & \"quoted\"", false, false), nil, nil)}

// A card's update goes through slack-go with the bot token: the blocks
// exactly as rendered, the fallback text unescaped.
func TestCardUpdateBody(t *testing.T) {
	ad, fake := newUpdater(t)
	if err := ad.updateBlocks(t.Context(), CardRef("C0OPS", "1700000000.000200"), "card", updateBlocks, "fallback <text>"); err != nil {
		t.Fatal(err)
	}
	calls := fake.callsTo("chat.update")
	if len(calls) != 1 {
		t.Fatalf("%d chat.update calls, want 1", len(calls))
	}
	c := calls[0]
	want, _ := json.Marshal(updateBlocks)
	if c.Token != testBotToken {
		t.Fatalf("chat.update sent with token %q, want the bot token", c.Token)
	}
	if c.param("channel") != "C0OPS" || c.param("ts") != "1700000000.000200" || c.param("text") != "fallback <text>" || c.param("blocks") != string(want) {
		t.Fatalf("chat.update body %v", c.Params)
	}
}

// A card and an answer are posted in the thread, never unfurled: the
// card's blocks exactly as rendered, the answer's text without blocks.
func TestPostBodies(t *testing.T) {
	ad, fake := newUpdater(t)
	th := bot.Thread{Platform: Platform, Channel: "C0OPS", Thread: "1700000000.000100"}
	ref, err := ad.postBlocks(t.Context(), th, "card", updateBlocks, "fallback")
	if err != nil {
		t.Fatal(err)
	}
	if err := ad.Post(t.Context(), th, "the answer"); err != nil {
		t.Fatal(err)
	}
	posts := fake.callsTo("chat.postMessage")
	if len(posts) != 2 || ref != CardRef("C0OPS", posts[0].TS) {
		t.Fatalf("card ref %q after %d posts", ref, len(posts))
	}
	want, _ := json.Marshal(updateBlocks)
	for i, p := range posts {
		if p.Token != testBotToken || p.param("channel") != "C0OPS" ||
			p.param("thread_ts") != th.Thread || p.param("unfurl_links") != "false" || p.param("unfurl_media") != "false" {
			t.Fatalf("post %d: %v", i, p.Params)
		}
	}
	if posts[0].param("blocks") != string(want) || posts[0].param("text") != "fallback" {
		t.Fatalf("card posted as %v", posts[0].Params)
	}
	if posts[1].Params.Has("blocks") || posts[1].param("text") != "the answer" {
		t.Fatalf("answer posted as %v", posts[1].Params)
	}
}

// A 429 is retried after its Retry-After (slack-go's OptionRetry): the
// update lands.
func TestCardUpdateRetriesARateLimit(t *testing.T) {
	ad, fake := newUpdater(t)
	fake.answerNext("chat.update", fakeAnswer{status: http.StatusTooManyRequests, retryAfter: "1"})
	start := time.Now()
	if err := ad.updateBlocks(t.Context(), CardRef("C0OPS", "1700000000.000200"), "card", updateBlocks, "t"); err != nil {
		t.Fatal(err)
	}
	if n := len(fake.callsTo("chat.update")); n != 2 {
		t.Fatalf("%d chat.update calls, want 2 (the limited one, then the retry)", n)
	}
	if waited := time.Since(start); waited < time.Second {
		t.Fatalf("retried after %v, before the Retry-After of 1s", waited)
	}
}

// Waiting out a rate limit ends with the caller's context; the failures
// are slack-go's error types.
func TestCardUpdateFailures(t *testing.T) {
	ref := CardRef("C0OPS", "1700000000.000200")
	t.Run("rate limited past the caller's deadline", func(t *testing.T) {
		ad, fake := newUpdater(t)
		fake.answerNext("chat.update", fakeAnswer{status: http.StatusTooManyRequests, retryAfter: "60"})
		ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
		defer cancel()
		start := time.Now()
		err := ad.updateBlocks(ctx, ref, "card", updateBlocks, "t")
		if !errors.Is(err, context.DeadlineExceeded) || time.Since(start) > 10*time.Second || len(fake.callsTo("chat.update")) != 1 {
			t.Fatalf("err %v after %v and %d calls; want the deadline, soon, one call", err, time.Since(start), len(fake.callsTo("chat.update")))
		}
	})
	t.Run("rate limited past its retries", func(t *testing.T) {
		if testing.Short() {
			t.Skip("waits out postRetries Retry-Afters")
		}
		ad, fake := newUpdater(t)
		limited := fakeAnswer{status: http.StatusTooManyRequests, retryAfter: "0"} // slack-go waits at least a second
		for range postRetries + 1 {
			fake.answerNext("chat.update", limited)
		}
		err := ad.updateBlocks(t.Context(), ref, "card", updateBlocks, "t")
		var rl *slack.RateLimitedError
		if !errors.As(err, &rl) || len(fake.callsTo("chat.update")) != postRetries+1 {
			t.Fatalf("err %v after %d calls; want a RateLimitedError after %d", err, len(fake.callsTo("chat.update")), postRetries+1)
		}
	})
	t.Run("server error", func(t *testing.T) {
		ad, fake := newUpdater(t)
		fake.answerNext("chat.update", fakeAnswer{status: http.StatusInternalServerError})
		err := ad.updateBlocks(t.Context(), ref, "card", updateBlocks, "t")
		if err != nil || len(fake.callsTo("chat.update")) != 2 {
			t.Fatalf("err %v after %d calls; want the 500 sent again and landed", err, len(fake.callsTo("chat.update")))
		}
	})
	t.Run("refused", func(t *testing.T) {
		ad, fake := newUpdater(t)
		fake.answerNext("chat.update", fakeAnswer{status: http.StatusOK, body: `{"ok":false,"error":"message_not_found"}`})
		err := ad.updateBlocks(t.Context(), ref, "card", updateBlocks, "t")
		var se slack.SlackErrorResponse
		if !errors.As(err, &se) || se.Err != "message_not_found" || !strings.Contains(err.Error(), "chat.update (card)") {
			t.Fatalf("err %v; want Slack's message_not_found", err)
		}
	})
	t.Run("wrong token", func(t *testing.T) {
		fake := newFakeSlack(t)
		ad, err := New(Config{Mode: ModeHTTP, BotToken: "xoxb-other", SigningSecret: testSecret, APIURL: fake.apiURL()}, newStubBot(), stubEvents{})
		if err != nil {
			t.Fatal(err)
		}
		err = ad.updateBlocks(t.Context(), ref, "card", updateBlocks, "t")
		var se slack.SlackErrorResponse
		if !errors.As(err, &se) || se.Err != "invalid_auth" {
			t.Fatalf("err %v; want invalid_auth", err)
		}
	})
}

// A thread's message outlasts a stretch of rate limiting: five 429s in a
// row, each waited out, and the model's answer is posted once.
func TestPostOutlastsARateLimitStretch(t *testing.T) {
	ad, fake := newUpdater(t)
	for range 5 {
		fake.answerNext("chat.postMessage", fakeAnswer{status: http.StatusTooManyRequests, retryAfter: "1"})
	}
	if err := ad.Post(t.Context(), bot.Thread{Platform: Platform, Channel: "C0OPS", Thread: "1700000000.000100"}, "the answer"); err != nil {
		t.Fatal(err)
	}
	posts := fake.callsTo("chat.postMessage")
	if len(posts) != 6 || posts[5].param("text") != "the answer" {
		t.Fatalf("%d chat.postMessage calls, want 5 limited and the one that posted", len(posts))
	}
}

// A thread's message outlasts a stretch of 5xx too: it is sent again,
// backing off, and posted once Slack answers.
func TestPostOutlastsServerErrors(t *testing.T) {
	ad, fake := newUpdater(t)
	fake.answerNext("chat.postMessage", fakeAnswer{status: http.StatusServiceUnavailable}, fakeAnswer{status: http.StatusBadGateway})
	if err := ad.Post(t.Context(), bot.Thread{Platform: Platform, Channel: "C0OPS", Thread: "1700000000.000100"}, "the answer"); err != nil {
		t.Fatal(err)
	}
	if posts := fake.callsTo("chat.postMessage"); len(posts) != 3 || posts[2].param("text") != "the answer" {
		t.Fatalf("%d chat.postMessage calls, want 2 failed and the one that posted", len(posts))
	}
}
