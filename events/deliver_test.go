package events_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/airlockhq/airlock/bot"
	"github.com/airlockhq/airlock/bot/bottest"
	"github.com/airlockhq/airlock/confirm"
	"github.com/airlockhq/airlock/events"
	"github.com/airlockhq/airlock/events/webhook"
	"github.com/airlockhq/airlock/internal/pgtest"
	"github.com/airlockhq/airlock/model"
	"github.com/airlockhq/airlock/model/modeltest"
	"github.com/airlockhq/airlock/storage"
)

// --- a webhook receiver on 127.0.0.1 ---

type receipt struct {
	header http.Header
	body   []byte
	ev     webhook.Event
}

// receiver records every request; answer decides each answer (nil: 200).
type receiver struct {
	srv    *httptest.Server
	mu     sync.Mutex
	got    []receipt
	answer func(n int, ev webhook.Event) int
}

func newReceiver(t *testing.T, answer func(n int, ev webhook.Event) int) *receiver {
	t.Helper()
	r := &receiver{answer: answer}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		var ev webhook.Event
		if err := json.Unmarshal(body, &ev); err != nil {
			t.Errorf("body is not an event: %s", body)
		}
		r.mu.Lock()
		r.got = append(r.got, receipt{header: req.Header.Clone(), body: body, ev: ev})
		n := len(r.got)
		r.mu.Unlock()
		if r.answer != nil {
			w.WriteHeader(r.answer(n, ev))
		}
	}))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *receiver) receipts() []receipt {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.got)
}

func (r *receiver) hook(events ...string) events.Webhook {
	return hookTo(r.srv.URL+"/airlock", events...)
}

func hookTo(u string, evs ...string) events.Webhook {
	return events.Webhook{URL: u, Secret: secret, Events: evs}
}

// --- a fake clock ---

type clock struct {
	mu sync.Mutex
	t  time.Time
}

// newClock starts a minute from now (on a whole second), so events
// written now are due.
func newClock() *clock { return &clock{t: time.Now().UTC().Truncate(time.Second).Add(time.Minute)} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = t
}

func (c *clock) Add(d time.Duration) { c.Set(c.Now().Add(d)) }

