package bench

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/airlockhq/airlock/adapters/slack"
)

// serve serves handler on a new listener on 127.0.0.1 as airlock run
// serves (h.Server), returning its base URL.
func serve(h HTTP, handler http.Handler) (*http.Server, string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, "", err
	}
	srv := h.Server(handler)
	go func() { _ = srv.Serve(ln) }()
	return srv, "http://" + ln.Addr().String(), nil
}

// newClient is the clickers' client: a connection each, kept.
func newClient(clickers int) *http.Client {
	return &http.Client{
		Timeout: 30 * time.Second,
		Transport: &http.Transport{
			MaxIdleConns:        4 * clickers,
			MaxIdleConnsPerHost: clickers,
			IdleConnTimeout:     time.Minute,
			DisableCompression:  true,
		},
	}
}

// post sends a request signed as Slack signs it and reads the whole
// answer; anything but 200 is an error. started is when the handler began
// on it (startHeader), zero when the answer does not say.
func post(ctx context.Context, client *http.Client, u, contentType string, body []byte) (started time.Time, err error) {
	ts := strconv.FormatInt(time.Now().Unix(), 10)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, bytes.NewReader(body))
	if err != nil {
		return time.Time{}, err
	}
	req.Header.Set("Content-Type", contentType)
	req.Header.Set("X-Slack-Request-Timestamp", ts)
	req.Header.Set("X-Slack-Signature", "v0="+hex.EncodeToString(slack.Sign(signingSecret, ts, body)))
	resp, err := client.Do(req)
	if err != nil {
		return time.Time{}, err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return time.Time{}, fmt.Errorf("status %s", resp.Status)
	}
	if ns, err := strconv.ParseInt(resp.Header.Get(startHeader), 10, 64); err == nil {
		started = time.Unix(0, ns)
	}
	return started, nil
}

// mentionBody is the event of the mention that makes card i.
func mentionBody(i int) []byte {
	ts := threadTS(i)
	b, _ := json.Marshal(map[string]any{
		"token": "ignored", "team_id": team, "api_app_id": "A0BENCH", "type": "event_callback",
		"event_id": fmt.Sprintf("Ev0BENCH%07d", i), "event_time": 1700000000,
		"event": map[string]any{
			"type": "app_mention", "user": requester, "text": "<@" + botUser + "> run the bench tool",
			"ts": ts, "event_ts": ts, "channel": channelID(i),
		},
	})
	return b
}

// clickBody is an Allow click on card i, posted as message cardTS in its
// thread.
func clickBody(i int, ref, cardTS string) []byte {
	ch, ts := channelID(i), threadTS(i)
	payload, _ := json.Marshal(map[string]any{
		"type": "block_actions", "token": "ignored", "trigger_id": fmt.Sprintf("%d.1700000000.bench", i),
		"team": map[string]any{"id": team}, "api_app_id": "A0BENCH",
		"user":      map[string]any{"id": approver, "team_id": team},
		"channel":   map[string]any{"id": ch},
		"container": map[string]any{"type": "message", "channel_id": ch, "message_ts": cardTS, "thread_ts": ts},
		"message":   map[string]any{"ts": cardTS, "thread_ts": ts},
		"actions": []map[string]any{{
			"action_id": slack.ActionAllow, "block_id": "calls", "value": ref, "type": "button", "action_ts": "1700000000.000001",
		}},
	})
	return []byte("payload=" + url.QueryEscape(string(payload)))
}

// parallel calls fn(i) for i in [0, n) from workers goroutines; the
// first error stops the others.
func parallel(ctx context.Context, n, workers int, fn func(i int) error) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(workers, n) {
		wg.Go(func() {
			for ctx.Err() == nil {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				if err := fn(i); err != nil {
					cancel(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if err := context.Cause(ctx); err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	return ctx.Err()
}

// quantileMs is the q-quantile of ds in milliseconds.
func quantileMs(ds []time.Duration, q float64) float64 {
	s := slices.Clone(ds)
	slices.Sort(s)
	i := int(q*float64(len(s))+0.5) - 1
	i = min(max(i, 0), len(s)-1)
	return float64(s[i]) / float64(time.Millisecond)
}
