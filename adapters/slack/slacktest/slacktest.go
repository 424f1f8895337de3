// Package slacktest fakes Slack for tests: the Web API (auth.test,
// chat.postMessage, chat.update, chat.postEphemeral, chat.getPermalink,
// views.open, conversations.open, conversations.replies, usergroups.users.list,
// apps.connections.open) and a Socket Mode websocket, on 127.0.0.1. It
// speaks Slack's wire formats to the real client library, records the
// calls it got, and lets a test script answers (a 429, a 500), inject
// faults (a tier's rate limit, a stretch of 5xx, calls held) and push
// Socket Mode envelopes. It refuses messages and modals past Slack's
// limits (50 blocks, text lengths: see limits.go) as Slack does.
package slacktest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

// Options are the fake workspace's identity and the fake's behaviour; the
// zero value is a workspace that accepts any token.
type Options struct {
	BotToken string // the token every method but apps.connections.open wants; "" accepts any
	AppToken string // the token apps.connections.open wants; "" accepts any

	TeamID, Team, Domain string // auth.test's team; default T0TEST, "Airlock Test", airlock-test
	BotUser, BotID       string // the bot's user and bot ids; default UBOT, BBOT
	AppID                string // default A0TEST

	// TSBase is the seconds part of the first ts the fake gives out;
	// default 1800000000.
	TSBase int64

	// Discard keeps no calls (for long runs); OnCall still sees each.
	Discard bool
	// OnCall, when set, sees every call that passed the token check,
	// before it is kept (Calls) and answered. It must not block.
	OnCall func(Call)
}

// Call is one Web API call the fake received.
type Call struct {
	Method string
	Params url.Values                 // form or query parameters
	Raw    map[string]json.RawMessage // the JSON body's fields as sent
	TS     string                     // chat.postMessage: the ts the fake gave the message
	Type   string                     // the request's Content-Type
	Token  string                     // the token it carried
	// Refused is the error code the fake answered a message or modal
	// past Slack's limits with ("": it was not refused for them).
	Refused string
	seq     int // its place in calls; -1 when not kept
}

// Param is a form parameter, or a field of a JSON body: a string's value,
// anything else as its JSON (blocks).
func (c Call) Param(k string) string {
	if v := c.Params.Get(k); v != "" {
		return v
	}
	raw, ok := c.Raw[k]
	if !ok || string(raw) == "null" {
		return ""
	}
	if len(raw) > 0 && raw[0] == '"' {
		var s string
		if json.Unmarshal(raw, &s) == nil {
			return s
		}
	}
	return string(raw)
}

// JSON is the call's JSON body decoded; nil for a form.
func (c Call) JSON() map[string]any {
	if c.Raw == nil {
		return nil
	}
	m := make(map[string]any, len(c.Raw))
	for k, raw := range c.Raw {
		var v any
		_ = json.Unmarshal(raw, &v)
		m[k] = v
	}
	return m
}

// Answer is an HTTP answer the fake gives a method's next call instead of
// its own (a 429 with its Retry-After, a 500).
type Answer struct {
	Status     int
	RetryAfter string
	Body       string // JSON; default: an HTML page, as Slack's errors come
}

var (
	tsPattern     = regexp.MustCompile(`^[0-9]{1,12}\.[0-9]{1,9}$`)
	userIDPattern = regexp.MustCompile(`^[UW][A-Z0-9]{2,40}$`)
)

// Server is the fake. New makes one to serve on a server of one's own;
// Start makes one listening on 127.0.0.1.
type Server struct {
	o   Options
	srv *httptest.Server
	seq atomic.Int64

	mu      sync.Mutex
	calls   []Call
	groups  map[string][]string
	acks    []string
	ackBody map[string]json.RawMessage // envelope id → the ack's payload, when it had one
	conns   int
	scripts map[string][]Answer // method → answers for its next calls
	outbox  chan []byte
	faults  map[string]*fault // method → its injected faults
	shown   map[string]Call   // "<channel>/<ts>" → the call whose content the message shows now
	deleted map[string]bool   // "<channel>/<ts>" of messages deleted (Delete)
	threads map[string]string // "<channel>/<ts>" → the thread a posted message is in ("" top level)
	authors map[string]author // "<channel>/<ts>" → who posted it, when not the bot (PostAs)
}

