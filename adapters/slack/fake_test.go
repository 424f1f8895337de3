package slack

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

// Test identities.
const (
	testBotToken = "xoxb-test-bot-token"
	testAppToken = "xapp-test-app-token"
	testSecret   = "8f742231b10e8888abcd99yyyzzz85a5"
	botUser      = "UBOT"
)

// apiCall is one Web API call the fake received.
type apiCall struct {
	Method string
	Params url.Values                 // form parameters
	JSON   map[string]any             // JSON body (chat.update, views.open, apps.connections.open)
	Raw    map[string]json.RawMessage // the JSON body's fields as sent
	TS     string                     // chat.postMessage: the ts the fake gave the message
	Type   string                     // the request's Content-Type
	Token  string                     // the token it carried
}

// fakeAnswer is an HTTP answer the fake gives a method's next call
// instead of its own (a 429 with its Retry-After, a 500).
type fakeAnswer struct {
	status     int
	retryAfter string
	body       string // default: an HTML page, as Slack's errors come
}

// param is a form parameter, or a field of a JSON body: a string's value,
// anything else as its JSON (blocks).
func (c apiCall) param(k string) string {
	if v := c.Params.Get(k); v != "" {
		return v
	}
	if s, ok := c.JSON[k].(string); ok {
		return s
	}
	if raw, ok := c.Raw[k]; ok && string(raw) != "null" {
		return string(raw)
	}
	return ""
}

// fakeSlack is a fake Slack Web API and Socket Mode server on 127.0.0.1,
// speaking the real shapes: {"ok":true,...} responses, and over the
// websocket hello, envelopes and acks.
type fakeSlack struct {
	t   *testing.T
	srv *httptest.Server

	mu      sync.Mutex
	calls   []apiCall
	groups  map[string][]string
	seq     int
	acks    []string
	ackBody map[string]json.RawMessage // envelope id → the ack's payload, when it had one
	conns   int
	outbox  chan []byte
	retired bool
	scripts map[string][]fakeAnswer // method → answers for its next calls
}

// answerNext makes the method's next calls get these answers, in order.
func (f *fakeSlack) answerNext(method string, answers ...fakeAnswer) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.scripts == nil {
		f.scripts = map[string][]fakeAnswer{}
	}
	f.scripts[method] = append(f.scripts[method], answers...)
}

// scripted takes the method's next scripted answer, if any.
func (f *fakeSlack) scripted(method string) (fakeAnswer, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	q := f.scripts[method]
	if len(q) == 0 {
		return fakeAnswer{}, false
	}
	f.scripts[method] = q[1:]
	return q[0], true
}

func newFakeSlack(t *testing.T) *fakeSlack {
	f := &fakeSlack{t: t, groups: map[string][]string{}, ackBody: map[string]json.RawMessage{}, outbox: make(chan []byte, 64)}
	mux := http.NewServeMux()
	mux.HandleFunc("/api/", f.serveAPI)
	mux.HandleFunc("/link/", f.serveSocket)
	f.srv = httptest.NewServer(mux) // listens on 127.0.0.1
	t.Cleanup(f.close)
	return f
}

func (f *fakeSlack) close() {
	f.mu.Lock()
	f.retired = true
	f.mu.Unlock()
	f.srv.CloseClientConnections()
	f.srv.Close()
}

func (f *fakeSlack) apiURL() string { return f.srv.URL + "/api/" }

func (f *fakeSlack) setGroup(id string, users ...string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.groups[id] = users
}

func (f *fakeSlack) record(c apiCall) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, c)
}

// callsTo returns the recorded calls of a method.
func (f *fakeSlack) callsTo(method string) []apiCall {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []apiCall
	for _, c := range f.calls {
		if c.Method == method {
			out = append(out, c)
		}
	}
	return out
}

func (f *fakeSlack) nextTS() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.seq++
	return fmt.Sprintf("1800000000.%06d", f.seq)
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	_ = json.NewEncoder(w).Encode(v)
}

