package slack

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/airlockhq/airlock/bot"
	"github.com/airlockhq/airlock/confirm"
	"github.com/airlockhq/airlock/internal/testkit"
	"github.com/airlockhq/airlock/model"
	"github.com/airlockhq/airlock/model/modeltest"
	"github.com/airlockhq/airlock/storage"
	"github.com/airlockhq/airlock/tools"
)

// People and places of the tests.
const (
	chanOps   = "C0OPS"
	chanOther = "C0OTHER"
	dmBob     = "D0BOB"
	alice     = "UALICE"   // approver of #ops
	bob       = "UBOB"     // asks
	carol     = "UCAROL"   // approver through the group SOPS
	mallory   = "UMALLORY" // nobody
	groupOps  = "SOPS"
	mentionTS = "1700000000.000100"
)

// countTool is a test tool that counts its runs.
type countTool struct {
	name    string
	confirm bool
	runs    atomic.Int64
	args    atomic.Value // string: the arguments of the last run
	// unknownRuns: that many first runs end with their outcome unknown
	// (the connection was reset after the request went out).
	unknownRuns int64
}

// lastArgs are the arguments the tool last ran with.
func (c *countTool) lastArgs() string {
	s, _ := c.args.Load().(string)
	return s
}

func (c *countTool) Spec() model.ToolSpec {
	return model.ToolSpec{Name: c.name, Description: "test tool", Parameters: json.RawMessage(`{"type":"object"}`)}
}
func (c *countTool) Confirm() bool { return c.confirm }
func (c *countTool) Validate(args json.RawMessage) error {
	var m map[string]any
	if err := json.Unmarshal(args, &m); err != nil {
		return fmt.Errorf("invalid arguments: not a JSON object")
	}
	return nil
}
func (c *countTool) Summary(args json.RawMessage) (string, error) {
	var m map[string]any
	_ = json.Unmarshal(args, &m)
	return fmt.Sprintf("%s %v", c.name, m["service"]), nil
}
func (c *countTool) Run(_ context.Context, args json.RawMessage, _ string) (string, error) {
	c.args.Store(string(args))
	if c.runs.Add(1) <= c.unknownRuns {
		return "", fmt.Errorf("read: connection reset by peer: %w", tools.ErrOutcomeUnknown)
	}
	return c.name + " done", nil
}

type toolSet map[string]*countTool

func (t toolSet) Get(name string) (tools.Tool, bool) {
	c, ok := t[name]
	if !ok {
		return nil, false
	}
	return c, true
}

func (t toolSet) Specs() []model.ToolSpec {
	var out []model.ToolSpec
	for _, c := range t {
		out = append(out, c.Spec())
	}
	return out
}

// world is a real bot on real SQLite, a scripted model, the adapter under
// test and the fake Slack.
type world struct {
	t      *testing.T
	mode   string
	fake   *fakeSlack
	db     *storage.DB
	model  *modeltest.Scripted
	tools  toolSet
	bot    *bot.Bot
	ad     *Adapter
	events *httptest.Server // http mode: the adapter's Handler
	seq    atomic.Int64
	logs   *testkit.Buffer
}

func newWorld(t *testing.T, mode string) *world {
	t.Helper()
	return newWorldWith(t, mode, nil)
}

// worldChannels is the world's channels: alice and the ops group approve
// in #ops, bob anywhere else and in DMs.
func worldChannels() *bot.Channels {
	return bot.NewChannels([]bot.Channel{
		{Platform: Platform, ID: chanOps, Approvers: []string{alice}, ApproverGroups: []string{groupOps}},
		{Platform: Platform, ID: "*", Approvers: []string{bob}},
		{Platform: Platform, ID: bot.DMChannel, Approvers: []string{bob}},
	})
}

func newWorldWith(t *testing.T, mode string, edit func(*bot.Config)) *world {
	t.Helper()
	return newWorldOn(t, mode, "sqlite", filepath.Join(t.TempDir(), "a.db"), edit)
}