// author is who posted a message: a user, or an app's bot user.
type author struct{ user, botID string }

// PostAs puts a message in a channel (in thread when not "") as someone
// else than the bot would: a person (botID "") or another app's bot.
// blocks, when not nil, are its blocks (a person pasting a look-alike of
// a card, buttons and all). It returns the message's ts.
func (s *Server) PostAs(channel, thread, user, botID, text string, blocks json.RawMessage) string {
	ts := s.NextTS()
	raw := map[string]json.RawMessage{}
	raw["text"], _ = json.Marshal(text)
	if blocks != nil {
		raw["blocks"] = blocks
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.shown == nil {
		s.shown = map[string]Call{}
	}
	if s.threads == nil {
		s.threads = map[string]string{}
	}
	if s.authors == nil {
		s.authors = map[string]author{}
	}
	key := channel + "/" + ts
	s.shown[key] = Call{Method: "chat.postMessage", Raw: raw, TS: ts}
	s.threads[key] = thread
	s.authors[key] = author{user: user, botID: botID}
	return ts
}

// Shown is the call (chat.postMessage, or the last chat.update Slack
// accepted) whose content the message channel/ts shows now; false when
// the fake never posted it.
func (s *Server) Shown(channel, ts string) (Call, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ok := s.shown[channel+"/"+ts]
	return c, ok
}

// Delete removes a message, as a person deleting it in Slack: its
// updates then answer message_not_found.
func (s *Server) Delete(channel, ts string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.deleted == nil {
		s.deleted = map[string]bool{}
	}
	s.deleted[channel+"/"+ts] = true
	delete(s.shown, channel+"/"+ts)
}

// replies are the messages of a thread as they show now, oldest first,
// as conversations.replies lists them (with ts after oldest, when set).
func (s *Server) replies(channel, thread, oldest string) []map[string]any {
	out := s.messages(func(ch, ts, th string) bool { return ch == channel && (th == thread || ts == thread) }, oldest)
	sort.Slice(out, func(i, j int) bool { return tsLess(out[i]["ts"].(string), out[j]["ts"].(string)) })
	return out
}

// history is a channel's (or a DM's) top-level messages as they show
// now, newest first, as conversations.history lists them (with ts after
// oldest, when set).
func (s *Server) history(channel, oldest string) []map[string]any {
	out := s.messages(func(ch, _, th string) bool { return ch == channel && th == "" }, oldest)
	sort.Slice(out, func(i, j int) bool { return tsLess(out[j]["ts"].(string), out[i]["ts"].(string)) })
	return out
}

// messages are the messages shown that match, after oldest.
func (s *Server) messages(match func(channel, ts, thread string) bool, oldest string) []map[string]any {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []map[string]any
	for key, th := range s.threads {
		ch, ts, _ := strings.Cut(key, "/")
		c, ok := s.shown[key]
		if !ok || !match(ch, ts, th) || (oldest != "" && !tsLess(oldest, ts)) {
			continue
		}
		who := author{user: s.o.BotUser, botID: s.o.BotID}
		if a, ok := s.authors[key]; ok {
			who = a
		}
		msg := map[string]any{"type": "message", "user": who.user, "text": c.Param("text"), "ts": ts}
		if who.botID != "" {
			msg["bot_id"] = who.botID
		}
		if th != "" {
			msg["thread_ts"] = th
		}
		if b := c.Param("blocks"); b != "" {
			msg["blocks"] = json.RawMessage(b)
		}
		out = append(out, msg)
	}
	return out
}

// tsLess orders message timestamps ("<seconds>.<micro>") by time.
func tsLess(a, b string) bool {
	as, af, _ := strings.Cut(a, ".")
	bs, bf, _ := strings.Cut(b, ".")
	if len(as) != len(bs) {
		return len(as) < len(bs)
	}
	if as != bs {
		return as < bs
	}
	return af < bf
}

func (s *Server) isDeleted(channel, ts string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.deleted[channel+"/"+ts]
}

func (s *Server) show(channel, ts string, c Call) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.shown == nil {
		s.shown = map[string]Call{}
	}
	s.shown[channel+"/"+ts] = c
}

