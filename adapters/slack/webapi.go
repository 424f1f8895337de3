package slack

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/slack-go/slack"
)

// chat.postMessage and chat.update go out as JSON. slack-go form-encodes
// every Web API call: a card's blocks, JSON already, were URL-escaped into
// the form (and parsed back out by Slack), the largest allocation of a
// decision in `airlock bench`; sending chat.update as JSON gave 7% more
// decisions a second. Slack takes JSON bodies for its write methods; the
// two every card and every answer use are sent so. They behave as slack-go's
// client does with OptionRetry(3): a 429 is retried up to three times,
// after its Retry-After (at least a second; a minute when the header is
// missing), and failures are slack-go's error types.
const (
	jsonRetries        = 3
	jsonRetryAfter     = time.Minute
	jsonRetryAfterMin  = time.Second
	maxJSONAnswerBytes = 1 << 20
)

// chatUpdate is chat.update's JSON body.
type chatUpdate struct {
	Channel string        `json:"channel"`
	TS      string        `json:"ts"`
	Text    string        `json:"text"`
	Blocks  []slack.Block `json:"blocks"`
}

// chatPost is chat.postMessage's JSON body: never unfurled, and Slack
// neither links names nor parses the text (its defaults).
type chatPost struct {
	Channel     string        `json:"channel"`
	Text        string        `json:"text"`
	Blocks      []slack.Block `json:"blocks,omitempty"`
	ThreadTS    string        `json:"thread_ts,omitempty"`
	UnfurlLinks bool          `json:"unfurl_links"`
	UnfurlMedia bool          `json:"unfurl_media"`
}

// posted is chat.postMessage's answer.
type posted struct {
	slack.SlackResponse
	Channel string `json:"channel"`
	TS      string `json:"ts"`
}

// answer is a Web API answer: Err is nil when it was ok.
type answer interface{ Err() error }

// callJSON calls the Web API method with body as JSON and the bot token,
// reads Slack's answer into out and returns its error: nil when ok.
func (a *Adapter) callJSON(ctx context.Context, method string, body any, out answer) error {
	raw, err := json.Marshal(body)
	if err != nil {
		return fmt.Errorf("encode %s: %w", method, err)
	}
	for attempt := 0; ; attempt++ {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, a.cfg.APIURL+method, bytes.NewReader(raw))
		if err != nil {
			return err
		}
		req.Header.Set("Content-Type", "application/json; charset=utf-8")
		req.Header.Set("Authorization", "Bearer "+a.cfg.BotToken)
		resp, err := a.cfg.HTTPClient.Do(req)
		if err != nil {
			return err
		}
		if resp.StatusCode == http.StatusTooManyRequests {
			wait := retryAfter(resp.Header.Get("Retry-After"))
			discard(resp)
			if attempt >= jsonRetries {
				return &slack.RateLimitedError{RetryAfter: wait}
			}
			t := time.NewTimer(wait)
			select {
			case <-ctx.Done():
				t.Stop()
				return ctx.Err()
			case <-t.C:
			}
			continue
		}
		if resp.StatusCode != http.StatusOK {
			discard(resp)
			return slack.StatusCodeError{Code: resp.StatusCode, Status: resp.Status}
		}
		err = json.NewDecoder(io.LimitReader(resp.Body, maxJSONAnswerBytes)).Decode(out)
		discard(resp)
		if err != nil {
			return fmt.Errorf("decode %s answer: %w", method, err)
		}
		return out.Err()
	}
}

// retryAfter is a 429's wait: its Retry-After seconds, at least
// jsonRetryAfterMin; jsonRetryAfter when missing or unreadable.
func retryAfter(header string) time.Duration {
	sec, err := strconv.ParseInt(strings.TrimSpace(header), 10, 64)
	if err != nil || sec < 0 {
		return jsonRetryAfter
	}
	return max(time.Duration(sec)*time.Second, jsonRetryAfterMin)
}

// discard reads what is left of an answer and closes it, so its
// connection is kept for the next call.
func discard(resp *http.Response) {
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxJSONAnswerBytes))
	resp.Body.Close()
}