// newWorldOn is newWorldWith on a database of a driver ("sqlite": a file,
// "postgres": a DSN).
func newWorldOn(t *testing.T, mode, driver, dsn string, edit func(*bot.Config)) *world {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	w := &world{t: t, mode: mode, fake: newFakeSlack(t), model: modeltest.NewScripted(), logs: &testkit.Buffer{}}
	// The store reads the bot's clock when a test sets one (as in
	// production both read the database's).
	var botNow func() time.Time
	db, err := storage.Open(ctx, driver, dsn, storage.WithClock(func() time.Time {
		if botNow != nil {
			return botNow()
		}
		return time.Now()
	}))
	if err != nil {
		t.Fatal(err)
	}
	w.db = db
	w.tools = toolSet{
		"service_status": {name: "service_status"},
		"deploy":         {name: "deploy", confirm: true},
	}
	w.fake.setGroup(groupOps, carol)
	logger := slog.New(slog.NewTextHandler(w.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	cfg0 := bot.Config{
		Store:    db,
		Model:    w.model,
		Tools:    w.tools,
		Channels: worldChannels(),
		Timeout:  30 * time.Minute,
		Logger:   logger,
		WorkerID: "test-" + mode,
	}
	if edit != nil {
		edit(&cfg0)
	}
	botNow = cfg0.Now
	b, err := bot.New(cfg0)
	if err != nil {
		t.Fatal(err)
	}
	w.bot = b
	cfg := Config{
		Mode:       mode,
		BotToken:   testBotToken,
		APIURL:     w.fake.apiURL(),
		HTTPClient: &http.Client{Timeout: 10 * time.Second},
		Logger:     logger,
	}
	if mode == ModeSocket {
		cfg.AppToken = testAppToken
	} else {
		cfg.SigningSecret = testSecret
	}
	ad, err := New(cfg, b, db)
	if err != nil {
		t.Fatal(err)
	}
	w.ad = ad
	b.Register(Platform, ad)
	if err := ad.Start(ctx); err != nil {
		t.Fatal(err)
	}
	runErr := make(chan error, 1)
	go func() { runErr <- ad.Run(ctx) }()
	if mode == ModeHTTP {
		mux := http.NewServeMux()
		mux.Handle("/slack/events", ad.Handler())
		w.events = httptest.NewServer(mux)
	} else {
		waitFor(t, "socket mode connection", func() bool { return w.fake.connections() > 0 })
	}
	t.Cleanup(func() {
		stopRun(t, "Run", cancel, runErr)
		if w.events != nil {
			w.events.Close()
		}
		db.Close()
		if t.Failed() {
			t.Logf("logs:\n%s", w.logs.String())
		}
		if strings.Contains(w.logs.String(), testBotToken) || strings.Contains(w.logs.String(), testAppToken) || strings.Contains(w.logs.String(), testSecret) {
			t.Error("a secret reached the logs")
		}
	})
	return w
}

// --- payloads, as Slack sends them ---

func (w *world) eventID() string { return fmt.Sprintf("Ev%08d", w.seq.Add(1)) }

func eventCallback(id string, event map[string]any) map[string]any {
	return map[string]any{
		"token": "Jhj5dZrVaK7ZwHHjRyZWjbDl", "team_id": "T0TEST", "api_app_id": "A0TEST", "type": "event_callback",
		"event_id": id, "event_time": 1700000000, "event": event,
		"authorizations": []any{map[string]any{"team_id": "T0TEST", "user_id": botUser, "is_bot": true}},
	}
}

func mention(id, channel, user, ts, threadTS, text string) map[string]any {
	ev := map[string]any{"type": "app_mention", "user": user, "text": text, "ts": ts, "channel": channel, "event_ts": ts, "team": "T0TEST"}
	if threadTS != "" {
		ev["thread_ts"] = threadTS
	}
	return eventCallback(id, ev)
}

func message(id, channel, channelType, user, ts, threadTS, text string) map[string]any {
	ev := map[string]any{"type": "message", "user": user, "text": text, "ts": ts, "channel": channel, "channel_type": channelType, "event_ts": ts, "team": "T0TEST"}
	if threadTS != "" {
		ev["thread_ts"] = threadTS
	}
	return eventCallback(id, ev)
}

// anyCardTS stands for "the message that carries this button" in a
// click blockAction makes: deliverInteraction puts in the ts of the
// message the fake Slack posted with that button in that channel, as
// Slack would. A test clicking on a message of its choosing uses clickOn.
const anyCardTS = "1799999999.000001"

func blockAction(user, channel, threadTS, actionID, ref string) map[string]any {
	msg := map[string]any{"type": "message", "ts": anyCardTS, "user": botUser, "bot_id": "BBOT", "text": "Approval needed"}
	container := map[string]any{"type": "message", "message_ts": anyCardTS, "channel_id": channel, "is_ephemeral": false}
	if threadTS != "" {
		msg["thread_ts"] = threadTS
		container["thread_ts"] = threadTS
	}
	return map[string]any{
		"type": "block_actions", "token": "Jhj5dZrVaK7ZwHHjRyZWjbDl", "trigger_id": "12345.98765.abcd2358fdea",
		"user":       map[string]any{"id": user, "username": strings.ToLower(user), "name": strings.ToLower(user), "team_id": "T0TEST"},
		"team":       map[string]any{"id": "T0TEST", "domain": "airlock-test"},
		"api_app_id": "A0TEST", "container": container,
		"channel": map[string]any{"id": channel, "name": "ops"},
		"message": msg,
		"actions": []any{map[string]any{"action_id": actionID, "block_id": "actions_1", "value": ref, "type": "button", "action_ts": "1800000001.000001",
			"text": map[string]any{"type": "plain_text", "text": "Allow", "emoji": true}}},
		"response_url": "https://hooks.slack.com/actions/T0TEST/1/xyz",
	}
}

func viewSubmission(user, privateMetadata, reason string) map[string]any {
	return map[string]any{
		"type": "view_submission", "token": "Jhj5dZrVaK7ZwHHjRyZWjbDl", "trigger_id": "12345.98765.ffff",
		"user": map[string]any{"id": user, "username": strings.ToLower(user), "team_id": "T0TEST"},
		"team": map[string]any{"id": "T0TEST"}, "api_app_id": "A0TEST",
		"view": map[string]any{
			"id": "V0001", "type": "modal", "callback_id": CallbackDenyReason, "private_metadata": privateMetadata,
			"state": map[string]any{"values": map[string]any{
				reasonBlockID: map[string]any{reasonActionID: map[string]any{"type": "plain_text_input", "value": reason}},
			}},
		},
	}
}

// editSubmission is the edit modal's submission with the arguments typed.
func editSubmission(user, privateMetadata, args string) map[string]any {
	p := viewSubmission(user, privateMetadata, "")
	v := p["view"].(map[string]any)
	v["callback_id"] = CallbackEdit
	v["state"] = map[string]any{"values": map[string]any{
		EditBlockID: map[string]any{editActionID: map[string]any{"type": "plain_text_input", "value": args}},
	}}
	return p
}

// --- delivery ---

// deliverEvent sends an Events API payload the mode's way and waits for
// the delivery to be acknowledged.
func (w *world) deliverEvent(payload map[string]any, retry int) {
	w.t.Helper()
	if w.mode == ModeSocket {
		id := w.fake.sendEnvelope("events_api", payload, retry)
		waitFor(w.t, "ack of "+id, func() bool { return w.fake.acked(id) })
		return
	}
	body, _ := json.Marshal(payload)
	h := http.Header{"Content-Type": {"application/json"}}
	if retry > 0 {
		h.Set(headerRetryNum, strconv.Itoa(retry))
		h.Set(headerRetryWhy, "http_timeout")
	}
	if code, resp := w.post(body, h, true, time.Now()); code != http.StatusOK {
		w.t.Fatalf("event: HTTP %d %s", code, resp)
	}
}

// onMessage sets the message a click was on (container and message).
func onMessage(p map[string]any, ts string) map[string]any {
	if c, ok := p["container"].(map[string]any); ok {
		c["message_ts"] = ts
	}
	if m, ok := p["message"].(map[string]any); ok {
		m["ts"] = ts
	}
	return p
}

// resolveMessage puts in a click made with anyCardTS the ts of the
// message carrying its button in its channel (the latest such message);
// a button no message carried keeps anyCardTS, a message Airlock never
// posted.
func (w *world) resolveMessage(payload map[string]any) {
	c, ok := payload["container"].(map[string]any)
	if !ok || c["message_ts"] != anyCardTS {
		return
	}
	acts, _ := payload["actions"].([]any)
	if len(acts) == 0 {
		return
	}
	value, _ := acts[0].(map[string]any)["value"].(string)
	channel, _ := c["channel_id"].(string)
	if ts := w.fake.messageWith(channel, value); ts != "" {
		onMessage(payload, ts)
	}
}

// clickOn is a click on a message the fake Slack saw posted (a card, a
// copy of it in a DM): its channel, its thread and its ts.
func clickOn(msg apiCall, user, actionID, ref string) map[string]any {
	return onMessage(blockAction(user, msg.param("channel"), msg.param("thread_ts"), actionID, ref), msg.TS)
}

// deliverInteraction sends an interactivity payload the mode's way.
func (w *world) deliverInteraction(payload map[string]any) {
	w.t.Helper()
	w.resolveMessage(payload)
	if w.mode == ModeSocket {
		id := w.fake.sendEnvelope("interactive", payload, 0)
		waitFor(w.t, "ack of "+id, func() bool { return w.fake.acked(id) })
		return
	}
	raw, _ := json.Marshal(payload)
	body := []byte(url.Values{"payload": {string(raw)}}.Encode())
	if code, resp := w.post(body, http.Header{"Content-Type": {"application/x-www-form-urlencoded"}}, true, time.Now()); code != http.StatusOK {
		w.t.Fatalf("interaction: HTTP %d %s", code, resp)
	}
}

// submitView sends a view_submission the mode's way and returns Slack's
// answer: the HTTP response's body, or the Socket Mode ack's payload;
// "" for an empty answer.
func (w *world) submitView(payload map[string]any) string {
	w.t.Helper()
	if w.mode == ModeSocket {
		id := w.fake.sendEnvelope("interactive", payload, 0)
		waitFor(w.t, "ack of "+id, func() bool { return w.fake.acked(id) })
		return string(w.fake.ackPayload(id))
	}
	raw, _ := json.Marshal(payload)
	body := []byte(url.Values{"payload": {string(raw)}}.Encode())
	code, resp := w.post(body, http.Header{"Content-Type": {"application/x-www-form-urlencoded"}}, true, time.Now())
	if code != http.StatusOK {
		w.t.Fatalf("view_submission: HTTP %d %s", code, resp)
	}
	return resp
}

// post sends a body to /slack/events, signed (or not) at a time.
func (w *world) post(body []byte, h http.Header, sign bool, at time.Time) (int, string) {
	w.t.Helper()
	req, _ := http.NewRequest(http.MethodPost, w.events.URL+"/slack/events", bytes.NewReader(body))
	for k, v := range h {
		req.Header[k] = v
	}
	if sign {
		ts := strconv.FormatInt(at.Unix(), 10)
		req.Header.Set(headerTimestamp, ts)
		req.Header.Set(headerSignature, "v0="+fmt.Sprintf("%x", Sign(testSecret, ts, body)))
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		w.t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(out)
}

// --- what Slack saw ---

type button struct {
	Type, ActionID, Value, Style string
}

// cardButtons parses the blocks of a chat.postMessage or chat.update.
func cardButtons(t *testing.T, c apiCall) []button {
	t.Helper()
	var blocks []struct {
		Type      string   `json:"type"`
		Elements  []button `json:"elements"`
		Accessory *button  `json:"accessory"`
	}
	if err := json.Unmarshal([]byte(c.param("blocks")), &blocks); err != nil {
		t.Fatalf("%s blocks: %v", c.Method, err)
	}
	var out []button
	for _, b := range blocks {
		for _, e := range b.Elements {
			if e.Type == "button" {
				out = append(out, e)
			}
		}
		if b.Accessory != nil && b.Accessory.Type == "button" {
			out = append(out, *b.Accessory)
		}
	}
	return out
}

func (b *button) UnmarshalJSON(p []byte) error {
	var raw struct {
		Type     string `json:"type"`
		ActionID string `json:"action_id"`
		Value    string `json:"value"`
		Style    string `json:"style"`
	}
	if err := json.Unmarshal(p, &raw); err != nil {
		return err
	}
	*b = button{Type: raw.Type, ActionID: raw.ActionID, Value: raw.Value, Style: raw.Style}
	return nil
}

// isCard reports whether a chat.postMessage posted a card (its blocks
// open with the card's header).
func isCard(c apiCall) bool {
	return c.Refused == "" && strings.Contains(c.param("blocks"), `"block_id":"header"`)
}

// cards are the chat.postMessage calls that posted a card.
func (w *world) cards() []apiCall {
	var out []apiCall
	for _, c := range w.fake.callsTo("chat.postMessage") {
		if isCard(c) {
			out = append(out, c)
		}
	}
	return out
}

// waitCard waits for the n-th card (1-based) and returns it.
// replyCard has user mention the bot with text in the thread of
// mentionTS (the message's ts is ts), waits for the n-th card and for the
// adapter's work to end, and returns the card.
func (w *world) replyCard(user, ts, text string, n int) apiCall {
	w.deliverEvent(mention(w.eventID(), chanOps, user, ts, mentionTS, "<@"+botUser+"> "+text), 0)
	c := w.waitCard(n)
	w.ad.Wait()
	return c
}

func (w *world) waitCard(n int) apiCall {
	w.t.Helper()
	waitFor(w.t, fmt.Sprintf("card %d", n), func() bool { return len(w.cards()) >= n })
	return w.cards()[n-1]
}

// refByStyle finds the reference on the card's first button of a style:
// Allow is the primary button, Deny the danger one.
func refByStyle(t *testing.T, card apiCall, style string) string {
	t.Helper()
	for _, b := range cardButtons(t, card) {
		if b.Style == style {
			return b.Value
		}
	}
	t.Fatalf("no %s button on the card", style)
	return ""
}

// texts are the chat.postMessage calls in a channel that are no card.
func (w *world) texts(channel string) []apiCall {
	var out []apiCall
	for _, c := range w.fake.callsTo("chat.postMessage") {
		if !isCard(c) && c.param("channel") == channel {
			out = append(out, c)
		}
	}
	return out
}

// allowAndWait clicks Allow on ref as user, in channel's thread ts, waits
// for the answer containing answer in channel, then for the adapter to be
// idle, and returns the answer.
func (w *world) allowAndWait(user, channel, ts, ref, answer string) apiCall {
	w.t.Helper()
	w.deliverInteraction(blockAction(user, channel, ts, ActionAllow, ref))
	posted := w.waitText(channel, answer)
	w.ad.Wait()
	return posted
}

// askDeploy has bob ask the bot, in a new thread in chanOps, to deploy
// api, and returns the card that is posted.
func (w *world) askDeploy() apiCall {
	w.t.Helper()
	w.deliverEvent(mention(w.eventID(), chanOps, bob, mentionTS, "", "<@"+botUser+"> deploy api"), 0)
	return w.waitCard(1)
}

// waitNothingChanged waits for the adapter to be idle and fails with why
// if the deploy tool ran or a card was updated.
func (w *world) waitNothingChanged(why string) {
	w.t.Helper()
	w.ad.Wait()
	if w.tools["deploy"].runs.Load() != 0 || len(w.fake.callsTo("chat.update")) != 0 {
		w.t.Fatal(why)
	}
}

func (w *world) waitText(channel, contains string) apiCall {
	w.t.Helper()
	return w.waitCall(fmt.Sprintf("%q posted in %s", contains, channel), contains, func() []apiCall { return w.texts(channel) })
}

// waitCall waits until one of calls() has a text containing contains.
func (w *world) waitCall(what, contains string, calls func() []apiCall) apiCall {
	w.t.Helper()
	var found apiCall
	waitFor(w.t, what, func() bool {
		for _, c := range calls() {
			if strings.Contains(c.param("text"), contains) {
				found = c
				return true
			}
		}
		return false
	})
	return found
}

func (w *world) ephemerals(user string) []apiCall {
	var out []apiCall
	for _, c := range w.fake.callsTo("chat.postEphemeral") {
		if c.param("user") == user {
			out = append(out, c)
		}
	}
	return out
}

func (w *world) waitEphemeral(user, contains string) apiCall {
	w.t.Helper()
	return w.waitCall(fmt.Sprintf("ephemeral %q to %s", contains, user), contains, func() []apiCall { return w.ephemerals(user) })
}

func (w *world) audit(kind confirm.AuditKind) []confirm.AuditEvent {
	evs, err := w.db.AuditEvents(context.Background(), confirm.AuditFilter{})
	if err != nil {
		w.t.Fatal(err)
	}
	var out []confirm.AuditEvent
	for _, e := range evs {
		if e.Kind == kind {
			out = append(out, e)
		}
	}
	return out
}

var lastToolResults = modeltest.LastToolResults

var tc = modeltest.ToolCall

// scriptDeploy queues a paused reply (status ungated + deploy gated) and
// the answer after it.
func (w *world) scriptDeploy(answer string) {
	w.model.Push(model.Message{Text: "I'll check api, then deploy it.", ToolCalls: []confirm.ToolCall{
		tc("call_status", "service_status", `{"service":"api"}`),
		tc("call_deploy", "deploy", `{"service":"api","environment":"production"}`),
	}})
	w.model.PushText(answer)
}

// --- the tests ---

// A message in the thread without a mention is an aside: no model call,
// no card superseded, and the model sees it on the next turn.
func TestAsideKeptAsContextAndNeverSupersedes(t *testing.T) {
	for _, mode := range []string{ModeSocket, ModeHTTP} {
		t.Run(mode, func(t *testing.T) {
			w := newWorld(t, mode)
			w.scriptDeploy("Deployed.")
			card := w.askDeploy()
			w.ad.Wait()

			w.deliverEvent(message(w.eventID(), chanOps, "channel", alice, "1700000000.000200", mentionTS, "is the freeze over?"), 0)
			// Chatter in a thread without a conversation is not kept.
			w.deliverEvent(message(w.eventID(), chanOps, "channel", alice, "1700000000.000300", "1699999999.000001", "unrelated"), 0)
			// The bot's own message and edits are ignored.
			own := message(w.eventID(), chanOps, "channel", botUser, "1700000000.000400", mentionTS, "mine")
			own["event"].(map[string]any)["bot_id"] = "BBOT"
			w.deliverEvent(own, 0)
			edit := message(w.eventID(), chanOps, "channel", alice, "1700000000.000500", mentionTS, "edited")
			edit["event"].(map[string]any)["subtype"] = "message_changed"
			w.deliverEvent(edit, 0)
			w.ad.Wait()
			if n := len(w.model.Requests()); n != 1 {
				t.Fatalf("model called %d times after an aside, want 1", n)
			}
			if n := len(w.fake.callsTo("chat.update")); n != 0 {
				t.Fatalf("the aside touched the card (%d updates)", n)
			}

			w.deliverInteraction(blockAction(alice, chanOps, mentionTS, ActionAllow, refByStyle(t, card, "primary")))
			w.waitText(chanOps, "Deployed.")
			w.ad.Wait()
			reqs := w.model.Requests()
			if len(reqs) != 2 {
				t.Fatalf("model got %d requests, want 2", len(reqs))
			}
			var saw []string
			for _, m := range reqs[1].Messages {
				if m.Role == model.RoleUser {
					saw = append(saw, m.Text)
				}
			}
			joined := strings.Join(saw, "\n")
			if !strings.Contains(joined, "is the freeze over?") || strings.Contains(joined, "unrelated") || strings.Contains(joined, "mine") || strings.Contains(joined, "edited") {
				t.Fatalf("model's user messages: %q", saw)
			}
		})
	}
}

// "Deny with reason…" opens a modal; its submission denies with the text,
// which reaches the model.
func TestDenyWithReasonReachesModel(t *testing.T) {
	for _, mode := range []string{ModeSocket, ModeHTTP} {
		t.Run(mode, func(t *testing.T) {
			w := newWorld(t, mode)
			w.scriptDeploy("Understood, not deploying.")
			card := w.askDeploy()
			ref := refByStyle(t, card, "danger")

			w.deliverInteraction(blockAction(alice, chanOps, mentionTS, ActionDenyReason, ref))
			waitFor(t, "views.open", func() bool { return len(w.fake.callsTo("views.open")) == 1 })
			open := w.fake.callsTo("views.open")[0]
			if open.param("trigger_id") != "12345.98765.abcd2358fdea" {
				t.Errorf("views.open trigger_id %q", open.param("trigger_id"))
			}
			view := open.JSON["view"].(map[string]any)
			meta, _ := view["private_metadata"].(string)
			if view["callback_id"] != CallbackDenyReason || !strings.Contains(meta, ref) || !strings.Contains(meta, chanOps) {
				t.Fatalf("modal: callback %v metadata %q", view["callback_id"], meta)
			}
			if js, _ := json.Marshal(view); !strings.Contains(string(js), "deploy") {
				t.Errorf("the modal does not say which call is denied: %s", js)
			}
			if w.tools["deploy"].runs.Load() != 0 || len(w.model.Requests()) != 1 {
				t.Fatal("opening the modal decided something")
			}

			w.deliverInteraction(viewSubmission(alice, meta, "  change freeze until Monday  "))
			w.waitText(chanOps, "Understood, not deploying.")
			w.ad.Wait()
			results := lastToolResults(t, w.model.Requests()[1])
			var deployResult string
			for _, r := range results {
				if r.Name == "deploy" {
					deployResult = r.Content
				}
			}
			if !strings.Contains(deployResult, "change freeze until Monday") {
				t.Fatalf("deploy result %q does not carry the reason", deployResult)
			}
			if w.tools["deploy"].runs.Load() != 0 {
				t.Fatal("the denied call ran")
			}
			updates := w.fake.callsTo("chat.update")
			last := blocksText(t, updates[len(updates)-1])
			if !strings.Contains(last, "Denied by <@"+alice+">") || !strings.Contains(last, "change freeze until Monday") {
				t.Errorf("final card: %s", last)
			}
		})
	}
}

// A member of an approver user group may approve; the group is resolved
// with usergroups.users.list and cached.
func TestApproverThroughUserGroup(t *testing.T) {
	w := newWorld(t, ModeSocket)
	w.scriptDeploy("Done.")
	card := w.askDeploy()
	if !strings.Contains(blocksText(t, card), "<!subteam^"+groupOps+">") {
		t.Errorf("the footer does not name the group")
	}
	w.deliverInteraction(blockAction(mallory, chanOps, mentionTS, ActionAllow, refByStyle(t, card, "primary")))
	w.waitEphemeral(mallory, "can't approve")
	w.deliverInteraction(blockAction(carol, chanOps, mentionTS, ActionAllow, refByStyle(t, card, "primary")))
	w.waitText(chanOps, "Done.")
	w.ad.Wait()
	if w.tools["deploy"].runs.Load() != 1 {
		t.Fatalf("deploy ran %d times", w.tools["deploy"].runs.Load())
	}
	lists := w.fake.callsTo("usergroups.users.list")
	if len(lists) != 1 || lists[0].param("usergroup") != groupOps {
		t.Fatalf("usergroups.users.list calls: %+v (want one, cached)", lists)
	}
}

// Twenty concurrent clicks on one Allow run the tool once.
func TestConcurrentClicksRunOnce(t *testing.T) {
	for _, mode := range []string{ModeSocket, ModeHTTP} {
		t.Run(mode, func(t *testing.T) {
			w := newWorld(t, mode)
			w.model.PushCalls(tc("call_deploy", "deploy", `{"service":"api"}`)).PushText("Deployed once.")
			w.deliverEvent(mention(w.eventID(), chanOps, bob, mentionTS, "", "<@"+botUser+"> deploy api"), 0)
			ref := refByStyle(t, w.waitCard(1), "primary")
			var wg sync.WaitGroup
			for i := 0; i < 20; i++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					w.deliverInteraction(blockAction(alice, chanOps, mentionTS, ActionAllow, ref))
				}()
			}
			wg.Wait()
			w.waitText(chanOps, "Deployed once.")
			w.ad.Wait()
			if n := w.tools["deploy"].runs.Load(); n != 1 {
				t.Fatalf("deploy ran %d times, want 1", n)
			}
			if n := len(w.ephemerals(alice)); n != 19 {
				t.Errorf("%d ephemeral replies to the losing clicks, want 19", n)
			}
			if n := len(w.model.Requests()); n != 2 {
				t.Errorf("model got %d requests, want 2", n)
			}
		})
	}
}

// A retried event (same event_id) starts no second turn.
func TestRetriedEventStartsNoSecondTurn(t *testing.T) {
	for _, mode := range []string{ModeSocket, ModeHTTP} {
		t.Run(mode, func(t *testing.T) {
			w := newWorld(t, mode)
			w.model.PushText("Hello once.").PushText("Hello twice?")
			ev := mention(w.eventID(), chanOps, bob, mentionTS, "", "<@"+botUser+"> hi")
			w.deliverEvent(ev, 0)
			w.deliverEvent(ev, 1)
			w.deliverEvent(ev, 2)
			w.waitText(chanOps, "Hello once.")
			w.ad.Wait()
			if n := len(w.model.Requests()); n != 1 {
				t.Fatalf("model got %d requests for one event delivered three times", n)
			}
			if n := len(w.texts(chanOps)); n != 1 {
				t.Fatalf("%d answers posted", n)
			}
		})
	}
}

// In a DM every message is a turn; outside a thread they share the DM's
// one conversation and the bot answers at the top of the DM.
func TestDirectMessagesAreTurns(t *testing.T) {
	w := newWorld(t, ModeSocket)
	w.model.PushText("First answer.").PushText("Second answer.")
	w.deliverEvent(message(w.eventID(), dmBob, "im", bob, "1700000001.000100", "", "what's up?"), 0)
	first := w.waitText(dmBob, "First answer.")
	if first.param("thread_ts") != "" {
		t.Errorf("DM answer in thread %q, want the top of the DM", first.param("thread_ts"))
	}
	w.ad.Wait()
	w.deliverEvent(message(w.eventID(), dmBob, "im", bob, "1700000002.000100", "", "and now?"), 0)
	w.waitText(dmBob, "Second answer.")
	w.ad.Wait()
	reqs := w.model.Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d model requests", len(reqs))
	}
	var users int
	for _, m := range reqs[1].Messages {
		if m.Role == model.RoleUser {
			users++
		}
	}
	if users != 2 {
		t.Errorf("the second DM turn saw %d user messages, want both (one conversation per DM)", users)
	}
	ok, err := w.bot.HasConversation(context.Background(), bot.Thread{Platform: Platform, Channel: dmBob, Thread: ""})
	if err != nil || !ok {
		t.Errorf("no DM conversation under thread \"\": %v %v", ok, err)
	}
}

