package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib"

	"github.com/airlockhq/airlock/adapters/slack"
	"github.com/airlockhq/airlock/adapters/slack/slacktest"
	"github.com/airlockhq/airlock/bot"
	"github.com/airlockhq/airlock/internal/pgtest"
	"github.com/airlockhq/airlock/internal/racetest"
	"github.com/airlockhq/airlock/model/modeltest"
)

const replicaSecret = "replica-signing-secret"

// slackAPI is the Slack the binary's tests run against: slacktest's fake,
// with helpers over the messages it was sent.
type slackAPI struct {
	fake *slacktest.Server
	URL  string
}

func newSlackAPI(t *testing.T) *slackAPI {
	fake := slacktest.Start(t, slacktest.Options{BotToken: "xoxb-test", AppToken: "xapp-test",
		TeamID: "T1", Team: "T", Domain: "example", AppID: "A1", TSBase: 1900000000,
		OnCall: func(c slacktest.Call) {
			if c.Method == "chat.postMessage" {
				rememberButtons(values(c), c.TS)
			}
		}})
	return &slackAPI{fake: fake, URL: fake.URL()}
}

// values is a call's parameters, form or JSON, as strings (blocks as
// their JSON).
func values(c slacktest.Call) url.Values {
	v := url.Values{}
	for k := range c.Params {
		v.Set(k, c.Param(k))
	}
	for k := range c.Raw {
		v.Set(k, c.Param(k))
	}
	return v
}

// posts are the chat.postMessage calls, updates the chat.update calls.
func (s *slackAPI) posts() []url.Values   { return s.callsTo("chat.postMessage") }
func (s *slackAPI) updates() []url.Values { return s.callsTo("chat.update") }

func (s *slackAPI) callsTo(method string) []url.Values {
	var out []url.Values
	for _, c := range s.fake.CallsTo(method) {
		out = append(out, values(c))
	}
	return out
}

func (s *slackAPI) acked(id string) bool { return s.fake.Acked(id) }

// allowValue returns the value of the first Allow button posted.
func (s *slackAPI) allowValue() string {
	if vs := s.buttons(slack.ActionAllow); len(vs) > 0 {
		return vs[0]
	}
	return ""
}

// buttons returns the values of the buttons with the action id, in the
// order their messages were posted.
func (s *slackAPI) buttons(actionID string) []string { return s.fake.ButtonValues(actionID) }

// ephemerals returns the text of every ephemeral message, for the user.
// told is a condition for waitUntil: an ephemeral message to user holds
// text.
func (s *slackAPI) told(user, text string) func() bool {
	return func() bool {
		return slices.ContainsFunc(s.ephemerals(user), func(e string) bool { return strings.Contains(e, text) })
	}
}

func (s *slackAPI) ephemerals(user string) []string {
	var out []string
	for _, p := range s.callsTo("chat.postEphemeral") {
		if p.Get("user") == user {
			out = append(out, p.Get("text")+" "+p.Get("blocks"))
		}
	}
	return out
}

// cards counts the posted messages that carry an Allow button.
func (s *slackAPI) cards() int {
	n := 0
	for _, p := range s.posts() {
		if strings.Contains(p.Get("blocks"), slack.ActionAllow) {
			n++
		}
	}
	return n
}

// texts returns the text of every message posted.
func (s *slackAPI) texts() []string {
	var out []string
	for _, p := range s.posts() {
		out = append(out, p.Get("text"))
	}
	return out
}