func openDB(t *testing.T, hooks ...events.Webhook) *storage.DB {
	t.Helper()
	db, err := storage.Open(t.Context(), "sqlite", filepath.Join(t.TempDir(), "airlock.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	if err := db.SetWebhooks(events.Config{Webhooks: hooks}.Targets()); err != nil {
		t.Fatal(err)
	}
	return db
}

func poll(t *testing.T, d *events.Deliverer) int {
	t.Helper()
	n, err := d.Poll(t.Context())
	if err != nil {
		t.Fatalf("Poll: %v", err)
	}
	return n
}

// --- a real bot with a scripted model ---

// Arguments as a model might send them: spacing, key order and characters
// json.Marshal would escape, all to be delivered byte for byte.
const (
	statusArgs = `{"svc":  "api",   "verbose": true}`
	deployArgs = `{"svc": "api", "note": "<b>a & b</b> \u00e9t\u00e9", "n": 1.50}`
)

// TestTurnReachesWebhooks: a turn of a real bot — an ungated call and a
// gated one, a card, Allow, both run — reaches a webhook as every event,
// in order, signed (checked with docs/webhooks.md's code), with the model's
// exact argument bytes and unique ids; a second webhook gets only the
// types it asked for.
func TestTurnReachesWebhooks(t *testing.T) {
	ctx := t.Context()
	var handled []string
	var hmu sync.Mutex
	readme := httptest.NewServer(receive([]byte(secret), func(id string, body []byte) error {
		hmu.Lock()
		defer hmu.Unlock()
		handled = append(handled, string(body))
		return nil
	}))
	defer readme.Close()
	all := newReceiver(t, nil)
	some := newReceiver(t, nil)
	hooks := []events.Webhook{hookTo(readme.URL + "/hook"), all.hook(), some.hook("decision", "tool_result")}
	db := openDB(t, hooks...)

	ts := bottest.Tools{"status": {Name: "status"}, "deploy": {Name: "deploy", Confirms: true}}
	m := modeltest.NewScripted(
		model.Message{Role: model.RoleAssistant, ToolCalls: []confirm.ToolCall{
			{ID: "call_1", Name: "status", Args: json.RawMessage(statusArgs)},
			{ID: "call_2", Name: "deploy", Args: json.RawMessage(deployArgs)},
		}},
		model.Message{Role: model.RoleAssistant, Text: "Deployed."},
	)
	b, err := bot.New(bot.Config{
		Store: db, Model: m, Tools: ts, Policy: confirm.NewPolicy(true, nil),
		Channels: bot.NewChannels([]bot.Channel{{Platform: "test", ID: "C1", Approvers: []string{"alice"}}}),
		Timeout:  10 * time.Minute, WorkerID: "w1",
	})
	if err != nil {
		t.Fatal(err)
	}
	p := &bottest.Platform{}
	b.Register("test", p)
	if err := b.HandleTurn(ctx, bot.Turn{Platform: "test", Channel: "C1", Thread: "T1", User: "bob", Text: "deploy api"}); err != nil {
		t.Fatal(err)
	}
	if len(p.Cards) != 1 {
		t.Fatalf("cards: %d", len(p.Cards))
	}
	var ref string
	for _, c := range p.Cards[0].Calls {
		if c.Flagged {
			ref = c.Ref
		}
	}
	if err := b.Decide(ctx, bot.Click{Platform: "test", Channel: "C1", User: "alice", Ref: ref, Message: "card-" + batchOf(ref), Allow: true}); err != nil {
		t.Fatal(err)
	}
	if ts["status"].Runs.Load() != 1 || ts["deploy"].Runs.Load() != 1 {
		t.Fatalf("runs: status %d, deploy %d", ts["status"].Runs.Load(), ts["deploy"].Runs.Load())
	}

	d := events.NewDeliverer(db, hooks, events.Options{Worker: "r1"})
	if n := poll(t, d); n != 6+6+3 {
		t.Fatalf("delivered %d, want 15", n)
	}

	got := all.receipts()
	var seq []string
	for _, r := range got {
		seq = append(seq, string(r.ev.Type)+":"+r.ev.Tool)
	}
	want := "tool_call:status tool_call:deploy approval_request: decision:deploy tool_result:status tool_result:deploy"
	if strings.Join(seq, " ") != want {
		t.Fatalf("received\n %s\nwant\n %s", strings.Join(seq, " "), want)
	}
	// The order is the audit's.
	conv, err := db.FindConversation(ctx, "test", "C1", "T1")
	if err != nil {
		t.Fatal(err)
	}
	audit, err := db.AuditEvents(ctx, confirm.AuditFilter{ConversationID: conv.ID})
	if err != nil {
		t.Fatal(err)
	}
	if len(audit) != len(got) {
		t.Fatalf("%d audit rows, %d events", len(audit), len(got))
	}
	ids := map[string]bool{}
	for i, r := range got {
		a, ev := audit[i], r.ev
		if string(a.Kind) != string(ev.Type) || a.CallKey != ev.Call || a.BatchID != ev.Batch || !a.At.Equal(ev.Time) {
			t.Errorf("event %d = %s %s/%s at %v; audit row %s %s/%s at %v", i, ev.Type, ev.Batch, ev.Call, ev.Time, a.Kind, a.BatchID, a.CallKey, a.At)
		}
		if ev.Conversation != (webhook.Conversation{ID: conv.ID, Platform: "test", Channel: "C1", Thread: "T1"}) {
			t.Errorf("event %d conversation = %+v", i, ev.Conversation)
		}
		if ev.ID == "" || ids[ev.ID] || r.header.Get(events.EventIDHeader) != ev.ID {
			t.Errorf("event %d id %q (header %q), seen before: %v", i, ev.ID, r.header.Get(events.EventIDHeader), ids[ev.ID])
		}
		ids[ev.ID] = true
		if ct := r.header.Get("Content-Type"); ct != "application/json" {
			t.Errorf("Content-Type = %q", ct)
		}
		if !verify([]byte(secret), r.header.Get(events.SignatureHeader), r.body, time.Now()) {
			t.Errorf("event %d: signature %q does not verify", i, r.header.Get(events.SignatureHeader))
		}
		wantArgs := map[string]string{"status": statusArgs, "deploy": deployArgs}[ev.Tool]
		if ev.Call != "" && (string(ev.Args) != wantArgs || !bytes.Contains(r.body, []byte(`"args":`+wantArgs+`,`))) {
			t.Errorf("event %d args = %s, want exactly %s", i, ev.Args, wantArgs)
		}
	}
	byType := func(typ webhook.EventType) webhook.Event {
		for _, r := range got {
			if r.ev.Type == typ {
				return r.ev
			}
		}
		t.Fatalf("no %s event", typ)
		return webhook.Event{}
	}
	if ev := byType(webhook.EventToolCall); ev.Actor != "bob" {
		t.Errorf("tool_call actor = %q, want the requester", ev.Actor)
	}
	if ev := byType(webhook.EventDecision); ev.Actor != "alice" || ev.Outcome != "allowed" {
		t.Errorf("decision = %+v", ev)
	}
	if ev := byType(webhook.EventToolResult); ev.Actor != "airlock" || ev.Outcome != "succeeded" {
		t.Errorf("tool_result = %+v", ev)
	}

	var filtered []string
	for _, r := range some.receipts() {
		filtered = append(filtered, string(r.ev.Type)+":"+r.ev.Tool)
	}
	if strings.Join(filtered, " ") != "decision:deploy tool_result:status tool_result:deploy" {
		t.Fatalf("filtered webhook got %v", filtered)
	}
	hmu.Lock()
	defer hmu.Unlock()
	if len(handled) != 6 {
		t.Fatalf("the docs/webhooks.md receiver handled %d events, want 6", len(handled))
	}
	for i, body := range handled {
		if body != string(got[i].body) {
			t.Errorf("docs/webhooks.md receiver event %d = %s, want %s", i, body, got[i].body)
		}
	}
	if left, _ := db.Deliveries(ctx, storage.DeliveryFilter{Status: []storage.DeliveryStatus{storage.DeliveryPending, storage.DeliveryDead}}); len(left) != 0 {
		t.Fatalf("undelivered after the poll: %d", len(left))
	}
}

// batch stores a batch of n ungated calls in a new thread, as the bot does
// for a reply nobody is asked about: n tool_call events.
func batch(t *testing.T, db *storage.DB, thread string, n int) int64 {
	t.Helper()
	conv, err := db.Conversation(t.Context(), "slack", "C1", thread, false)
	if err != nil {
		t.Fatal(err)
	}
	b := &confirm.Batch{ConversationID: conv.ID, RequestedBy: "U-bob", Status: confirm.BatchDecided}
	for i := range n {
		b.Calls = append(b.Calls, confirm.Call{Key: fmt.Sprintf("k%d", i), Position: i, Tool: "status",
			Args: json.RawMessage(fmt.Sprintf(`{"i": %d}`, i)), Decision: confirm.DecisionAllowedByPolicy})
	}
	if err := db.CreateBatch(t.Context(), b, confirm.Message{Role: "assistant", Body: json.RawMessage(`{}`)}); err != nil {
		t.Fatal(err)
	}
	return conv.ID
}

// sigTime is the t of a receipt's signature, after checking it.
func sigTime(t *testing.T, r receipt, now time.Time) time.Time {
	t.Helper()
	h := r.header.Get(events.SignatureHeader)
	if err := events.Verify(secret, h, r.body, now, time.Second); err != nil {
		t.Fatalf("signature %s at %v: %v", h, now, err)
	}
	ts, _, _ := strings.Cut(strings.TrimPrefix(h, "t="), ",")
	sec, _ := strconv.ParseInt(ts, 10, 64)
	return time.Unix(sec, 0).UTC()
}

// TestBackoffKeepsOrder: a receiver answering 500 twice then 200 gets the
// first event of a conversation at t0, t0+1s and t0+3s — the same id and
// body each time, signed anew — and the conversation's later events only
// after it; another conversation's events are not held up.
func TestBackoffKeepsOrder(t *testing.T) {
	clk := newClock()
	var convA int64
	var failed atomic.Int64
	rcv := newReceiver(t, func(_ int, ev webhook.Event) int {
		if ev.Conversation.ID == convA && failed.Load() < 2 {
			failed.Add(1)
			return http.StatusInternalServerError
		}
		return http.StatusNoContent
	})
	db := openDB(t, rcv.hook())
	convA = batch(t, db, "A", 3)
	convB := batch(t, db, "B", 2)
	d := events.NewDeliverer(db, []events.Webhook{rcv.hook()}, events.Options{Worker: "r1", Now: clk.Now})
	t0 := clk.Now()

	if n := poll(t, d); n != 2 {
		t.Fatalf("first poll delivered %d, want conversation B's 2", n)
	}
	clk.Add(999 * time.Millisecond)
	if n := poll(t, d); n != 0 {
		t.Fatalf("delivered %d before the 1s backoff", n)
	}
	clk.Set(t0.Add(time.Second))
	if n := poll(t, d); n != 0 {
		t.Fatalf("second attempt delivered %d", n)
	}
	clk.Set(t0.Add(3*time.Second - time.Millisecond))
	if n := poll(t, d); n != 0 {
		t.Fatalf("delivered %d before the 2s backoff", n)
	}
	clk.Set(t0.Add(3 * time.Second))
	if n := poll(t, d); n != 3 {
		t.Fatalf("third attempt delivered %d, want conversation A's 3", n)
	}

	var a []receipt
	order := map[int64][]string{}
	for _, r := range rcv.receipts() {
		order[r.ev.Conversation.ID] = append(order[r.ev.Conversation.ID], r.ev.Call)
		if r.ev.Conversation.ID == convA {
			a = append(a, r)
		}
	}
	if got := strings.Join(order[convA], " "); got != "k0 k0 k0 k1 k2" {
		t.Fatalf("conversation A's requests = %s, want k0 three times, then k1 k2", got)
	}
	if got := strings.Join(order[convB], " "); got != "k0 k1" {
		t.Fatalf("conversation B's requests = %s", got)
	}
	wantAt := []time.Time{t0, t0.Add(time.Second), t0.Add(3 * time.Second), t0.Add(3 * time.Second), t0.Add(3 * time.Second)}
	for i, r := range a {
		if at := sigTime(t, r, wantAt[i]); !at.Equal(wantAt[i]) {
			t.Errorf("attempt %d signed at %v, want %v", i, at, wantAt[i])
		}
	}
	first := a[0]
	for i, r := range a[1:3] {
		if r.ev.ID != first.ev.ID || r.header.Get(events.EventIDHeader) != first.ev.ID || !bytes.Equal(r.body, first.body) {
			t.Errorf("retry %d: id %s body %s; first attempt id %s body %s", i+1, r.ev.ID, r.body, first.ev.ID, first.body)
		}
		if r.header.Get(events.SignatureHeader) == first.header.Get(events.SignatureHeader) {
			t.Errorf("retry %d reused the first attempt's signature", i+1)
		}
	}
	if a[3].ev.ID == first.ev.ID || a[4].ev.ID == a[3].ev.ID {
		t.Error("distinct events share an id")
	}
	ds, err := db.Deliveries(t.Context(), storage.DeliveryFilter{ConversationID: convA})
	if err != nil {
		t.Fatal(err)
	}
	if ds[0].Attempts != 3 || ds[0].Status != storage.DeliveryDelivered || ds[1].Attempts != 1 {
		t.Fatalf("deliveries = %+v", ds)
	}
}

// TestDeadAfterADayThenRetry: a delivery failing for 24 hours (backoff 1s,
// 2s, 4s... at most 5 minutes) is dead; the later events of its
// conversation were never sent; List shows them, Retry revives the dead
// one and everything goes out in order.
func TestDeadAfterADayThenRetry(t *testing.T) {
	ctx := t.Context()
	clk := newClock()
	var up atomic.Bool
	rcv := newReceiver(t, func(int, webhook.Event) int {
		if up.Load() {
			return http.StatusOK
		}
		return http.StatusBadGateway
	})
	hooks := []events.Webhook{rcv.hook()}
	db := openDB(t, hooks...)
	conv := batch(t, db, "T", 3)
	d := events.NewDeliverer(db, hooks, events.Options{Worker: "r1", Now: clk.Now})
	ds, err := db.Deliveries(ctx, storage.DeliveryFilter{ConversationID: conv})
	if err != nil || len(ds) != 3 {
		t.Fatal(ds, err)
	}
	head := ds[0]
	t0 := clk.Now()
	var gaps []time.Duration
	last := t0
	for i := 0; ; i++ {
		if i > 400 {
			t.Fatal("never dead")
		}
		poll(t, d)
		cur, err := db.Delivery(ctx, head.ID)
		if err != nil {
			t.Fatal(err)
		}
		if cur.Status == storage.DeliveryDead {
			if elapsed := clk.Now().Sub(t0); elapsed < 24*time.Hour || elapsed > 24*time.Hour+5*time.Minute {
				t.Fatalf("dead after %v of retries", elapsed)
			}
			if cur.Attempts != len(gaps)+1 || !strings.Contains(cur.LastError, "HTTP 502") {
				t.Fatalf("dead delivery = %+v after %d gaps", cur, len(gaps))
			}
			break
		}
		if cur.Status != storage.DeliveryPending || cur.Attempts != i+1 {
			t.Fatalf("after attempt %d: %+v", i+1, cur)
		}
		gaps = append(gaps, cur.NextAttemptAt.Sub(last))
		last = cur.NextAttemptAt
		clk.Set(cur.NextAttemptAt)
	}
	wantStart := []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 16 * time.Second, 32 * time.Second,
		64 * time.Second, 128 * time.Second, 256 * time.Second, 5 * time.Minute, 5 * time.Minute}
	if !slices.Equal(gaps[:len(wantStart)], wantStart) || slices.Max(gaps) != 5*time.Minute {
		t.Fatalf("backoff = %v…, max %v", gaps[:len(wantStart)], slices.Max(gaps))
	}
	for _, r := range rcv.receipts() {
		if r.ev.ID != rcv.receipts()[0].ev.ID {
			t.Fatalf("a later event (%s %s) was sent while the first was failing", r.ev.Type, r.ev.Call)
		}
	}
	// Nothing moves while it is dead, even with the receiver back.
	up.Store(true)
	clk.Add(time.Hour)
	if n := poll(t, d); n != 0 {
		t.Fatalf("delivered %d behind a dead delivery", n)
	}

	var out bytes.Buffer
	if err := events.List(ctx, db, &out, hooks, true); err != nil {
		t.Fatal(err)
	}
	listing := out.String()
	if !strings.Contains(listing, fmt.Sprintf("\n%d ", head.ID)) || !strings.Contains(listing, "HTTP 502") ||
		!strings.Contains(listing, "tool_call") || !strings.Contains(listing, "http://127.0.0.1") || strings.Contains(listing, "/airlock") {
		t.Fatalf("List -dead:\n%s", listing)
	}
	out.Reset()
	if err := events.List(ctx, db, &out, hooks, false); err != nil {
		t.Fatal(err)
	}
	if strings.Count(out.String(), "waiting") != 2 || strings.Contains(out.String(), "HTTP 502") {
		t.Fatalf("List:\n%s", out.String())
	}

	for _, bad := range []string{"x", "-1", strconv.FormatInt(ds[1].ID, 10), "999999"} {
		if err := events.Retry(ctx, db, bad); err == nil {
			t.Errorf("Retry(%s) succeeded", bad)
		}
	}
	if err := events.Retry(ctx, db, strconv.FormatInt(head.ID, 10)); err != nil {
		t.Fatal(err)
	}
	before := len(rcv.receipts())
	if n := poll(t, d); n != 3 {
		t.Fatalf("after Retry delivered %d, want 3", n)
	}
	var calls []string
	for _, r := range rcv.receipts()[before:] {
		calls = append(calls, r.ev.Call)
	}
	if strings.Join(calls, " ") != "k0 k1 k2" {
		t.Fatalf("after Retry: %v", calls)
	}
	if err := events.Retry(ctx, db, strconv.FormatInt(head.ID, 10)); err == nil || !strings.Contains(err.Error(), "delivered") {
		t.Fatalf("Retry of a delivered one: %v", err)
	}
	out.Reset()
	if err := events.List(ctx, db, &out, hooks, false); err != nil || !strings.Contains(out.String(), "nothing waiting") {
		t.Fatalf("List after delivery: %q, %v", out.String(), err)
	}
}