// The model's text is escaped: it cannot ping @channel or people.
func TestAnswerIsEscaped(t *testing.T) {
	w := newWorld(t, ModeSocket)
	w.model.PushText("Done <!channel> & <@UALICE> <https://evil.example|click>")
	w.deliverEvent(mention(w.eventID(), chanOps, bob, mentionTS, "", "<@"+botUser+"> hi"), 0)
	got := w.waitText(chanOps, "Done").param("text")
	if strings.Contains(got, "<") || !strings.Contains(got, "&lt;!channel&gt; &amp; &lt;@UALICE&gt;") {
		t.Fatalf("posted %q", got)
	}
}

// "Show full arguments" opens a modal holding the whole arguments.
func TestShowFullArguments(t *testing.T) {
	w := newWorld(t, ModeHTTP)
	long := `{"service":"api","notes":"` + strings.Repeat("n", 3000) + `"}`
	w.model.PushCalls(tc("call_deploy", "deploy", long))
	w.deliverEvent(mention(w.eventID(), chanOps, bob, mentionTS, "", "<@"+botUser+"> deploy"), 0)
	card := w.waitCard(1)
	var ref string
	for _, b := range cardButtons(t, card) {
		if b.ActionID == ActionShowArgs {
			ref = b.Value
		}
	}
	if ref == "" {
		t.Fatal("no Show full arguments button")
	}
	w.deliverInteraction(blockAction(mallory, chanOps, mentionTS, ActionShowArgs, ref))
	waitFor(t, "views.open", func() bool { return len(w.fake.callsTo("views.open")) == 1 })
	js, _ := json.Marshal(w.fake.callsTo("views.open")[0].JSON["view"])
	if n := strings.Count(string(js), "n"); n < 3000 {
		t.Errorf("the modal holds %d of the 3000 n's", n)
	}
	w.ad.Wait()
	if w.tools["deploy"].runs.Load() != 0 {
		t.Fatal("showing arguments ran something")
	}
}