// fault is a method's injected behaviour: a rate limit, a stretch of
// errors, calls held.
type fault struct {
	limit   int           // calls allowed a window; 0: none
	window  time.Duration // the limit's window
	start   time.Time     // the current window's start
	used    int           // calls in the current window
	limited int           // calls answered 429
	down    int           // an HTTP status every call gets; 0: none
	hold    chan struct{} // calls wait until it is closed; nil: none
	held    int           // calls waiting now
}

func (s *Server) fault(method string) *fault {
	if s.faults == nil {
		s.faults = map[string]*fault{}
	}
	f := s.faults[method]
	if f == nil {
		f = &fault{}
		s.faults[method] = f
	}
	return f
}

// Limit rate-limits a method as Slack's tiers do: calls beyond n in a
// window (a fixed window, starting at its first call) are answered 429
// with Retry-After, in whole seconds (at least 1), until the window ends.
// n 0 lifts the limit.
func (s *Server) Limit(method string, n int, window time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f := s.fault(method)
	f.limit, f.window, f.start, f.used = n, window, time.Time{}, 0
}

// Limited counts a method's calls answered 429 by Limit.
func (s *Server) Limited(method string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.fault(method).limited
}

// Down makes every call of a method get status (a 5xx, Slack's HTML page)
// until Down(method, 0).
func (s *Server) Down(method string, status int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fault(method).down = status
}

// Hold makes a method's calls wait (recorded, not yet answered) until
// release is called; Held counts the waiting calls.
func (s *Server) Hold(method string) (release func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ch := make(chan struct{})
	s.fault(method).hold = ch
	var once sync.Once
	return func() {
		once.Do(func() {
			s.mu.Lock()
			if f := s.fault(method); f.hold == ch {
				f.hold = nil
			}
			s.mu.Unlock()
			close(ch)
		})
	}
}

// Held counts a method's calls waiting on Hold.
func (s *Server) Held(method string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.fault(method).held
}

// injected answers a call as its method's faults say; false when they
// let it through.
func (s *Server) injected(w http.ResponseWriter, method string) bool {
	s.mu.Lock()
	f := s.fault(method)
	if hold := f.hold; hold != nil {
		f.held++
		s.mu.Unlock()
		<-hold
		s.mu.Lock()
		f.held--
	}
	defer s.mu.Unlock()
	if f.down != 0 {
		w.WriteHeader(f.down)
		_, _ = w.Write([]byte("<html>injected failure</html>"))
		return true
	}
	if f.limit > 0 {
		now := time.Now()
		if f.start.IsZero() || now.Sub(f.start) >= f.window {
			f.start, f.used = now, 0
		}
		if f.used >= f.limit {
			f.limited++
			wait := int((f.start.Add(f.window).Sub(now) + time.Second - 1) / time.Second)
			w.Header().Set("Retry-After", fmt.Sprint(max(wait, 1)))
			w.Header().Set("Content-Type", "application/json; charset=utf-8")
			w.WriteHeader(http.StatusTooManyRequests)
			_, _ = w.Write([]byte(`{"ok": false, "error": "ratelimited"}`))
			return true
		}
		f.used++
	}
	return false
}

