package chaos

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os/exec"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/airlockhq/airlock/adapters/slack"
	"github.com/airlockhq/airlock/adapters/slack/slacktest"
	"github.com/airlockhq/airlock/confirm"
)

// conversation is one mention and what came of it.
type conversation struct {
	id, channel, thread string
	calls, pair         int
	card                msgKey
	batch               string
	acked               bool // the mention was acknowledged (2xx)
	gotCard, answered   bool
}

// click is one button press the soak made.
type click struct {
	user, action, ref string
	batch             string
	at                time.Time // when the press that was answered was sent
	where             msgKey    // the message it was on
	thread            string
	answered          time.Time // when its answer came (or the last try ended)
	status            int       // HTTP status of the answer; 0: never answered
	tries             int
	approver          bool // one of the channel's approvers (not the requester, not a stranger)
}

var tsSeq, pressSeq atomic.Int64

// nextTS is a fresh thread ts for a mention, apart from the fake's own.
func nextTS() string {
	n := tsSeq.Add(1)
	return fmt.Sprintf("1700000000.%06d", n)
}

// drive runs the conversations for the soak's duration while the
// schedule's faults and kills happen, then waits for the conversations to
// end.
func (w *world) drive(ctx context.Context, rng *rand.Rand) {
	start := w.faults.start
	stop := make(chan struct{})
	var faultsDone sync.WaitGroup
	faultsDone.Add(1)
	go func() { defer faultsDone.Done(); w.injectFaults(ctx, stop) }()
	var wg sync.WaitGroup
	for i := range w.o.Conversations {
		wg.Add(1)
		seed := rng.Uint64()
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(seed, uint64(i)))
			time.Sleep(time.Duration(r.Int64N(int64(2 * time.Second)))) // not all at once
			for n := 0; time.Since(start) < w.o.Duration && ctx.Err() == nil; n++ {
				c := &conversation{id: fmt.Sprintf("w%03dn%03d", i, n), channel: channelOf(i), thread: nextTS()}
				w.mu.Lock()
				w.convs = append(w.convs, c)
				w.mu.Unlock()
				w.converse(ctx, r, c)
			}
		}()
	}
	wg.Wait()
	close(stop)
	faultsDone.Wait()
}

// injectFaults applies the schedule's database stretches and kills until
// stop: the Slack and tool faults the fakes apply themselves.
func (w *world) injectFaults(ctx context.Context, stop <-chan struct{}) {
	type event struct {
		at   time.Time
		what func()
	}
	var evs []event
	for _, f := range w.faults.faults {
		if f.kind != faultDBAway {
			continue
		}
		evs = append(evs, event{f.from, w.dbAway}, event{f.to, w.dbBack})
	}
	// A restart waits for the database when it is away: it runs beside
	// the schedule, so the database's return is not held up by it.
	var restarts sync.WaitGroup
	defer restarts.Wait()
	for _, k := range w.faults.kills {
		evs = append(evs, event{k, func() {
			w.airlock.kill()
			w.mu.Lock()
			w.killedAt = append(w.killedAt, time.Now())
			w.mu.Unlock()
			w.report.Kills++
			restarts.Add(1)
			go func() { defer restarts.Done(); w.restart(ctx) }()
		}})
	}
	sortEvents := func() {
		for i := 1; i < len(evs); i++ {
			for j := i; j > 0 && evs[j].at.Before(evs[j-1].at); j-- {
				evs[j], evs[j-1] = evs[j-1], evs[j]
			}
		}
	}
	sortEvents()
	for _, ev := range evs {
		select {
		case <-stop:
			return
		case <-ctx.Done():
			return
		case <-time.After(time.Until(ev.at)):
		}
		ev.what()
	}
}

func (w *world) dbAway() {
	if w.proxy != nil {
		w.proxy.Cut()
		return
	}
	if out, err := exec.Command("sh", "-c", w.o.PGRestart).CombinedOutput(); err != nil {
		w.report.note("-pg-restart failed: %v: %s", err, bytes.TrimSpace(out))
	}
}

func (w *world) dbBack() {
	if w.proxy != nil {
		w.proxy.Restore()
	}
}

// restart starts Airlock again a moment after a kill.
func (w *world) restart(ctx context.Context) {
	time.Sleep(500 * time.Millisecond)
	// As a supervisor would: Airlock refuses to start while its database
	// can't be reached, so it is started again until it comes up.
	var err error
	for deadline := time.Now().Add(2 * time.Minute); time.Now().Before(deadline) && ctx.Err() == nil; time.Sleep(time.Second) {
		if err = w.airlock.start(ctx); err == nil {
			return
		}
		w.mu.Lock()
		w.report.FailedStarts++
		w.mu.Unlock()
	}
	w.report.note("Airlock did not come up again after a kill: %v", err)
}

