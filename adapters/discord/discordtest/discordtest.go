// Package discordtest fakes Discord for tests: the REST API (v9) and a
// gateway websocket on 127.0.0.1, in a fake server with its channels,
// members and roles. It speaks Discord's wire formats to the real client
// library (discordgo), records every REST call, and lets a test push
// gateway dispatches (messages, clicks, modal submits).
package discordtest

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bwmarrin/discordgo"
	"github.com/gorilla/websocket"
)

// IDs of the fake world: all snowflakes, as Discord's are.
const (
	BotID       = "1000000000000000001"
	GuildID     = "4001"
	ChannelID   = "3001" // a guild text channel
	ApprovalsCh = "3002" // a guild text channel where cards can be routed
	ThreadCh    = "3100" // a thread of ChannelID someone started
	OtherCh     = "3999" // a text channel of another guild
	DMChannel   = "3500"
	Requester   = "2001"
	Outsider    = "2002" // a member without the approver role
	Moderator   = "2003" // a member with the approver role
	DMUser      = "2009" // approver by user id (the "*" entry)
	ModRole     = "5001"
	OtherRole   = "5002"
	Spammer     = "2777" // a member to moderate
	AdminUser   = "2888" // a member whose highest role (AdminRole) is above the bot's
	PeerUser    = "2555" // a member holding the bot's own role
	OwnerUser   = "2999" // the server's owner
	OpsAdmin    = "2889" // a member below the bot with the Administrator permission (OpsRole)
	Stranger    = "2666" // not a member of the server

	BotRole   = "5999" // the bot's managed role, position 5
	AdminRole = "5003" // Admins, position 10, Administrator
	OpsRole   = "5004" // Ops, position 3, Administrator
)

// GuildRoles are the fake server's roles, as GET /guilds/{id} and
// GUILD_CREATE give them.
func GuildRoles(botRolePosition int) []any {
	return []any{
		map[string]any{"id": GuildID, "name": "@everyone", "position": 0, "permissions": "0"},
		map[string]any{"id": OtherRole, "name": "Helpers", "position": 1, "permissions": "0"},
		map[string]any{"id": ModRole, "name": "Moderators", "position": 2, "permissions": "0"},
		map[string]any{"id": OpsRole, "name": "Ops", "position": 3, "permissions": "8"},
		map[string]any{"id": BotRole, "name": "Airlock", "position": botRolePosition, "managed": true, "permissions": "1099511639046"},
		map[string]any{"id": AdminRole, "name": "Admins", "position": 10, "permissions": "8"},
	}
}

// GuildObject is the fake server as GET /guilds/{id} and GUILD_CREATE
// give it.
func GuildObject(botRolePosition int) map[string]any {
	return map[string]any{"id": GuildID, "name": "ops", "owner_id": OwnerUser, "roles": GuildRoles(botRolePosition)}
}

// AppID is the application's id, which Discord gives at
// GET /oauth2/applications/@me: not the bot's user id (an application
// made before its bot has two ids).
const AppID = "1100000000000000011"

// Token is a bot token whose first segment is BotID in base64.
var Token = base64.RawStdEncoding.EncodeToString([]byte(BotID)) + ".Gabcde.secret-part-never-logged"

// Call is one request the fake REST API received.
type Call struct {
	Method string
	Path   string // without the /api/v9 prefix
	Query  string
	Header http.Header
	Body   []byte
	Status int
	Resp   []byte // the response body
}

// ID is the id in the response (a created message or thread).
func (c Call) ID() string {
	var m struct {
		ID string `json:"id"`
	}
	json.Unmarshal(c.Resp, &m)
	return m.ID
}

func (c Call) JSON(t testing.TB) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(c.Body, &m); err != nil {
		t.Fatalf("%s %s: body %q: %v", c.Method, c.Path, c.Body, err)
	}
	return m
}