// New is a fake not yet listening: an http.Handler for /api/ (the Web
// API) and /link/ (Socket Mode).
func New(o Options) *Server {
	def := func(s *string, v string) {
		if *s == "" {
			*s = v
		}
	}
	def(&o.TeamID, "T0TEST")
	def(&o.Team, "Airlock Test")
	def(&o.Domain, "airlock-test")
	def(&o.BotUser, "UBOT")
	def(&o.BotID, "BBOT")
	def(&o.AppID, "A0TEST")
	if o.TSBase == 0 {
		o.TSBase = 1800000000
	}
	return &Server{o: o, groups: map[string][]string{}, ackBody: map[string]json.RawMessage{},
		scripts: map[string][]Answer{}, outbox: make(chan []byte, 64)}
}

// Start is a fake listening on 127.0.0.1 until the test ends.
func Start(t testing.TB, o Options) *Server {
	s := New(o)
	s.srv = httptest.NewServer(s)
	t.Cleanup(s.Close)
	return s
}

// Close stops a started fake, its websockets too.
func (s *Server) Close() {
	if s.srv != nil {
		s.srv.CloseClientConnections()
		s.srv.Close()
	}
}

// URL is a started fake's base URL; APIURL is the Web API's, for the
// client's api_url.
func (s *Server) URL() string    { return s.srv.URL }
func (s *Server) APIURL() string { return s.srv.URL + "/api/" }

// ServeHTTP serves the Web API and Socket Mode.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if strings.HasPrefix(r.URL.Path, "/link") {
		s.serveSocket(w, r)
		return
	}
	s.serveAPI(w, r)
}

// SetGroup makes a user group with these members.
func (s *Server) SetGroup(id string, users ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.groups[id] = users
}

// AnswerNext makes the method's next calls get these answers, in order.
func (s *Server) AnswerNext(method string, answers ...Answer) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.scripts[method] = append(s.scripts[method], answers...)
}

func (s *Server) scripted(method string) (Answer, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	q := s.scripts[method]
	if len(q) == 0 {
		return Answer{}, false
	}
	s.scripts[method] = q[1:]
	return q[0], true
}

// Calls returns the recorded calls, in the order they came.
func (s *Server) Calls() []Call {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Call(nil), s.calls...)
}

// CallsTo returns the recorded calls of a method.
func (s *Server) CallsTo(method string) []Call {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Call
	for _, c := range s.calls {
		if c.Method == method {
			out = append(out, c)
		}
	}
	return out
}

// NextTS is a fresh message ts: TSBase seconds on, one microsecond apart.
func (s *Server) NextTS() string {
	n := s.seq.Add(1)
	return fmt.Sprintf("%d.%06d", s.o.TSBase+n/1000000, n%1000000)
}

// Permalink is the fake's permalink of a message, in Slack's form.
func (s *Server) Permalink(channel, ts string) string {
	return "https://" + s.o.Domain + ".slack.com/archives/" + channel + "/p" + strings.ReplaceAll(ts, ".", "")
}

// DMOf is the fake's DM channel id with a user: D and the user id
// without its U.
func DMOf(user string) string { return "D" + user[1:] }

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	_ = json.NewEncoder(w).Encode(v)
}

func fail(w http.ResponseWriter, code string) {
	writeJSON(w, map[string]any{"ok": false, "error": code})
}