// TestRunTicksAndPrunes: Run polls on its (injected) ticker and prunes
// delivered rows older than the retention.
func TestRunTicksAndPrunes(t *testing.T) {
	clk := newClock()
	rcv := newReceiver(t, nil)
	hooks := []events.Webhook{rcv.hook()}
	db := openDB(t, hooks...)
	tick := make(chan time.Time)
	var interval time.Duration
	d := events.NewDeliverer(db, hooks, events.Options{Worker: "r1", Now: clk.Now,
		Ticker: func(d time.Duration) (<-chan time.Time, func()) { interval = d; return tick, func() {} }})
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error)
	go func() { done <- d.Run(ctx) }()
	step := func() { tick <- clk.Now(); tick <- clk.Now() } // the second send waits until the first round is over

	step()
	batch(t, db, "T", 2)
	step()
	if n := len(rcv.receipts()); n != 2 {
		t.Fatalf("received %d after a tick, want 2", n)
	}
	if interval != time.Second {
		t.Errorf("ticker interval %v, want 1s", interval)
	}
	clk.Add(6 * 24 * time.Hour)
	step()
	if ds, _ := db.Deliveries(t.Context(), storage.DeliveryFilter{}); len(ds) != 2 {
		t.Fatalf("pruned before the retention: %d left", len(ds))
	}
	clk.Add(24*time.Hour + time.Minute)
	step()
	if ds, _ := db.Deliveries(t.Context(), storage.DeliveryFilter{}); len(ds) != 0 {
		t.Fatalf("%d delivered rows left after 7 days", len(ds))
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run = %v", err)
	}
}