// Server is a fake Discord: a REST API and a gateway websocket on
// 127.0.0.1. It records every REST call.
type Server struct {
	t    testing.TB
	rest *httptest.Server
	gw   *httptest.Server

	mu       sync.Mutex
	calls    []Call
	next     int64
	channels map[string]*discordgo.Channel
	members  map[string][]string // the server's members and their roles
	dms      map[string]string   // user id -> their DM channel with the bot

	wsMu     sync.Mutex // serialises gateway writes
	conn     *websocket.Conn
	seq      int64
	identify chan map[string]any
	refuse   int      // a close code to answer IDENTIFY with, e.g. 4014
	edits    []Answer // answers for the next message edits (PATCH), in order
	// messages are each channel's messages as they show now, in posting
	// order (GET /channels/{id}/messages lists them).
	messages map[string][]map[string]any
	readies  int // READY dispatches sent
}

// PostAs puts a message in a channel as someone else than the bot would:
// a person (bot false) or another bot, with components when not nil (a
// look-alike of a card, buttons and all). It returns the message's id.
func (f *Server) PostAs(channel, authorID string, bot bool, content string, components []any) string {
	id := f.NewID()
	m := map[string]any{"id": id, "channel_id": channel, "type": 0, "content": content,
		"author": map[string]any{"id": authorID, "username": "user" + authorID, "bot": bot}}
	if components != nil {
		m["components"] = components
	}
	f.keep(channel, m)
	return id
}

// keep stores a posted message, or replaces an edited one.
func (f *Server) keep(channel string, m map[string]any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.messages == nil {
		f.messages = map[string][]map[string]any{}
	}
	for i, old := range f.messages[channel] {
		if old["id"] == m["id"] {
			f.messages[channel][i] = m
			return
		}
	}
	f.messages[channel] = append(f.messages[channel], m)
}

// listed is GET /channels/{id}/messages: up to limit messages after the
// id after (all when ""), the oldest ones after it, newest first.
func (f *Server) listed(channel, after string, limit int) []map[string]any {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []map[string]any
	for _, m := range f.messages[channel] {
		if id := m["id"].(string); after == "" || snowflakeLess(after, id) {
			out = append(out, m)
		}
	}
	sort.Slice(out, func(i, j int) bool { return snowflakeLess(out[i]["id"].(string), out[j]["id"].(string)) })
	if len(out) > limit {
		out = out[:limit]
	}
	slices.Reverse(out)
	return out
}

func snowflakeLess(a, b string) bool {
	if len(a) != len(b) {
		return len(a) < len(b)
	}
	return a < b
}

// Answer is an HTTP answer the fake gives a call instead of its own: a
// 429 with Discord's JSON body and headers, a 5xx, a 404 with code 10008.
type Answer struct {
	Status int
	Header map[string]string
	Body   string // JSON
}

// RateLimited is Discord's 429 of a route: retry_after in seconds, in the
// body and the headers.
func RateLimited(retryAfter time.Duration) Answer {
	secs := fmt.Sprintf("%.3f", retryAfter.Seconds())
	return Answer{Status: http.StatusTooManyRequests,
		Header: map[string]string{"Retry-After": secs, "X-RateLimit-Scope": "user", "X-RateLimit-Remaining": "0", "X-RateLimit-Reset-After": secs, "X-RateLimit-Bucket": "edits"},
		Body:   fmt.Sprintf(`{"message": "You are being rate limited.", "retry_after": %s, "global": false}`, secs)}
}

// UnknownMessage is Discord's answer about a message that no longer
// exists.
var UnknownMessage = Answer{Status: http.StatusNotFound, Body: `{"message": "Unknown Message", "code": 10008}`}

// AnswerEdits makes the next message edits (PATCH of a channel's message)
// get these answers, in order; the calls are recorded as usual.
func (f *Server) AnswerEdits(answers ...Answer) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.edits = append(f.edits, answers...)
}

func (f *Server) nextEdit() (Answer, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.edits) == 0 {
		return Answer{}, false
	}
	a := f.edits[0]
	f.edits = f.edits[1:]
	return a, true
}

