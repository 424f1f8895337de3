package discord

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bwmarrin/discordgo"
	"github.com/gorilla/websocket"
)

// Ids of the fake world: all snowflakes, as Discord's are.
const (
	botID       = "1000000000000000001"
	guildID     = "4001"
	channelID   = "3001" // a guild text channel
	approvalsCh = "3002" // a guild text channel where cards can be routed
	threadCh    = "3100" // a thread of channelID someone started
	otherCh     = "3999" // a text channel of another guild
	dmChannel   = "3500"
	requester   = "2001"
	outsider    = "2002" // a member without the approver role
	moderator   = "2003" // a member with the approver role
	dmUser      = "2009" // approver by user id (the "*" entry)
	modRole     = "5001"
	otherRole   = "5002"
	spammer     = "2777" // a member to moderate
	adminUser   = "2888" // a member whose highest role (adminRole) is above the bot's
	peerUser    = "2555" // a member holding the bot's own role
	ownerUser   = "2999" // the server's owner
	opsAdmin    = "2889" // a member below the bot with the Administrator permission (opsRole)
	stranger    = "2666" // not a member of the server

	botRole   = "5999" // the bot's managed role, position 5
	adminRole = "5003" // Admins, position 10, Administrator
	opsRole   = "5004" // Ops, position 3, Administrator
)

// guildRoles are the fake server's roles, as GET /guilds/{id} and
// GUILD_CREATE give them.
func guildRoles(botRolePosition int) []any {
	return []any{
		map[string]any{"id": guildID, "name": "@everyone", "position": 0, "permissions": "0"},
		map[string]any{"id": otherRole, "name": "Helpers", "position": 1, "permissions": "0"},
		map[string]any{"id": modRole, "name": "Moderators", "position": 2, "permissions": "0"},
		map[string]any{"id": opsRole, "name": "Ops", "position": 3, "permissions": "8"},
		map[string]any{"id": botRole, "name": "Airlock", "position": botRolePosition, "managed": true, "permissions": "1099511639046"},
		map[string]any{"id": adminRole, "name": "Admins", "position": 10, "permissions": "8"},
	}
}

// guildObject is the fake server as GET /guilds/{id} and GUILD_CREATE
// give it.
func guildObject(botRolePosition int) map[string]any {
	return map[string]any{"id": guildID, "name": "ops", "owner_id": ownerUser, "roles": guildRoles(botRolePosition)}
}

// appID is the application's id, which Discord gives at
// GET /oauth2/applications/@me: not the bot's user id (an application
// made before its bot has two ids).
const appID = "1100000000000000011"

// testToken is a bot token whose first segment is botID in base64.
var testToken = base64.RawStdEncoding.EncodeToString([]byte(botID)) + ".Gabcde.secret-part-never-logged"

// apiCall is one request the fake REST API received.
type apiCall struct {
	Method string
	Path   string // without the /api/v9 prefix
	Query  string
	Header http.Header
	Body   []byte
	Status int
	Resp   []byte // the response body
}

// id is the id in the response (a created message or thread).
func (c apiCall) id() string {
	var m struct {
		ID string `json:"id"`
	}
	json.Unmarshal(c.Resp, &m)
	return m.ID
}

func (c apiCall) json(t *testing.T) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(c.Body, &m); err != nil {
		t.Fatalf("%s %s: body %q: %v", c.Method, c.Path, c.Body, err)
	}
	return m
}

// fakeDiscord is a fake Discord: a REST API and a gateway websocket on
// 127.0.0.1. It records every REST call.
type fakeDiscord struct {
	t    *testing.T
	rest *httptest.Server
	gw   *httptest.Server

	mu       sync.Mutex
	calls    []apiCall
	next     int64
	channels map[string]*discordgo.Channel
	members  map[string][]string // the server's members and their roles
	dms      map[string]string   // user id -> their DM channel with the bot

	wsMu     sync.Mutex // serialises gateway writes
	conn     *websocket.Conn
	seq      int64
	identify chan map[string]any
	refuse   int // a close code to answer IDENTIFY with, e.g. 4014
}