// A mention with nothing else gets a hint, and no turn.
func TestEmptyMentionGetsHint(t *testing.T) {
	w := newWorld(t, ModeSocket)
	w.deliverEvent(mention(w.eventID(), chanOps, bob, mentionTS, "", "<@"+botUser+">   "), 0)
	w.waitText(chanOps, "Mention me with what you need")
	w.ad.Wait()
	if n := len(w.model.Requests()); n != 0 {
		t.Fatalf("%d model requests", n)
	}
}

// A reminder before expiry mentions the approvers for real; a click on a
// superseded or an expired card gets an ephemeral reply and changes
// nothing.
func TestReminderSupersededAndExpired(t *testing.T) {
	var now atomic.Int64
	now.Store(time.Now().UnixNano())
	clock := func() time.Time { return time.Unix(0, now.Load()) }
	w := newWorldWith(t, ModeSocket, func(c *bot.Config) {
		c.Now = clock
		c.RemindBefore = 5 * time.Minute
	})
	ctx := context.Background()

	// Superseded: a new mention in the thread abandons the waiting card.
	w.model.PushCalls(tc("call_deploy", "deploy", `{"service":"api"}`)).PushText("OK, something else then.")
	w.deliverEvent(mention(w.eventID(), chanOps, bob, mentionTS, "", "<@"+botUser+"> deploy api"), 0)
	old := refByStyle(t, w.waitCard(1), "primary")
	w.ad.Wait()
	w.deliverEvent(mention(w.eventID(), chanOps, bob, "1700000000.000200", mentionTS, "<@"+botUser+"> never mind"), 0)
	w.waitText(chanOps, "OK, something else then.")
	w.ad.Wait()
	w.deliverInteraction(blockAction(alice, chanOps, mentionTS, ActionAllow, old))
	w.waitEphemeral(alice, "superseded")
	w.ad.Wait()
	if w.tools["deploy"].runs.Load() != 0 {
		t.Fatal("a superseded call ran")
	}

	// Reminder, then expiry.
	const other = "1700000001.000100"
	w.model.PushCalls(tc("call_deploy2", "deploy", `{"service":"web <!channel> <@UMALLORY> :skull: \u202e"}`)).PushText("It expired, <@UALICE> <!subteam^SOPS>.")
	w.deliverEvent(mention(w.eventID(), chanOps, bob, other, "", "<@"+botUser+"> deploy web"), 0)
	ref := refByStyle(t, w.waitCard(2), "primary")
	w.ad.Wait()
	now.Add(int64(26 * time.Minute))
	if err := w.bot.Sweep(ctx); err != nil {
		t.Fatal(err)
	}
	reminder := w.waitText(chanOps, "still needs a decision")
	if got := reminder.param("text"); !strings.HasPrefix(got, "<@"+alice+">, <!subteam^"+groupOps+">: ") || reminder.param("thread_ts") != other {
		t.Fatalf("reminder %q in thread %q", got, reminder.param("thread_ts"))
	}
	// Only the approvers are mentioned; the quoted read-back is inert.
	shown, live := readBlocks(t, []byte(reminder.param("blocks")))
	if bad := liveProblems(live+reminder.param("text"), shown); len(bad) != 0 || strings.Count(live+reminder.param("text"), "<") != 4 {
		t.Fatalf("reminder live beyond the approvers: %v\ntext %q\nlive %q", bad, reminder.param("text"), live)
	}
	if !strings.Contains(shown, "deploy web <!channel> <@UMALLORY> :skull: \\u202e") {
		t.Errorf("reminder reads %q", shown)
	}
	now.Add(int64(5 * time.Minute))
	if err := w.bot.Sweep(ctx); err != nil {
		t.Fatal(err)
	}
	// The model's answer naming the approvers mentions nobody.
	if got := w.waitText(chanOps, "It expired").param("text"); got != "It expired, &lt;@UALICE&gt; &lt;!subteam^SOPS&gt;." {
		t.Errorf("answer posted as %q", got)
	}
	w.deliverInteraction(blockAction(alice, chanOps, other, ActionAllow, ref))
	waitFor(t, "second ephemeral", func() bool { return len(w.ephemerals(alice)) == 2 })
	w.ad.Wait()
	if w.tools["deploy"].runs.Load() != 0 {
		t.Fatal("an expired call ran")
	}
	updates := w.fake.callsTo("chat.update")
	if last := blocksText(t, updates[len(updates)-1]); !strings.Contains(last, "Expired") || len(cardButtons(t, updates[len(updates)-1])) != 0 {
		t.Errorf("expired card: %s", last)
	}
}