func New(t testing.TB, withGateway bool) *Server {
	t.Helper()
	f := &Server{
		t:        t,
		next:     9000000000000000000,
		identify: make(chan map[string]any, 4),
		channels: map[string]*discordgo.Channel{
			ChannelID:   {ID: ChannelID, GuildID: GuildID, Type: discordgo.ChannelTypeGuildText, Name: "ops"},
			OtherCh:     {ID: OtherCh, GuildID: "4999", Type: discordgo.ChannelTypeGuildText, Name: "elsewhere"},
			DMChannel:   {ID: DMChannel, Type: discordgo.ChannelTypeDM},
			ApprovalsCh: {ID: ApprovalsCh, GuildID: GuildID, Type: discordgo.ChannelTypeGuildText, Name: "approvals"},
			ThreadCh:    {ID: ThreadCh, GuildID: GuildID, ParentID: ChannelID, Type: discordgo.ChannelTypeGuildPublicThread, Name: "incident"},
		},
		dms: map[string]string{},
		members: map[string][]string{
			BotID: {BotRole}, Requester: {}, Outsider: {}, Moderator: {ModRole}, DMUser: {},
			Spammer: {OtherRole}, AdminUser: {AdminRole}, PeerUser: {BotRole}, OwnerUser: {}, OpsAdmin: {ModRole, OpsRole},
		},
	}
	f.rest = httptest.NewServer(f.restHandler())
	t.Cleanup(f.rest.Close)
	if withGateway {
		f.gw = httptest.NewServer(http.HandlerFunc(f.gateway))
		t.Cleanup(func() {
			f.wsMu.Lock()
			if f.conn != nil {
				f.conn.Close()
			}
			f.wsMu.Unlock()
			f.gw.Close()
		})
	}
	return f
}

// Close stops the REST API (and the gateway): a Discord that is down.
// The test's cleanup closes it too.
func (f *Server) Close() {
	f.rest.Close()
	if f.gw != nil {
		f.wsMu.Lock()
		if f.conn != nil {
			f.conn.Close()
		}
		f.wsMu.Unlock()
		f.gw.Close()
	}
}

// APIURL is the REST base to configure.
func (f *Server) APIURL() string { return f.rest.URL + "/api/v9/" }

func (f *Server) NewID() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.next++
	return strconv.FormatInt(f.next, 10)
}