func freeAddr(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// postSigned delivers a payload to a replica's /slack/events as Slack does.
func postSigned(addr string, body []byte, contentType string) (int, error) {
	return postSignedRetry(addr, body, contentType, 0)
}

// postSignedRetry is postSigned as Slack's retry number retry (0: the
// first try).
func postSignedRetry(addr string, body []byte, contentType string, retry int) (int, error) {
	ts := strconv.FormatInt(time.Now().Unix(), 10)
	req, _ := http.NewRequest(http.MethodPost, "http://"+addr+"/slack/events", bytes.NewReader(body))
	req.Header.Set("Content-Type", contentType)
	if retry > 0 {
		req.Header.Set("X-Slack-Retry-Num", strconv.Itoa(retry))
	}
	req.Header.Set("X-Slack-Request-Timestamp", ts)
	req.Header.Set("X-Slack-Signature", fmt.Sprintf("v0=%x", slack.Sign(replicaSecret, ts, body)))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	return resp.StatusCode, nil
}

func mentionBody(eventID, ts, threadTS, text string) []byte {
	ev := map[string]any{"type": "app_mention", "user": "UREQ", "text": "<@UBOT> " + text, "ts": ts, "channel": "COPS", "event_ts": ts}
	if threadTS != "" {
		ev["thread_ts"] = threadTS
	}
	b, _ := json.Marshal(map[string]any{"type": "event_callback", "team_id": "T1", "api_app_id": "A1", "event_id": eventID, "event_time": time.Now().Unix(), "event": ev})
	return b
}

func clickBody(user, value string) []byte {
	return actionBody(user, slack.ActionAllow, value)
}

// posted is where a button was posted: its message's channel, ts and thread.
type posted struct{ channel, ts, thread string }

// buttonMessages maps button values (random references, unique across
// tests) to the messages that carried them, first posted first, so a click
// comes from a card it was on.
var (
	buttonMessages   sync.Map
	buttonMessagesMu sync.Mutex
)

// messagesOf lists the messages that carried a button value.
func messagesOf(value string) []posted {
	v, _ := buttonMessages.Load(value)
	ps, _ := v.([]posted)
	return ps
}

func rememberButtons(params url.Values, ts string) {
	var blocks []any
	if json.Unmarshal([]byte(params.Get("blocks")), &blocks) != nil {
		return
	}
	at := posted{params.Get("channel"), ts, params.Get("thread_ts")}
	slacktest.Buttons(blocks, func(_, val string) {
		buttonMessagesMu.Lock()
		if ps := messagesOf(val); len(ps) == 0 || ps[len(ps)-1] != at {
			buttonMessages.Store(val, append(ps, at)) // once per message
		}
		buttonMessagesMu.Unlock()
	})
}

// actionBody is a block_actions interaction: user pressed the button with
// the action id and value, on the message that carried it.
func actionBody(user, actionID, value string) []byte {
	at := posted{"COPS", "1900000000.000001", "1800000000.000100"}
	if ps := messagesOf(value); len(ps) > 0 {
		at = ps[0]
	}
	return actionBodyOn(at, user, actionID, value)
}

// actionBodyOn is actionBody on a given message.
func actionBodyOn(at posted, user, actionID, value string) []byte {
	p, _ := json.Marshal(map[string]any{
		"type": "block_actions", "trigger_id": "1.2.3", "api_app_id": "A1",
		"user":      map[string]any{"id": user, "username": "u", "team_id": "T1"},
		"team":      map[string]any{"id": "T1"},
		"channel":   map[string]any{"id": at.channel, "name": "ops"},
		"container": map[string]any{"type": "message", "message_ts": at.ts, "channel_id": at.channel, "thread_ts": at.thread},
		"message":   map[string]any{"type": "message", "ts": at.ts, "user": "UBOT", "thread_ts": at.thread},
		"actions":   []any{map[string]any{"action_id": actionID, "block_id": "b", "value": value, "type": "button", "action_ts": "1"}},
	})
	return []byte(url.Values{"payload": {string(p)}}.Encode())
}

// freshSchema makes an empty schema in the test database and returns a
// DSN whose search_path points at it.
func freshSchema(t *testing.T, dsn string) string { return pgtest.FreshSchema(t, dsn, "replica") }

// TestTwoReplicas runs two real `airlock run` processes on one PostgreSQL
// in Slack HTTP mode: clicks for one card delivered to both at once run the
// tool exactly once, and two turns of one thread delivered to both at once
// never reach the model concurrently.
func TestTwoReplicas(t *testing.T) {
	pg := os.Getenv("AIRLOCK_TEST_POSTGRES_DSN")
	if pg == "" || testing.Short() {
		t.Skip("set AIRLOCK_TEST_POSTGRES_DSN (CI does) to run the replica test")
	}
	dsn := freshSchema(t, pg)
	api := newSlackAPI(t)
	tools := newToolServer(t)

	var inFlight racetest.Peak
	hung := make(chan struct{}, 1)
	release := make(chan struct{})
	model := modeltest.NewOpenAIServer(t, func(req modeltest.OpenAIRequest) modeltest.OpenAIReply {
		defer inFlight.Enter()()
		last := req.Messages[len(req.Messages)-1]
		if strings.Contains(last.Content, "slow") {
			time.Sleep(400 * time.Millisecond) // a long model call, so a second turn would overlap
			return modeltest.TextReply("slow answer")
		}
		if strings.Contains(last.Content, "hang") {
			hung <- struct{}{}
			<-release
			return modeltest.TextReply("never delivered")
		}
		return agent(req)
	})
	t.Cleanup(func() { close(release) }) // runs before the model server closes

	dir := t.TempDir()
	cfg := fmt.Sprintf(`
storage: {driver: postgres, dsn: %q}
%s
channels: [{platform: slack, id: COPS, approvers: [UALICE]}]
tools:
  - name: service_status
    parameters: {type: object, properties: {service: {type: string}}, required: [service]}
    http: {method: POST, url: "%s/status/{{.service}}"}
%s
`, dsn, slackRunYAML(model.BaseURL(), api.URL+"/api/"), tools.URL, deployToolYAML(tools.URL, "service", "environment"))

	var addrs []string
	var procs []*exec.Cmd
	for i := 0; i < 2; i++ {
		addr := freeAddr(t)
		path := filepath.Join(dir, fmt.Sprintf("replica%d.yaml", i))
		if err := os.WriteFile(path, []byte("listen: "+addr+"\n"+cfg), 0o600); err != nil {
			t.Fatal(err)
		}
		cmd, _ := startRun(t, path)
		waitReady(t, addr)
		addrs = append(addrs, addr)
		procs = append(procs, cmd)
	}

	// A mention reaches replica 0; the card is posted.
	if code, err := postSigned(addrs[0], mentionBody("Ev1", "1800000000.000100", "", "deploy api"), "application/json"); err != nil || code != 200 {
		t.Fatalf("mention: %d %v", code, err)
	}
	waitUntil(t, "the card", func() bool { return api.allowValue() != "" })
	value := api.allowValue()

	// Ten clicks on Allow delivered to each replica at once.
	racetest.AtOnce(20, func(i int) {
		if code, err := postSigned(addrs[i%2], clickBody("UALICE", value), "application/x-www-form-urlencoded"); err != nil || code != 200 {
			t.Errorf("click: %d %v", code, err)
		}
	})
	waitUntil(t, "the answer", func() bool {
		for _, s := range api.texts() {
			if strings.Contains(s, "model saw:") {
				return true
			}
		}
		return false
	})
	time.Sleep(300 * time.Millisecond) // a second run would arrive now
	var status, deploy int
	for _, h := range tools.calls() {
		switch h.Path {
		case "/status/api":
			status++
		case "/deploy/api":
			deploy++
		}
	}
	if status != 1 || deploy != 1 {
		t.Fatalf("20 clicks on two replicas ran status %d and deploy %d times; want 1 and 1", status, deploy)
	}

	// Two turns in one thread, one to each replica, at once: the model
	// never sees them concurrently.
	inFlight.Reset()
	var wg2 sync.WaitGroup
	for i, id := range []string{"Ev2", "Ev3"} {
		wg2.Add(1)
		go func() {
			defer wg2.Done()
			body := mentionBody(id, fmt.Sprintf("1800000000.00020%d", i), "1800000000.000100", "slow question")
			if code, err := postSigned(addrs[i], body, "application/json"); err != nil || code != 200 {
				t.Errorf("turn: %d %v", code, err)
			}
		}()
	}
	wg2.Wait()
	waitUntil(t, "both slow answers", func() bool {
		n := 0
		for _, s := range api.texts() {
			if strings.Contains(s, "slow answer") {
				n++
			}
		}
		return n == 2
	})
	if m := inFlight.Most(); m != 1 {
		t.Fatalf("two replicas ran turns of one thread concurrently (%d model calls in flight)", m)
	}

	// Replica 0 dies while it holds the thread (its model call hangs). A
	// turn delivered to replica 1 waits for the lease, which lapses since
	// nobody renews it, and is then answered.
	if code, err := postSigned(addrs[0], mentionBody("Ev4", "1800000000.000300", "1800000000.000100", "hang on"), "application/json"); err != nil || code != 200 {
		t.Fatalf("turn: %d %v", code, err)
	}
	select {
	case <-hung:
	case <-time.After(20 * time.Second):
		t.Fatal("replica 0 never called the model")
	}
	_ = procs[0].Process.Kill()
	killed := time.Now()
	if code, err := postSigned(addrs[1], mentionBody("Ev5", "1800000000.000400", "1800000000.000100", "deploy web"), "application/json"); err != nil || code != 200 {
		t.Fatalf("turn: %d %v", code, err)
	}
	deadline := time.Now().Add(bot.LeaseTTL + 30*time.Second)
	for api.cards() < 2 {
		if time.Now().After(deadline) {
			t.Fatal("replica 1 never took over the thread of the dead replica")
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("replica 1 took the thread over %v after replica 0 died (lease TTL %v)", time.Since(killed).Round(100*time.Millisecond), bot.LeaseTTL)
}

// TestRunOverSocketMode checks the wiring of `airlock run` in Slack's
// default mode: it opens a Socket Mode connection with the app token, acks
// an envelope, and the mention gets the model's answer in its thread.
func TestRunOverSocketMode(t *testing.T) {
	skipShort(t)
	api := newSlackAPI(t)
	model := modeltest.NewOpenAIServer(t, agent)
	dir := t.TempDir()
	path := filepath.Join(dir, "airlock.yaml")
	cfg := fmt.Sprintf(`listen: %s
storage: {dsn: %q}
model: {provider: openai, name: fake, base_url: %q}
slack: {bot_token: xoxb-test, app_token: xapp-test, api_url: %q}
channels: [{platform: slack, id: COPS, approvers: [UALICE]}]
`, freeAddr(t), filepath.Join(dir, "a.db"), model.BaseURL(), api.URL+"/api/")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	startRun(t, path)
	env, _ := json.Marshal(map[string]any{"envelope_id": "env-1", "type": "events_api", "accepts_response_payload": false, "retry_attempt": 0,
		"payload": json.RawMessage(mentionBody("EvSock1", "1800000000.000500", "", "hello there"))})
	api.fake.Send(env)
	waitUntil(t, "the envelope's ack", func() bool { return api.acked("env-1") })
	waitUntil(t, "the answer in the thread", func() bool {
		for _, p := range api.posts() {
			if p.Get("thread_ts") == "1800000000.000500" && strings.Contains(p.Get("text"), "hello") {
				return true
			}
		}
		return false
	})
}