// TestFailedAttempts: a redirect is not followed, a slow receiver times
// out, a refused connection fails; the stored error never holds the
// webhook's path or query (which may carry a token).
func TestFailedAttempts(t *testing.T) {
	var hit atomic.Int64
	target := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { hit.Add(1) }))
	defer target.Close()
	redirect := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, target.URL, http.StatusTemporaryRedirect)
	}))
	defer redirect.Close()
	release := make(chan struct{})
	slow := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { <-release }))
	defer slow.Close()
	defer close(release)
	refused := httptest.NewServer(http.NotFoundHandler())
	refusedURL := refused.URL
	refused.Close()

	for _, c := range []struct {
		name, url, want string
	}{
		{"redirect", redirect.URL + "/hook?token=sekrit", "HTTP 307"},
		{"timeout", slow.URL + "/hook?token=sekrit", "no answer within 100ms"},
		{"refused", refusedURL + "/hook/sekrit", "connection refused"},
	} {
		t.Run(c.name, func(t *testing.T) {
			hooks := []events.Webhook{hookTo(c.url)}
			db := openDB(t, hooks...)
			batch(t, db, "T", 1)
			d := events.NewDeliverer(db, hooks, events.Options{Worker: "r1", Timeout: 100 * time.Millisecond})
			if n := poll(t, d); n != 0 {
				t.Fatalf("delivered %d", n)
			}
			ds, err := db.Deliveries(t.Context(), storage.DeliveryFilter{})
			if err != nil || len(ds) != 1 {
				t.Fatal(ds, err)
			}
			if ds[0].Status != storage.DeliveryPending || ds[0].Attempts != 1 || !strings.Contains(ds[0].LastError, c.want) ||
				strings.Contains(ds[0].LastError, "sekrit") || strings.Contains(ds[0].LastError, "/hook") {
				t.Fatalf("after a failed attempt: status %s, attempts %d, error %q (want %q, no token)", ds[0].Status, ds[0].Attempts, ds[0].LastError, c.want)
			}
		})
	}
	if hit.Load() != 0 {
		t.Fatalf("the redirect was followed %d times", hit.Load())
	}
}