func (s *Server) serveAPI(w http.ResponseWriter, r *http.Request) {
	method := strings.TrimPrefix(r.URL.Path, "/api/")
	body, _ := io.ReadAll(r.Body)
	call := Call{Method: method}
	token := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
	if strings.HasPrefix(r.Header.Get("Content-Type"), "application/json") {
		if len(body) > 0 && json.Unmarshal(body, &call.Raw) != nil {
			fail(w, "invalid_json")
			return
		}
	} else {
		call.Params, _ = url.ParseQuery(string(body))
		if q := r.URL.Query(); len(q) > 0 && len(call.Params) == 0 {
			call.Params = q // GET methods (chat.getPermalink)
		}
		if token == "" {
			token = call.Params.Get("token")
		}
	}
	want := s.o.BotToken
	if method == "apps.connections.open" {
		want = s.o.AppToken
	}
	if want != "" && token != want {
		fail(w, "invalid_auth")
		return
	}
	if method == "chat.postMessage" {
		call.TS = s.NextTS()
	}
	call.Type, call.Token = r.Header.Get("Content-Type"), token
	// OnCall first: a test that sees the call among Calls finds what
	// OnCall made of it.
	if s.o.OnCall != nil {
		s.o.OnCall(call)
	}
	call.seq = -1
	if !s.o.Discard {
		s.mu.Lock()
		call.seq = len(s.calls)
		s.calls = append(s.calls, call)
		s.mu.Unlock()
	}
	if s.injected(w, method) {
		return
	}
	if ans, ok := s.scripted(method); ok {
		if ans.RetryAfter != "" {
			w.Header().Set("Retry-After", ans.RetryAfter)
		}
		body := "<html>scripted answer</html>"
		if ans.Body != "" {
			w.Header().Set("Content-Type", "application/json; charset=utf-8")
			body = ans.Body
		}
		w.WriteHeader(ans.Status)
		_, _ = w.Write([]byte(body))
		return
	}
	s.answer(w, r, call)
}

// refuse answers a call past Slack's limits with code, and keeps it
// refused (Call.Refused).
func (s *Server) refuse(w http.ResponseWriter, call Call, code string) {
	if call.seq >= 0 {
		s.mu.Lock()
		s.calls[call.seq].Refused = code
		s.mu.Unlock()
	}
	fail(w, code)
}

// blocksOf is a message call's blocks as JSON: the body's array, or a
// form's string holding one.
func blocksOf(c Call) json.RawMessage {
	if raw, ok := c.Raw["blocks"]; ok {
		return raw
	}
	return json.RawMessage(c.Params.Get("blocks"))
}