// A group DM (mpim) is served as a DM: only the `id: dm` entry applies
// ("*" and channel entries do not). A message there that mentions the bot
// is a turn in that message's thread, taken from its message.mpim event
// (its app_mention twin, if Slack sends one, starts nothing more); thread
// replies without a mention are asides; the dm entry's approvers decide.
func TestGroupDMsAreServedAsDMs(t *testing.T) {
	for _, mode := range []string{ModeSocket, ModeHTTP} {
		t.Run(mode, func(t *testing.T) {
			w := newWorldWith(t, mode, func(c *bot.Config) {
				c.Channels = bot.NewChannels([]bot.Channel{
					{Platform: Platform, ID: chanOps, Approvers: []string{bob}},
					{Platform: Platform, ID: bot.DMChannel, Approvers: []string{alice}},
				})
			})
			const group, top = "G0GROUPDM", "1700000300.000100"
			w.scriptDeploy("Deployed from the group DM.")
			// Both events of the one message: the mention and its message.mpim.
			w.deliverEvent(mention(w.eventID(), group, bob, top, "", "<@"+botUser+"> deploy api"), 0)
			w.deliverEvent(message(w.eventID(), group, "mpim", bob, top, "", "<@"+botUser+"> deploy api"), 0)
			card := w.waitCard(1)
			if card.param("channel") != group || card.param("thread_ts") != top {
				t.Fatalf("card in %s/%s, want %s/%s", card.param("channel"), card.param("thread_ts"), group, top)
			}
			w.ad.Wait()
			if got := w.model.Requests(); len(got) != 1 || got[0].Messages[len(got[0].Messages)-1].Text != "deploy api" {
				t.Fatalf("model saw %d requests (%+v), want one turn with the mention stripped", len(got), got)
			}
			conv, err := w.db.FindConversation(context.Background(), Platform, group, top)
			if err != nil || !conv.DM {
				t.Fatalf("conversation %+v (%v), want a DM", conv, err)
			}
			// Chatter in the thread is an aside; at the top it is nothing.
			w.deliverEvent(message(w.eventID(), group, "mpim", carol, "1700000300.000200", top, "careful, friday"), 0)
			w.deliverEvent(message(w.eventID(), group, "mpim", carol, "1700000300.000300", "", "lunch?"), 0)
			w.ad.Wait()
			if n := len(w.model.Requests()); n != 1 {
				t.Fatalf("chatter reached the model (%d requests)", n)
			}
			// The channel's approver (bob, also the requester) is no
			// approver here; the dm entry's (alice) is.
			ref := refByStyle(t, card, "primary")
			w.deliverInteraction(blockAction(bob, group, top, ActionAllow, ref))
			w.waitEphemeral(bob, "")
			w.ad.Wait()
			if w.tools["deploy"].runs.Load() != 0 {
				t.Fatal("bob's click ran the call")
			}
			answer := w.allowAndWait(alice, group, top, ref, "Deployed from the group DM.")
			if answer.param("thread_ts") != top {
				t.Errorf("answer in thread %q, want %q", answer.param("thread_ts"), top)
			}
			if w.tools["deploy"].runs.Load() != 1 {
				t.Fatalf("deploy ran %d times", w.tools["deploy"].runs.Load())
			}
			if last := w.model.Requests()[1]; !slices.ContainsFunc(last.Messages, func(m model.Message) bool { return strings.Contains(m.Text, "careful, friday") }) {
				t.Error("the aside in the thread did not reach the model with the next request")
			}
		})
	}
}

// A private channel with a G id (made before 2021): the mention is taken
// from its message.groups event and is a channel turn ("*" serves it);
// the app_mention twin starts nothing more.
func TestLegacyPrivateChannelMention(t *testing.T) {
	w := newWorld(t, ModeSocket)
	const priv, top = "G0LEGACY", "1700000400.000100"
	w.model.PushText("Hello, private channel.")
	w.deliverEvent(message(w.eventID(), priv, "group", bob, top, "", "<@"+botUser+"> hi"), 0)
	w.deliverEvent(mention(w.eventID(), priv, bob, top, "", "<@"+botUser+"> hi"), 0)
	if got := w.waitText(priv, "Hello, private channel."); got.param("thread_ts") != top {
		t.Errorf("answer in thread %q, want %q", got.param("thread_ts"), top)
	}
	w.ad.Wait()
	if n := len(w.model.Requests()); n != 1 {
		t.Fatalf("%d model requests, want 1", n)
	}
	conv, err := w.db.FindConversation(context.Background(), Platform, priv, top)
	if err != nil || conv.DM {
		t.Fatalf("conversation %+v (%v), want a channel conversation", conv, err)
	}
}