// TestTwoDeliverersSQLite and TestTwoDeliverersPostgres: two deliverers
// (two replicas, each its own pool) on one database send every delivery
// exactly once, never one delivery twice at once, and in order per
// conversation.
func TestTwoDeliverersSQLite(t *testing.T) {
	path := filepath.Join(t.TempDir(), "shared.db")
	testTwoDeliverers(t, "sqlite", path)
}

func TestTwoDeliverersPostgres(t *testing.T) {
	dsn := os.Getenv("AIRLOCK_TEST_POSTGRES_DSN")
	if dsn == "" {
		t.Skip("AIRLOCK_TEST_POSTGRES_DSN not set; start a server with .ci/postgres.sh")
	}
	testTwoDeliverers(t, "postgres", pgtest.FreshSchema(t, dsn, "airlock_events"))
}

func testTwoDeliverers(t *testing.T, driver, dsn string) {
	const convs, perConv = 8, 6
	var (
		mu       sync.Mutex
		inFlight = map[string]int{} // event id → requests being answered
		convBusy = map[int64]int{}
		count    = map[string]int{}
		order    = map[int64][]string{} // conversation → event ids in arrival order
		problems []string
		all      = make(chan struct{})
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var ev webhook.Event
		_ = json.Unmarshal(body, &ev)
		if err := events.Verify(secret, r.Header.Get(events.SignatureHeader), body, time.Now(), time.Minute); err != nil {
			http.Error(w, err.Error(), http.StatusUnauthorized)
			return
		}
		mu.Lock()
		inFlight[ev.ID]++
		convBusy[ev.Conversation.ID]++
		if inFlight[ev.ID] > 1 {
			problems = append(problems, "event "+ev.ID+" sent twice at once")
		}
		if convBusy[ev.Conversation.ID] > 1 {
			problems = append(problems, fmt.Sprintf("conversation %d: two events in flight", ev.Conversation.ID))
		}
		mu.Unlock()
		time.Sleep(2 * time.Millisecond)
		mu.Lock()
		inFlight[ev.ID]--
		convBusy[ev.Conversation.ID]--
		count[ev.ID]++
		order[ev.Conversation.ID] = append(order[ev.Conversation.ID], ev.ID)
		if len(count) == convs*perConv {
			select {
			case <-all:
			default:
				close(all)
			}
		}
		mu.Unlock()
	}))
	defer srv.Close()
	hooks := []events.Webhook{hookTo(srv.URL)}

	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	var dbs []*storage.DB
	for range 2 {
		db, err := storage.Open(ctx, driver, dsn)
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		if err := db.SetWebhooks(events.Config{Webhooks: hooks}.Targets()); err != nil {
			t.Fatal(err)
		}
		dbs = append(dbs, db)
	}
	var wg sync.WaitGroup
	for i, db := range dbs {
		d := events.NewDeliverer(db, hooks, events.Options{Worker: fmt.Sprintf("replica-%d", i), Interval: 5 * time.Millisecond, Parallel: 4})
		wg.Go(func() { _ = d.Run(ctx) })
	}
	// Events arrive while both deliverers run.
	for c := range convs {
		batch(t, dbs[c%2], fmt.Sprintf("T%d", c), perConv)
	}
	select {
	case <-all:
	case <-ctx.Done():
		t.Fatalf("only %d of %d events arrived", len(count), convs*perConv)
	}
	// Stopping while an answer is on its way would make that delivery
	// go again (at least once): wait until every 2xx is recorded.
	for {
		left, err := dbs[0].Deliveries(ctx, storage.DeliveryFilter{Status: []storage.DeliveryStatus{storage.DeliveryPending}})
		if err != nil {
			t.Fatal(err)
		}
		if len(left) == 0 {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	wg.Wait()

	mu.Lock()
	defer mu.Unlock()
	for _, p := range problems {
		t.Error(p)
	}
	for id, n := range count {
		if n != 1 {
			t.Errorf("event %s arrived %d times", id, n)
		}
	}
	ds, err := dbs[0].Deliveries(t.Context(), storage.DeliveryFilter{})
	if err != nil {
		t.Fatal(err)
	}
	want := map[int64][]string{}
	for _, d := range ds {
		if d.Status != storage.DeliveryDelivered {
			t.Errorf("delivery %d is %s", d.ID, d.Status)
		}
		want[d.ConversationID] = append(want[d.ConversationID], d.EventID)
	}
	for conv, ids := range want {
		if !slices.Equal(order[conv], ids) {
			t.Errorf("conversation %d arrived as %v, want %v", conv, order[conv], ids)
		}
	}
}

// batchOf is the batch id of a call reference.
func batchOf(ref string) string {
	id, _, _ := confirm.ParseRef(ref)
	return id
}