func (f *Server) restHandler() http.Handler {
	mux := http.NewServeMux()
	writeJSON := func(w http.ResponseWriter, v any) {
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(v)
	}
	message := func(w http.ResponseWriter, r *http.Request, id string) {
		var m map[string]any
		body, _ := io.ReadAll(r.Body)
		json.Unmarshal(body, &m)
		if m == nil {
			m = map[string]any{}
		}
		m["id"] = id
		m["channel_id"] = r.PathValue("channel")
		m["author"] = map[string]any{"id": BotID, "username": "Airlock", "bot": true}
		m["type"] = 0
		delete(m, "allowed_mentions")
		if strings.HasPrefix(r.URL.Path, "/api/v9/channels/") {
			f.keep(r.PathValue("channel"), m)
		}
		writeJSON(w, m)
	}
	mux.HandleFunc("GET /api/v9/gateway", func(w http.ResponseWriter, r *http.Request) {
		if f.gw == nil {
			http.Error(w, "no gateway", http.StatusNotFound)
			return
		}
		writeJSON(w, map[string]any{"url": "ws://" + f.gw.Listener.Addr().String()})
	})
	mux.HandleFunc("GET /api/v9/gateway/bot", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, map[string]any{"url": "ws://" + f.gw.Listener.Addr().String(), "shards": 1})
	})
	mux.HandleFunc("GET /api/v9/oauth2/applications/@me", func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bot "+Token {
			w.WriteHeader(http.StatusUnauthorized)
			writeJSON(w, map[string]any{"message": "401: Unauthorized", "code": 0})
			return
		}
		writeJSON(w, map[string]any{"id": AppID, "name": "Airlock", "bot_public": false,
			"bot": map[string]any{"id": BotID, "username": "Airlock", "bot": true}})
	})
	mux.HandleFunc("GET /api/v9/users/@me", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, map[string]any{"id": BotID, "username": "Airlock", "bot": true})
	})
	// Like Discord, one DM channel per user: opening it again returns it.
	mux.HandleFunc("POST /api/v9/users/@me/channels", func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			RecipientID string `json:"recipient_id"`
		}
		json.NewDecoder(r.Body).Decode(&req)
		if _, err := strconv.ParseUint(req.RecipientID, 10, 64); err != nil {
			w.WriteHeader(http.StatusBadRequest)
			writeJSON(w, map[string]any{"message": "Invalid Form Body", "code": 50035})
			return
		}
		f.mu.Lock()
		id, ok := f.dms[req.RecipientID]
		f.mu.Unlock()
		if !ok {
			id = f.NewID()
			f.mu.Lock()
			f.dms[req.RecipientID] = id
			f.channels[id] = &discordgo.Channel{ID: id, Type: discordgo.ChannelTypeDM,
				Recipients: []*discordgo.User{{ID: req.RecipientID, Username: "user" + req.RecipientID}}}
			f.mu.Unlock()
		}
		writeJSON(w, map[string]any{"id": id, "type": 1, "last_message_id": nil,
			"recipients": []any{map[string]any{"id": req.RecipientID, "username": "user" + req.RecipientID}}})
	})
	mux.HandleFunc("GET /api/v9/channels/{channel}", func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		ch := f.channels[r.PathValue("channel")]
		f.mu.Unlock()
		if ch == nil {
			w.WriteHeader(http.StatusNotFound)
			writeJSON(w, map[string]any{"message": "Unknown Channel", "code": 10003})
			return
		}
		writeJSON(w, ch)
	})
	mux.HandleFunc("GET /api/v9/channels/{channel}/messages", func(w http.ResponseWriter, r *http.Request) {
		limit, err := strconv.Atoi(r.URL.Query().Get("limit"))
		if err != nil || limit <= 0 || limit > 100 {
			limit = 50
		}
		writeJSON(w, f.listed(r.PathValue("channel"), r.URL.Query().Get("after"), limit))
	})
	mux.HandleFunc("POST /api/v9/channels/{channel}/messages", func(w http.ResponseWriter, r *http.Request) {
		id := f.NewID()
		message(w, r, id)
		// Like Discord, the gateway delivers the bot's own message too.
		f.wsMu.Lock()
		connected := f.conn != nil
		f.wsMu.Unlock()
		if connected {
			f.mu.Lock()
			ch := f.channels[r.PathValue("channel")]
			f.mu.Unlock()
			echo := map[string]any{"id": id, "channel_id": r.PathValue("channel"), "type": 0, "content": "echo <@" + BotID + ">",
				"author": map[string]any{"id": BotID, "username": "Airlock", "bot": true}, "mentions": []any{}}
			if ch != nil && ch.GuildID != "" {
				echo["guild_id"] = ch.GuildID
			}
			f.TrySend("MESSAGE_CREATE", echo)
		}
	})
	mux.HandleFunc("PATCH /api/v9/channels/{channel}/messages/{message}", func(w http.ResponseWriter, r *http.Request) {
		if a, ok := f.nextEdit(); ok {
			for k, v := range a.Header {
				w.Header().Set(k, v)
			}
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(a.Status)
			_, _ = w.Write([]byte(a.Body))
			return
		}
		message(w, r, r.PathValue("message"))
	})
	mux.HandleFunc("DELETE /api/v9/channels/{channel}/messages/{message}", func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("POST /api/v9/channels/{channel}/messages/{message}/threads", func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Name string `json:"name"`
		}
		json.NewDecoder(r.Body).Decode(&req)
		parent := r.PathValue("channel")
		f.mu.Lock()
		p := f.channels[parent]
		f.mu.Unlock()
		if p == nil {
			w.WriteHeader(http.StatusNotFound)
			writeJSON(w, map[string]any{"message": "Unknown Channel", "code": 10003})
			return
		}
		th := &discordgo.Channel{ID: f.NewID(), GuildID: p.GuildID, ParentID: parent, Type: discordgo.ChannelTypeGuildPublicThread, Name: req.Name}
		f.mu.Lock()
		f.channels[th.ID] = th
		f.mu.Unlock()
		w.WriteHeader(http.StatusCreated)
		writeJSON(w, th)
	})
	mux.HandleFunc("POST /api/v9/interactions/{id}/{token}/callback", func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("POST /api/v9/webhooks/{app}/{token}", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("wait") == "true" {
			message(w, r, f.NewID())
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("PATCH /api/v9/webhooks/{app}/{token}/messages/{message}", func(w http.ResponseWriter, r *http.Request) {
		message(w, r, f.NewID())
	})
	mux.HandleFunc("GET /api/v9/guilds/{guild}", func(w http.ResponseWriter, r *http.Request) {
		if r.PathValue("guild") != GuildID {
			w.WriteHeader(http.StatusNotFound)
			writeJSON(w, map[string]any{"message": "Unknown Guild", "code": 10004})
			return
		}
		writeJSON(w, GuildObject(5))
	})
	mux.HandleFunc("GET /api/v9/guilds/{guild}/members/{user}", func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		roles, ok := f.members[r.PathValue("user")]
		f.mu.Unlock()
		if r.PathValue("guild") != GuildID || !ok {
			w.WriteHeader(http.StatusNotFound)
			writeJSON(w, map[string]any{"message": "Unknown Member", "code": 10007})
			return
		}
		writeJSON(w, map[string]any{"user": map[string]any{"id": r.PathValue("user"), "username": "user" + r.PathValue("user")},
			"roles": roles, "joined_at": "2025-01-01T00:00:00.000000+00:00"})
	})
	mux.HandleFunc("PATCH /api/v9/guilds/{guild}/members/{user}", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, map[string]any{"user": map[string]any{"id": r.PathValue("user")}, "roles": []string{}})
	})
	mux.HandleFunc("DELETE /api/v9/guilds/{guild}/members/{user}", func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("PUT /api/v9/guilds/{guild}/bans/{user}", func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusNoContent)
	})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body.Close()
		r.Body = io.NopCloser(strings.NewReader(string(body)))
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, r)
		f.mu.Lock()
		f.calls = append(f.calls, Call{
			Method: r.Method, Path: strings.TrimPrefix(r.URL.EscapedPath(), "/api/v9"), Query: r.URL.RawQuery,
			Header: r.Header.Clone(), Body: body, Status: rec.Code, Resp: rec.Body.Bytes(),
		})
		f.mu.Unlock()
		for k, v := range rec.Header() {
			w.Header()[k] = v
		}
		w.WriteHeader(rec.Code)
		w.Write(rec.Body.Bytes())
	})
}