// answer is the method's own answer, as Slack gives it. Messages and
// modals are held to Slack's limits (limits.go).
func (s *Server) answer(w http.ResponseWriter, r *http.Request, call Call) {
	// Slack reads blocks as an array from a JSON body, as a string
	// holding one from a form.
	badBlocks := func() bool {
		blocks, ok := call.Raw["blocks"]
		return ok && !bytes.HasPrefix(blocks, []byte("["))
	}
	switch call.Method {
	case "auth.test":
		writeJSON(w, map[string]any{"ok": true, "url": "https://" + s.o.Domain + ".slack.com/", "team": s.o.Team,
			"user": "airlock", "team_id": s.o.TeamID, "user_id": s.o.BotUser, "bot_id": s.o.BotID, "is_enterprise_install": false})
	case "chat.postMessage":
		if badBlocks() {
			fail(w, "invalid_blocks_format")
			return
		}
		if code := checkMessage(blocksOf(call), call.Param("text")); code != "" {
			s.refuse(w, call, code)
			return
		}
		msg := map[string]any{"type": "message", "user": s.o.BotUser, "bot_id": s.o.BotID, "text": call.Param("text"), "ts": call.TS}
		if th := call.Param("thread_ts"); th != "" {
			msg["thread_ts"] = th
		}
		s.show(call.Param("channel"), call.TS, call)
		s.mu.Lock()
		if s.threads == nil {
			s.threads = map[string]string{}
		}
		s.threads[call.Param("channel")+"/"+call.TS] = call.Param("thread_ts")
		s.mu.Unlock()
		writeJSON(w, map[string]any{"ok": true, "channel": call.Param("channel"), "ts": call.TS, "message": msg})
	case "chat.update":
		if badBlocks() {
			fail(w, "invalid_blocks_format")
			return
		}
		if code := checkMessage(blocksOf(call), call.Param("text")); code != "" {
			s.refuse(w, call, code)
			return
		}
		if call.Param("channel") == "" || !tsPattern.MatchString(call.Param("ts")) || s.isDeleted(call.Param("channel"), call.Param("ts")) {
			fail(w, "message_not_found")
			return
		}
		s.show(call.Param("channel"), call.Param("ts"), call)
		writeJSON(w, map[string]any{"ok": true, "channel": call.Param("channel"), "ts": call.Param("ts"), "text": call.Param("text"),
			"message": map[string]any{"type": "message", "user": s.o.BotUser, "text": call.Param("text")}})
	case "chat.postEphemeral":
		writeJSON(w, map[string]any{"ok": true, "message_ts": s.NextTS()})
	case "conversations.replies":
		writeJSON(w, map[string]any{"ok": true, "messages": s.replies(call.Param("channel"), call.Param("ts"), call.Param("oldest")), "has_more": false})
	case "conversations.history":
		if call.Param("channel") == "" {
			fail(w, "channel_not_found")
			return
		}
		writeJSON(w, map[string]any{"ok": true, "messages": s.history(call.Param("channel"), call.Param("oldest")), "has_more": false})
	case "views.open":
		if call.Param("trigger_id") == "" {
			fail(w, "invalid_trigger_id")
			return
		}
		var view struct {
			CallbackID      string          `json:"callback_id"`
			PrivateMetadata string          `json:"private_metadata"`
			Blocks          json.RawMessage `json:"blocks"`
		}
		_ = json.Unmarshal(call.Raw["view"], &view)
		if code := checkView(view.Blocks); code != "" {
			s.refuse(w, call, code)
			return
		}
		writeJSON(w, map[string]any{"ok": true, "view": map[string]any{"id": "V0001", "type": "modal", "callback_id": view.CallbackID,
			"private_metadata": view.PrivateMetadata, "blocks": view.Blocks}})
	case "views.publish":
		if call.Param("user_id") == "" {
			fail(w, "invalid_arguments")
			return
		}
		writeJSON(w, map[string]any{"ok": true, "view": map[string]any{"id": "V0002", "type": "home"}})
	case "chat.getPermalink":
		ch, ts := call.Param("channel"), call.Param("message_ts")
		if ch == "" {
			fail(w, "channel_not_found")
			return
		}
		if !tsPattern.MatchString(ts) {
			fail(w, "message_not_found")
			return
		}
		writeJSON(w, map[string]any{"ok": true, "channel": ch, "permalink": s.Permalink(ch, ts)})
	case "conversations.open":
		users := call.Param("users")
		if strings.Contains(users, ",") || !userIDPattern.MatchString(users) {
			fail(w, "user_not_found")
			return
		}
		writeJSON(w, map[string]any{"ok": true, "no_op": false, "already_open": false,
			"channel": map[string]any{"id": DMOf(users), "is_im": true, "user": users, "created": 1700000000}})
	case "usergroups.users.list":
		s.mu.Lock()
		users, ok := s.groups[call.Param("usergroup")]
		s.mu.Unlock()
		if !ok {
			fail(w, "no_such_subteam")
			return
		}
		writeJSON(w, map[string]any{"ok": true, "users": users})
	case "apps.connections.open":
		writeJSON(w, map[string]any{"ok": true, "url": "ws://" + r.Host + "/link/?ticket=fake-ticket&app_id=" + s.o.AppID})
	default:
		fail(w, "unknown_method")
	}
}