func newFakeDiscord(t *testing.T, withGateway bool) *fakeDiscord {
	t.Helper()
	f := &fakeDiscord{
		t:        t,
		next:     9000000000000000000,
		identify: make(chan map[string]any, 4),
		channels: map[string]*discordgo.Channel{
			channelID:   {ID: channelID, GuildID: guildID, Type: discordgo.ChannelTypeGuildText, Name: "ops"},
			otherCh:     {ID: otherCh, GuildID: "4999", Type: discordgo.ChannelTypeGuildText, Name: "elsewhere"},
			dmChannel:   {ID: dmChannel, Type: discordgo.ChannelTypeDM},
			approvalsCh: {ID: approvalsCh, GuildID: guildID, Type: discordgo.ChannelTypeGuildText, Name: "approvals"},
			threadCh:    {ID: threadCh, GuildID: guildID, ParentID: channelID, Type: discordgo.ChannelTypeGuildPublicThread, Name: "incident"},
		},
		dms: map[string]string{},
		members: map[string][]string{
			botID: {botRole}, requester: {}, outsider: {}, moderator: {modRole}, dmUser: {},
			spammer: {otherRole}, adminUser: {adminRole}, peerUser: {botRole}, ownerUser: {}, opsAdmin: {modRole, opsRole},
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

// apiURL is the REST base to configure.
func (f *fakeDiscord) apiURL() string { return f.rest.URL + "/api/v9/" }

func (f *fakeDiscord) newID() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.next++
	return strconv.FormatInt(f.next, 10)
}

func (f *fakeDiscord) restHandler() http.Handler {
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
		m["author"] = map[string]any{"id": botID, "username": "Airlock", "bot": true}
		m["type"] = 0
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
		if r.Header.Get("Authorization") != "Bot "+testToken {
			w.WriteHeader(http.StatusUnauthorized)
			writeJSON(w, map[string]any{"message": "401: Unauthorized", "code": 0})
			return
		}
		writeJSON(w, map[string]any{"id": appID, "name": "Airlock", "bot_public": false,
			"bot": map[string]any{"id": botID, "username": "Airlock", "bot": true}})
	})
	mux.HandleFunc("GET /api/v9/users/@me", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, map[string]any{"id": botID, "username": "Airlock", "bot": true})
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
			id = f.newID()
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
	mux.HandleFunc("POST /api/v9/channels/{channel}/messages", func(w http.ResponseWriter, r *http.Request) {
		id := f.newID()
		message(w, r, id)
		// Like Discord, the gateway delivers the bot's own message too.
		f.wsMu.Lock()
		connected := f.conn != nil
		f.wsMu.Unlock()
		if connected {
			f.mu.Lock()
			ch := f.channels[r.PathValue("channel")]
			f.mu.Unlock()
			echo := map[string]any{"id": id, "channel_id": r.PathValue("channel"), "type": 0, "content": "echo <@" + botID + ">",
				"author": map[string]any{"id": botID, "username": "Airlock", "bot": true}, "mentions": []any{}}
			if ch != nil && ch.GuildID != "" {
				echo["guild_id"] = ch.GuildID
			}
			f.trySend("MESSAGE_CREATE", echo)
		}
	})
	mux.HandleFunc("PATCH /api/v9/channels/{channel}/messages/{message}", func(w http.ResponseWriter, r *http.Request) {
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
		th := &discordgo.Channel{ID: f.newID(), GuildID: p.GuildID, ParentID: parent, Type: discordgo.ChannelTypeGuildPublicThread, Name: req.Name}
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
			message(w, r, f.newID())
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("PATCH /api/v9/webhooks/{app}/{token}/messages/{message}", func(w http.ResponseWriter, r *http.Request) {
		message(w, r, f.newID())
	})
	mux.HandleFunc("GET /api/v9/guilds/{guild}", func(w http.ResponseWriter, r *http.Request) {
		if r.PathValue("guild") != guildID {
			w.WriteHeader(http.StatusNotFound)
			writeJSON(w, map[string]any{"message": "Unknown Guild", "code": 10004})
			return
		}
		writeJSON(w, guildObject(5))
	})
	mux.HandleFunc("GET /api/v9/guilds/{guild}/members/{user}", func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		roles, ok := f.members[r.PathValue("user")]
		f.mu.Unlock()
		if r.PathValue("guild") != guildID || !ok {
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
		f.calls = append(f.calls, apiCall{
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

// recorded returns the calls so far matching method and path (path may
// end in "*" to match a prefix).
func (f *fakeDiscord) recorded(method, path string) []apiCall {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []apiCall
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

func (f *fakeDiscord) allCalls() []apiCall {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]apiCall(nil), f.calls...)
}

// waitFor polls until at least n calls match, and returns them.
func (f *fakeDiscord) waitFor(method, path string, n int) []apiCall {
	f.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		got := f.recorded(method, path)
		if len(got) >= n {
			return got
		}
		if time.Now().After(deadline) {
			var seen []string
			for _, c := range f.allCalls() {
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
func (f *fakeDiscord) gateway(w http.ResponseWriter, r *http.Request) {
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
	f.send("READY", map[string]any{
		"v":                  9,
		"session_id":         "session-1",
		"resume_gateway_url": "ws://" + f.gw.Listener.Addr().String(),
		"user":               map[string]any{"id": botID, "username": "Airlock", "bot": true},
		"guilds":             []any{map[string]any{"id": guildID, "unavailable": true}},
		"application":        map[string]any{"id": botID, "flags": 0},
	})
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

// send writes a dispatch (op 0) with the next sequence number.
func (f *fakeDiscord) send(typ string, d any) {
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

// trySend is send for the fake's own echoes: a closing connection is
// no failure.
func (f *fakeDiscord) trySend(typ string, d any) {
	f.wsMu.Lock()
	defer f.wsMu.Unlock()
	if f.conn == nil {
		return
	}
	f.seq++
	f.conn.WriteJSON(map[string]any{"op": 0, "t": typ, "s": f.seq, "d": d})
}

// guildMessage is a MESSAGE_CREATE payload in a guild channel.
func guildMessage(id, channel, author, content string, mentionsBot bool) map[string]any {
	m := map[string]any{
		"id": id, "channel_id": channel, "guild_id": guildID, "type": 0,
		"content":  content,
		"author":   map[string]any{"id": author, "username": "user" + author},
		"member":   map[string]any{"roles": []string{}},
		"mentions": []any{},
	}
	if mentionsBot {
		m["mentions"] = []any{map[string]any{"id": botID, "username": "Airlock", "bot": true}}
	}
	return m
}

// dmMessage is a MESSAGE_CREATE payload in a DM.
func dmMessage(id, author, content string) map[string]any {
	return map[string]any{
		"id": id, "channel_id": dmChannel, "type": 0, "content": content,
		"author": map[string]any{"id": author, "username": "user" + author}, "mentions": []any{},
	}
}

// click is an INTERACTION_CREATE payload for a button in a guild thread,
// with the member's permissions as a string, as Discord sends them.
func click(id, channel, user string, roles []string, customID, messageID string) map[string]any {
	return map[string]any{
		"id": id, "application_id": botID, "type": 3, "token": "token-" + id, "version": 1,
		"guild_id": guildID, "channel_id": channel,
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

// dmClick is a button INTERACTION_CREATE in a DM: user, no member.
func dmClick(id, user, customID, messageID string) map[string]any {
	return map[string]any{
		"id": id, "application_id": botID, "type": 3, "token": "token-" + id, "version": 1,
		"channel_id": dmChannel,
		"user":       map[string]any{"id": user, "username": "user" + user},
		"data":       map[string]any{"custom_id": customID, "component_type": 2},
		"message":    map[string]any{"id": messageID, "channel_id": dmChannel, "content": "", "type": 0},
	}
}

// modalSubmit is an INTERACTION_CREATE payload for the reason modal.
func modalSubmit(id, channel, user string, roles []string, customID, reason, messageID string) map[string]any {
	m := click(id, channel, user, roles, customID, messageID)
	m["type"] = 5
	m["data"] = map[string]any{
		"custom_id": customID,
		"components": []any{map[string]any{"type": 1, "components": []any{
			map[string]any{"type": 4, "custom_id": ReasonInputID, "value": reason},
		}}},
	}
	return m
}

// dmOf is the DM channel the fake opened with user ("" when none).
func (f *fakeDiscord) dmOf(user string) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.dms[user]
}

// dmClickIn is a button INTERACTION_CREATE in a given DM channel.
func dmClickIn(id, channel, user, customID, messageID string) map[string]any {
	m := dmClick(id, user, customID, messageID)
	m["channel_id"] = channel
	m["message"].(map[string]any)["channel_id"] = channel
	return m
}

// editSubmit is an INTERACTION_CREATE payload for the edit modal, opened
// from a card message (messageID "": Discord sent no message).
func editSubmit(id, channel, user string, roles []string, customID, args, messageID string) map[string]any {
	m := click(id, channel, user, roles, customID, messageID)
	m["type"] = 5
	m["data"] = map[string]any{
		"custom_id": customID,
		"components": []any{map[string]any{"type": 1, "components": []any{
			map[string]any{"type": 4, "custom_id": EditInputID, "value": args},
		}}},
	}
	if messageID == "" {
		delete(m, "message")
	}
	return m
}

func (f *fakeDiscord) String() string { return fmt.Sprintf("fake discord at %s", f.rest.URL) }