// Recorded returns the calls so far matching method and path (path may
// end in "*" to match a prefix).
func (f *Server) Recorded(method, path string) []Call {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []Call
	for _, c := range f.calls {
		if c.Method != method {
			continue
		}
		if p, ok := strings.CutSuffix(path, "*"); ok {
			if !strings.HasPrefix(c.Path, p) {
				continue
			}
		} else if c.Path != path {
			continue
		}
		out = append(out, c)
	}
	return out
}

func (f *Server) AllCalls() []Call {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]Call(nil), f.calls...)
}

// WaitFor polls until at least n calls match, and returns them.
func (f *Server) WaitFor(method, path string, n int) []Call {
	f.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		got := f.Recorded(method, path)
		if len(got) >= n {
			return got
		}
		if time.Now().After(deadline) {
			var seen []string
			for _, c := range f.AllCalls() {
				seen = append(seen, c.Method+" "+c.Path)
			}
			f.t.Fatalf("waited for %d× %s %s; got %d. Calls: %s", n, method, path, len(got), strings.Join(seen, ", "))
		}
		time.Sleep(5 * time.Millisecond)
	}
}

var upgrader = websocket.Upgrader{CheckOrigin: func(*http.Request) bool { return true }}

// gateway speaks the gateway protocol: HELLO, IDENTIFY, READY, and
// heartbeat ACKs; dispatches come from dispatch.
func (f *Server) gateway(w http.ResponseWriter, r *http.Request) {
	conn, err := upgrader.Upgrade(w, r, nil)
	if err != nil {
		return
	}
	defer conn.Close()
	f.wsMu.Lock()
	f.conn = conn
	f.seq = 0
	err = conn.WriteJSON(map[string]any{"op": 10, "d": map[string]any{"heartbeat_interval": 41250}})
	f.wsMu.Unlock()
	if err != nil {
		return
	}
	var ident struct {
		Op int            `json:"op"`
		D  map[string]any `json:"d"`
	}
	if err := conn.ReadJSON(&ident); err != nil || ident.Op != 2 {
		f.t.Errorf("gateway: expected IDENTIFY (op 2), got op %d, err %v", ident.Op, err)
		return
	}
	f.identify <- ident.D
	f.mu.Lock()
	refuse := f.refuse
	f.mu.Unlock()
	if refuse != 0 {
		f.wsMu.Lock()
		conn.WriteMessage(websocket.CloseMessage, websocket.FormatCloseMessage(refuse, "Disallowed intent(s)."))
		f.wsMu.Unlock()
		return
	}
	f.Send("READY", map[string]any{
		"v":                  9,
		"session_id":         "session-1",
		"resume_gateway_url": "ws://" + f.gw.Listener.Addr().String(),
		"user":               map[string]any{"id": BotID, "username": "Airlock", "bot": true},
		"guilds":             []any{map[string]any{"id": GuildID, "unavailable": true}},
		"application":        map[string]any{"id": BotID, "flags": 0},
	})
	f.mu.Lock()
	f.readies++
	f.mu.Unlock()
	for {
		var msg struct {
			Op int `json:"op"`
		}
		if err := conn.ReadJSON(&msg); err != nil {
			return
		}
		if msg.Op == 1 {
			f.wsMu.Lock()
			err := conn.WriteJSON(map[string]any{"op": 11})
			f.wsMu.Unlock()
			if err != nil {
				return
			}
		}
	}
}