// serveSocket is the Socket Mode websocket: hello, then envelopes as they
// are sent; acks are recorded. Pings keep the client's dead-man timer
// happy.
func (s *Server) serveSocket(w http.ResponseWriter, r *http.Request) {
	up := websocket.Upgrader{CheckOrigin: func(*http.Request) bool { return true }}
	conn, err := up.Upgrade(w, r, nil)
	if err != nil {
		return
	}
	defer conn.Close()
	s.mu.Lock()
	s.conns++
	s.mu.Unlock()
	hello := fmt.Sprintf(`{"type":"hello","num_connections":1,"debug_info":{"host":"applink-fake","build_number":1,"approximate_connection_time":18060},"connection_info":{"app_id":%q}}`, s.o.AppID)
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
				s.mu.Lock()
				s.acks = append(s.acks, ack.EnvelopeID)
				if len(ack.Payload) > 0 && string(ack.Payload) != "null" {
					s.ackBody[ack.EnvelopeID] = ack.Payload
				}
				s.mu.Unlock()
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
		case msg := <-s.outbox:
			if err := conn.WriteMessage(websocket.TextMessage, msg); err != nil {
				return
			}
		}
	}
}

// Send queues a raw Socket Mode message for the next open websocket.
func (s *Server) Send(msg []byte) { s.outbox <- msg }

// SendEnvelope queues a Socket Mode envelope of a type ("events_api",
// "interactive", "slash_commands") carrying payload (JSON bytes, or a
// value to marshal) and returns its id.
func (s *Server) SendEnvelope(typ string, payload any, retry int) (string, error) {
	id := fmt.Sprintf("env-%d", s.seq.Add(1))
	raw, ok := payload.([]byte)
	if !ok {
		var err error
		if raw, err = json.Marshal(payload); err != nil {
			return "", fmt.Errorf("slacktest: envelope payload: %w", err)
		}
	}
	env := map[string]any{"envelope_id": id, "type": typ, "payload": json.RawMessage(raw), "accepts_response_payload": typ == "interactive", "retry_attempt": retry}
	if retry > 0 {
		env["retry_reason"] = "timeout"
	}
	msg, err := json.Marshal(env)
	if err != nil {
		return "", fmt.Errorf("slacktest: envelope: %w", err)
	}
	s.Send(msg)
	return id, nil
}

// Acked reports whether an envelope was acked.
func (s *Server) Acked(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, a := range s.acks {
		if a == id {
			return true
		}
	}
	return false
}

// AckPayload is the payload an envelope was acked with; nil for none.
func (s *Server) AckPayload(id string) json.RawMessage {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ackBody[id]
}

// Connections counts the Socket Mode websockets opened.
func (s *Server) Connections() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.conns
}

// MessageWith returns the ts of the latest message in a channel that
// showed a button carrying value, as posted (chat.postMessage) or as
// updated (chat.update), Slack having accepted it; "" when none did.
func (s *Server) MessageWith(channel, value string) string {
	needle, _ := json.Marshal(value)
	want := `"value":` + string(needle)
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := len(s.calls) - 1; i >= 0; i-- {
		c := s.calls[i]
		if c.Refused != "" || c.Param("channel") != channel || !strings.Contains(c.Param("blocks"), want) {
			continue
		}
		switch c.Method {
		case "chat.postMessage":
			return c.TS
		case "chat.update":
			return c.Param("ts")
		}
	}
	return ""
}

// ButtonValues returns the values of the buttons with the action id in
// the posted messages Slack accepted, in the order they were posted.
func (s *Server) ButtonValues(actionID string) []string {
	var out []string
	for _, c := range s.CallsTo("chat.postMessage") {
		if c.Refused != "" {
			continue
		}
		var blocks any
		if json.Unmarshal([]byte(c.Param("blocks")), &blocks) != nil {
			continue
		}
		Buttons(blocks, func(id, value string) {
			if id == actionID {
				out = append(out, value)
			}
		})
	}
	return out
}

// Buttons calls fn with the action id and value of every button in
// decoded blocks (or anything decoded from JSON), depth first.
func Buttons(v any, fn func(actionID, value string)) {
	switch v := v.(type) {
	case map[string]any:
		if id, ok := v["action_id"].(string); ok {
			if val, ok := v["value"].(string); ok {
				fn(id, val)
			}
		}
		for _, e := range v {
			Buttons(e, fn)
		}
	case []any:
		for _, e := range v {
			Buttons(e, fn)
		}
	}
}