func (f *fakeSlack) serveAPI(w http.ResponseWriter, r *http.Request) {
	method := strings.TrimPrefix(r.URL.Path, "/api/")
	seenMethods.Store(method, true)
	body, _ := io.ReadAll(r.Body)
	call := apiCall{Method: method}
	token := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
	if strings.HasPrefix(r.Header.Get("Content-Type"), "application/json") {
		if len(body) > 0 {
			if json.Unmarshal(body, &call.JSON) != nil || json.Unmarshal(body, &call.Raw) != nil {
				writeJSON(w, map[string]any{"ok": false, "error": "invalid_json"})
				return
			}
		}
	} else {
		call.Params, _ = url.ParseQuery(string(body))
		if q := r.URL.Query(); len(q) > 0 && len(call.Params) == 0 {
			call.Params = q
		}
		if token == "" {
			token = call.Params.Get("token")
		}
	}
	want := testBotToken
	if method == "apps.connections.open" {
		want = testAppToken
	}
	if token != want {
		writeJSON(w, map[string]any{"ok": false, "error": "invalid_auth"})
		return
	}
	if method == "chat.postMessage" {
		call.TS = f.nextTS()
	}
	call.Type, call.Token = r.Header.Get("Content-Type"), token
	f.record(call)
	if ans, ok := f.scripted(method); ok {
		if ans.retryAfter != "" {
			w.Header().Set("Retry-After", ans.retryAfter)
		}
		body := "<html>scripted answer</html>"
		if ans.body != "" {
			w.Header().Set("Content-Type", "application/json; charset=utf-8")
			body = ans.body
		}
		w.WriteHeader(ans.status)
		_, _ = w.Write([]byte(body))
		return
	}
	switch method {
	case "auth.test":
		writeJSON(w, map[string]any{"ok": true, "url": "https://airlock-test.slack.com/", "team": "Airlock Test",
			"user": "airlock", "team_id": "T0TEST", "user_id": botUser, "bot_id": "BBOT", "is_enterprise_install": false})
	case "chat.postMessage":
		if blocks, ok := call.Raw["blocks"]; ok && !bytes.HasPrefix(blocks, []byte("[")) {
			writeJSON(w, map[string]any{"ok": false, "error": "invalid_blocks_format"})
			return
		}
		ch, ts := call.param("channel"), call.TS
		msg := map[string]any{"type": "message", "user": botUser, "bot_id": "BBOT", "text": call.param("text"), "ts": ts}
		if th := call.param("thread_ts"); th != "" {
			msg["thread_ts"] = th
		}
		writeJSON(w, map[string]any{"ok": true, "channel": ch, "ts": ts, "message": msg})
	case "chat.update":
		// Slack reads blocks as an array from a JSON body, as a string
		// holding one from a form.
		if blocks, ok := call.Raw["blocks"]; ok && !bytes.HasPrefix(blocks, []byte("[")) {
			writeJSON(w, map[string]any{"ok": false, "error": "invalid_blocks_format"})
			return
		}
		if call.param("channel") == "" || !tsPattern.MatchString(call.param("ts")) {
			writeJSON(w, map[string]any{"ok": false, "error": "message_not_found"})
			return
		}
		writeJSON(w, map[string]any{"ok": true, "channel": call.param("channel"), "ts": call.param("ts"), "text": call.param("text"),
			"message": map[string]any{"type": "message", "user": botUser, "text": call.param("text")}})
	case "chat.postEphemeral":
		writeJSON(w, map[string]any{"ok": true, "message_ts": f.nextTS()})
	case "views.open":
		if call.param("trigger_id") == "" {
			writeJSON(w, map[string]any{"ok": false, "error": "invalid_trigger_id"})
			return
		}
		view, _ := call.JSON["view"].(map[string]any)
		writeJSON(w, map[string]any{"ok": true, "view": map[string]any{"id": "V0001", "type": "modal", "callback_id": view["callback_id"],
			"private_metadata": view["private_metadata"], "blocks": view["blocks"]}})
	case "chat.getPermalink":
		// A GET with query parameters, as slack-go sends it.
		ch, ts := call.param("channel"), call.param("message_ts")
		if ch == "" {
			writeJSON(w, map[string]any{"ok": false, "error": "channel_not_found"})
			return
		}
		if ts == "" || !tsPattern.MatchString(ts) {
			writeJSON(w, map[string]any{"ok": false, "error": "message_not_found"})
			return
		}
		writeJSON(w, map[string]any{"ok": true, "channel": ch, "permalink": permalink(ch, ts)})
	case "conversations.open":
		users := call.param("users")
		if users == "" || strings.Contains(users, ",") || !userIDPattern.MatchString(users) {
			writeJSON(w, map[string]any{"ok": false, "error": "user_not_found"})
			return
		}
		writeJSON(w, map[string]any{"ok": true, "no_op": false, "already_open": false,
			"channel": map[string]any{"id": dmOf(users), "is_im": true, "user": users, "created": 1700000000}})
	case "usergroups.users.list":
		f.mu.Lock()
		users, ok := f.groups[call.param("usergroup")]
		f.mu.Unlock()
		if !ok {
			writeJSON(w, map[string]any{"ok": false, "error": "no_such_subteam"})
			return
		}
		writeJSON(w, map[string]any{"ok": true, "users": users})
	case "apps.connections.open":
		u := "ws" + strings.TrimPrefix(f.srv.URL, "http") + "/link/?ticket=fake-ticket&app_id=A0TEST"
		writeJSON(w, map[string]any{"ok": true, "url": u})
	default:
		writeJSON(w, map[string]any{"ok": false, "error": "unknown_method"})
	}
}