// Send writes a dispatch (op 0) with the next sequence number.
func (f *Server) Send(typ string, d any) {
	f.wsMu.Lock()
	defer f.wsMu.Unlock()
	if f.conn == nil {
		f.t.Errorf("gateway: no connection for %s", typ)
		return
	}
	f.seq++
	if err := f.conn.WriteJSON(map[string]any{"op": 0, "t": typ, "s": f.seq, "d": d}); err != nil {
		f.t.Errorf("gateway: send %s: %v", typ, err)
	}
}

// TrySend is Send for the fake's own echoes: a closing connection is
// no failure.
func (f *Server) TrySend(typ string, d any) {
	f.wsMu.Lock()
	defer f.wsMu.Unlock()
	if f.conn == nil {
		return
	}
	f.seq++
	f.conn.WriteJSON(map[string]any{"op": 0, "t": typ, "s": f.seq, "d": d})
}

// GuildMessage is a MESSAGE_CREATE payload in a guild channel.
func GuildMessage(id, channel, author, content string, mentionsBot bool) map[string]any {
	m := map[string]any{
		"id": id, "channel_id": channel, "guild_id": GuildID, "type": 0,
		"content":  content,
		"author":   map[string]any{"id": author, "username": "user" + author},
		"member":   map[string]any{"roles": []string{}},
		"mentions": []any{},
	}
	if mentionsBot {
		m["mentions"] = []any{map[string]any{"id": BotID, "username": "Airlock", "bot": true}}
	}
	return m
}