// converse is one conversation: a mention asking for 1 to 5 calls (some
// needing two approvals), its card, clicks from approvers, the requester
// and a stranger (some twice, some on a DM copy, some Allow all, some
// calls left to expire), and the model's answer.
func (w *world) converse(ctx context.Context, r *rand.Rand, c *conversation) {
	c.calls = 1 + r.IntN(5)
	if r.IntN(4) == 0 {
		c.pair = 1
	}
	body, _ := json.Marshal(map[string]any{"type": "event_callback", "team_id": "T0TEST", "api_app_id": "A0TEST",
		"event_id": "Ev" + c.id, "event_time": time.Now().Unix(),
		"event": map[string]any{"type": "app_mention", "user": requester, "channel": c.channel, "ts": c.thread, "event_ts": c.thread,
			"text": fmt.Sprintf("<@%s> soak calls=%d pair=%d id=%s", botUser, c.calls, c.pair, c.id)}})
	// Slack retries an event it got no answer for; so does the soak.
	if status, _ := w.post(ctx, body, "application/json", 30); status/100 != 2 {
		w.report.note("mention %s never acknowledged", c.id)
		return
	}
	c.acked = true
	deadline := time.Now().Add(w.o.cardWait)
	var bs []button
	for ok := false; !ok; {
		if time.Now().After(deadline) || ctx.Err() != nil {
			return // no card: counted at the end
		}
		time.Sleep(200 * time.Millisecond)
		c.card, bs, ok = w.slack.cardIn(c.channel, c.thread)
	}
	c.gotCard = true
	refs := map[int]string{} // position → its Allow's reference
	var allRef string
	for _, b := range bs {
		switch b.action {
		case actionAllow:
			if batch, pos, err := confirm.ParseRef(b.value); err == nil {
				refs[pos], c.batch = b.value, batch
			}
		case actionAll:
			allRef = b.value
		}
	}
	people := append([]string(nil), approvers...)
	if hasDMs(c.channel) {
		people = people[:dmApprovers]
	}
	r.Shuffle(len(people), func(i, j int) { people[i], people[j] = people[j], people[i] })
	next := 0
	who := func() string { p := people[next%len(people)]; next++; return p }
	var clicks sync.WaitGroup
	press := func(user, action, ref string) {
		delay := time.Duration(r.Int64N(int64(3 * time.Second)))
		onDM := hasDMs(c.channel) && r.IntN(3) == 0
		clicks.Add(1)
		go func() {
			defer clicks.Done()
			time.Sleep(delay)
			w.press(ctx, c, user, action, ref, onDM)
		}()
	}
	if allRef != "" && r.IntN(10) == 0 {
		press(who(), actionAll, allRef)
	}
	for pos := range c.calls {
		ref, ok := refs[pos]
		if !ok {
			continue
		}
		if r.IntN(7) == 0 {
			press(stranger, actionAllow, ref)
		}
		if r.IntN(12) == 0 {
			press(requester, actionAllow, ref)
		}
		switch x := r.IntN(100); {
		case x < 55:
			n := 1
			if pos < c.pair {
				n = 2
			}
			for range n {
				u := who()
				press(u, actionAllow, ref)
				if r.IntN(6) == 0 {
					press(u, actionAllow, ref) // a double click
				}
			}
		case x < 75:
			press(who(), actionDeny, ref)
		case x < 88:
			// left to expire
		default:
			press(stranger, actionDeny, ref)
		}
	}
	clicks.Wait()
	end := time.Now().Add(w.o.Timeout + 45*time.Second)
	for time.Now().Before(end) && ctx.Err() == nil {
		if w.slack.answered(c.channel, c.thread) {
			c.answered = true
			return
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// press sends one click as Slack would, on the card or, for a DM
// channel's approver, sometimes on their DM copy; it is sent again while
// Airlock can't be reached (the person clicks again).
func (w *world) press(ctx context.Context, c *conversation, user, action, ref string, onDM bool) {
	where, thread := c.card, c.thread
	if dm := slacktest.DMOf(user); onDM {
		for _, k := range w.slack.messagesWithValue(ref) {
			if k.channel == dm {
				m, _ := w.slack.lastRendering(k)
				where, thread = k, m.thread
			}
		}
	}
	n := pressSeq.Add(1)
	p, _ := json.Marshal(map[string]any{
		"type": "block_actions", "trigger_id": fmt.Sprintf("%d.2.3", n), "api_app_id": "A0TEST",
		"user":      map[string]any{"id": user, "username": "u", "team_id": "T0TEST"},
		"team":      map[string]any{"id": "T0TEST"},
		"channel":   map[string]any{"id": where.channel, "name": "soak"},
		"container": map[string]any{"type": "message", "message_ts": where.ts, "channel_id": where.channel, "thread_ts": thread},
		"message":   map[string]any{"type": "message", "ts": where.ts, "user": botUser, "thread_ts": thread},
		"actions":   []any{map[string]any{"action_id": action, "block_id": "b", "value": ref, "type": "button", "action_ts": fmt.Sprintf("1700000000.%06d", n)}},
	})
	k := click{user: user, action: action, ref: ref, batch: c.batch, where: where, thread: thread,
		approver: user != stranger && user != requester}
	k.at = time.Now()
	k.status, k.tries = w.post(ctx, []byte(url.Values{"payload": {string(p)}}.Encode()), "application/x-www-form-urlencoded", 10)
	k.answered = time.Now()
	w.mu.Lock()
	w.clicks = append(w.clicks, k)
	w.mu.Unlock()
}

// post signs and sends a request to Airlock's /slack/events, again every
// second while it can't be reached or answers 5xx, at most tries times.
// It returns the last status (0: never answered) and the tries made.
func (w *world) post(ctx context.Context, body []byte, contentType string, tries int) (int, int) {
	status := 0
	for try := 1; try <= tries; try++ {
		ts := strconv.FormatInt(time.Now().Unix(), 10)
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+w.airlock.addr+"/slack/events", bytes.NewReader(body))
		req.Header.Set("Content-Type", contentType)
		req.Header.Set("X-Slack-Request-Timestamp", ts)
		req.Header.Set("X-Slack-Signature", fmt.Sprintf("v0=%x", slack.Sign(signingSecret, ts, body)))
		if try > 1 {
			req.Header.Set("X-Slack-Retry-Num", strconv.Itoa(try-1))
		}
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
			status = resp.StatusCode
			if status/100 != 5 {
				return status, try
			}
		}
		if ctx.Err() != nil {
			return status, try
		}
		time.Sleep(time.Second)
	}
	return status, tries
}