// serveSocket is the Socket Mode websocket: hello, then envelopes from
// the outbox; acks are recorded. Pings keep the client's dead-man timer
// happy.
func (f *fakeSlack) serveSocket(w http.ResponseWriter, r *http.Request) {
	up := websocket.Upgrader{CheckOrigin: func(*http.Request) bool { return true }}
	conn, err := up.Upgrade(w, r, nil)
	if err != nil {
		return
	}
	defer conn.Close()
	f.mu.Lock()
	f.conns++
	f.mu.Unlock()
	hello := `{"type":"hello","num_connections":1,"debug_info":{"host":"applink-fake","build_number":1,"approximate_connection_time":18060},"connection_info":{"app_id":"A0TEST"}}`
	if err := conn.WriteMessage(websocket.TextMessage, []byte(hello)); err != nil {
		return
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			_, msg, err := conn.ReadMessage()
			if err != nil {
				return
			}
			var ack struct {
				EnvelopeID string          `json:"envelope_id"`
				Payload    json.RawMessage `json:"payload"`
			}
			if json.Unmarshal(msg, &ack) == nil && ack.EnvelopeID != "" {
				f.mu.Lock()
				f.acks = append(f.acks, ack.EnvelopeID)
				if len(ack.Payload) > 0 && string(ack.Payload) != "null" {
					f.ackBody[ack.EnvelopeID] = ack.Payload
				}
				f.mu.Unlock()
			}
		}
	}()
	ping := time.NewTicker(200 * time.Millisecond)
	defer ping.Stop()
	for {
		select {
		case <-done:
			return
		case <-ping.C:
			if err := conn.WriteControl(websocket.PingMessage, []byte("ping"), time.Now().Add(time.Second)); err != nil {
				return
			}
		case msg := <-f.outbox:
			if err := conn.WriteMessage(websocket.TextMessage, msg); err != nil {
				return
			}
		}
	}
}

// sendEnvelope queues a Socket Mode envelope and returns its id.
func (f *fakeSlack) sendEnvelope(typ string, payload any, retry int) string {
	f.mu.Lock()
	f.seq++
	id := fmt.Sprintf("env-%d", f.seq)
	f.mu.Unlock()
	raw, ok := payload.([]byte)
	if !ok {
		var err error
		if raw, err = json.Marshal(payload); err != nil {
			f.t.Fatal(err)
		}
	}
	env := map[string]any{"envelope_id": id, "type": typ, "payload": json.RawMessage(raw), "accepts_response_payload": typ == "interactive", "retry_attempt": retry}
	if retry > 0 {
		env["retry_reason"] = "timeout"
	}
	msg, _ := json.Marshal(env)
	f.outbox <- msg
	return id
}

func (f *fakeSlack) acked(id string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, a := range f.acks {
		if a == id {
			return true
		}
	}
	return false
}

// ackPayload is the payload an envelope was acked with; nil for none.
func (f *fakeSlack) ackPayload(id string) json.RawMessage {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.ackBody[id]
}

// permalink is the fake's permalink of a message, in Slack's form.
func permalink(channel, ts string) string {
	return "https://airlock-test.slack.com/archives/" + channel + "/p" + strings.ReplaceAll(ts, ".", "")
}

// dmOf is the fake's DM channel id with a user: D and the user id
// without its U.
func dmOf(user string) string { return "D" + user[1:] }

// messageWith returns the ts of the latest message in a channel that
// showed a button carrying value, as posted (chat.postMessage) or as
// updated (chat.update); "" when none did.
func (f *fakeSlack) messageWith(channel, value string) string {
	needle, _ := json.Marshal(value)
	want := `"value":` + string(needle)
	f.mu.Lock()
	defer f.mu.Unlock()
	for i := len(f.calls) - 1; i >= 0; i-- {
		c := f.calls[i]
		if c.param("channel") != channel || !strings.Contains(c.param("blocks"), want) {
			continue
		}
		switch c.Method {
		case "chat.postMessage":
			return c.TS
		case "chat.update":
			return c.param("ts")
		}
	}
	return ""
}

func (f *fakeSlack) connections() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.conns
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