// DMMessage is a MESSAGE_CREATE payload in a DM.
func DMMessage(id, author, content string) map[string]any {
	return map[string]any{
		"id": id, "channel_id": DMChannel, "type": 0, "content": content,
		"author": map[string]any{"id": author, "username": "user" + author}, "mentions": []any{},
	}
}

// Click is an INTERACTION_CREATE payload for a button in a guild thread,
// with the member's permissions as a string, as Discord sends them.
func Click(id, channel, user string, roles []string, customID, messageID string) map[string]any {
	return map[string]any{
		"id": id, "application_id": BotID, "type": 3, "token": "token-" + id, "version": 1,
		"guild_id": GuildID, "channel_id": channel,
		"member": map[string]any{
			"user":        map[string]any{"id": user, "username": "user" + user},
			"roles":       roles,
			"permissions": "2147483647",
			"joined_at":   "2025-01-01T00:00:00.000000+00:00",
		},
		"app_permissions": "309237730304",
		"data":            map[string]any{"custom_id": customID, "component_type": 2},
		"message":         map[string]any{"id": messageID, "channel_id": channel, "content": "", "type": 0},
	}
}

// DMClick is a button INTERACTION_CREATE in a DM: user, no member.
func DMClick(id, user, customID, messageID string) map[string]any {
	return map[string]any{
		"id": id, "application_id": BotID, "type": 3, "token": "token-" + id, "version": 1,
		"channel_id": DMChannel,
		"user":       map[string]any{"id": user, "username": "user" + user},
		"data":       map[string]any{"custom_id": customID, "component_type": 2},
		"message":    map[string]any{"id": messageID, "channel_id": DMChannel, "content": "", "type": 0},
	}
}

// ModalSubmit is an INTERACTION_CREATE payload for a modal with one text
// input, inputID (the reason modal), answered with reason.
func ModalSubmit(id, channel, user string, roles []string, customID, inputID, reason, messageID string) map[string]any {
	m := Click(id, channel, user, roles, customID, messageID)
	m["type"] = 5
	m["data"] = map[string]any{
		"custom_id": customID,
		"components": []any{map[string]any{"type": 1, "components": []any{
			map[string]any{"type": 4, "custom_id": inputID, "value": reason},
		}}},
	}
	return m
}

// DMOf is the DM channel the fake opened with user ("" when none).
func (f *Server) DMOf(user string) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.dms[user]
}

// DMClickIn is a button INTERACTION_CREATE in a given DM channel.
func DMClickIn(id, channel, user, customID, messageID string) map[string]any {
	m := DMClick(id, user, customID, messageID)
	m["channel_id"] = channel
	m["message"].(map[string]any)["channel_id"] = channel
	return m
}

// EditSubmit is an INTERACTION_CREATE payload for the edit modal (text
// input inputID), opened from a card message (messageID "": Discord sent
// no message).
func EditSubmit(id, channel, user string, roles []string, customID, inputID, args, messageID string) map[string]any {
	m := ModalSubmit(id, channel, user, roles, customID, inputID, args, messageID)
	if messageID == "" {
		delete(m, "message")
	}
	return m
}

// Identify gives the IDENTIFY payloads the gateway received, one a
// connection.
func (f *Server) Identify() <-chan map[string]any { return f.identify }

// Refuse makes the gateway answer the next IDENTIFY by closing with code
// (4014: disallowed intents); 0 accepts again.
func (f *Server) Refuse(code int) {
	f.mu.Lock()
	f.refuse = code
	f.mu.Unlock()
}

func (f *Server) String() string { return fmt.Sprintf("fake discord at %s", f.rest.URL) }

// Readies counts the READY dispatches the gateway sent, one a connection
// it accepted: the client handles every dispatch sent after it in order,
// after it.
func (f *Server) Readies() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.readies
}
