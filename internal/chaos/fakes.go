package chaos

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/airlockhq/airlock/adapters/slack/slacktest"
)

// msgKey is a Slack message: its channel and ts.
type msgKey struct{ channel, ts string }

// rendering is what the fake Slack last accepted for a message.
type rendering struct {
	thread  string
	text    string
	blocks  any // the blocks as decoded JSON
	updates int // chat.update calls accepted for it
}

// ephemeral is one chat.postEphemeral the fake saw (whatever it answered).
type ephemeral struct {
	channel, thread, user, text string
	at                          time.Time
}

// fakeSlack is the soak's Slack: slacktest's fake Web API behind the
// fault schedule, keeping the last rendering of every message.
type fakeSlack struct {
	api    *slacktest.Server
	faults *schedule

	limited, failed atomic.Int64 // 429s and 5xx the fake answered
	updates         atomic.Int64 // chat.update calls accepted

	mu     sync.Mutex
	msgs   map[msgKey]*rendering
	order  []msgKey // messages in the order they were posted
	ephs   []ephemeral
	thread map[string][]msgKey // thread ts → its messages
}

func newFakeSlack(faults *schedule) *fakeSlack {
	s := &fakeSlack{faults: faults, msgs: map[msgKey]*rendering{}, thread: map[string][]msgKey{}}
	s.api = slacktest.New(slacktest.Options{BotToken: botToken, Discard: true, OnCall: s.seen, BotUser: botUser})
	return s
}

// ServeHTTP answers per the fault schedule, else as Slack.
func (s *fakeSlack) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	method := strings.TrimPrefix(r.URL.Path, "/api/")
	if method == "chat.update" || method == "chat.postMessage" {
		switch f := s.faults.at(time.Now()); f.kind {
		case faultSlack429:
			s.limited.Add(1)
			w.Header().Set("Retry-After", fmt.Sprint(f.retryAfter))
			w.Header().Set("Content-Type", "application/json; charset=utf-8")
			w.WriteHeader(http.StatusTooManyRequests)
			_, _ = io.WriteString(w, `{"ok":false,"error":"ratelimited"}`)
			return
		case faultSlack5xx:
			s.failed.Add(1)
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = io.WriteString(w, "<html>503 Service Unavailable</html>")
			return
		}
	}
	s.api.ServeHTTP(w, r)
}

// seen keeps what a call renders: a message posted or updated, an
// ephemeral.
func (s *fakeSlack) seen(c slacktest.Call) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch c.Method {
	case "chat.postMessage":
		k := msgKey{c.Param("channel"), c.TS}
		s.msgs[k] = &rendering{thread: c.Param("thread_ts"), text: c.Param("text"), blocks: decodeBlocks(c)}
		s.order = append(s.order, k)
		if th := c.Param("thread_ts"); th != "" {
			s.thread[th] = append(s.thread[th], k)
		}
	case "chat.update":
		k := msgKey{c.Param("channel"), c.Param("ts")}
		m := s.msgs[k]
		if m == nil {
			return // not a message of ours: the fake answers message_not_found
		}
		m.text, m.blocks = c.Param("text"), decodeBlocks(c)
		m.updates++
		s.updates.Add(1)
	case "chat.postEphemeral":
		s.ephs = append(s.ephs, ephemeral{channel: c.Param("channel"), thread: c.Param("thread_ts"), user: c.Param("user"), text: c.Param("text"), at: time.Now()})
	}
}

func decodeBlocks(c slacktest.Call) any {
	var v any
	if b := c.Param("blocks"); b != "" {
		_ = json.Unmarshal([]byte(b), &v)
	}
	return v
}

// button is one button on a message.
type button struct{ action, value string }

func buttonsOf(blocks any) []button {
	var out []button
	slacktest.Buttons(blocks, func(id, value string) { out = append(out, button{id, value}) })
	return out
}

// cardIn is the first message of the thread that offers Allow, if any.
func (s *fakeSlack) cardIn(channel, thread string) (msgKey, []button, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, k := range s.thread[thread] {
		if k.channel != channel {
			continue
		}
		bs := buttonsOf(s.msgs[k].blocks)
		for _, b := range bs {
			if b.action == actionAllow {
				return k, bs, true
			}
		}
	}
	return msgKey{}, nil, false
}

// answered reports whether the model's last answer was posted in the
// thread.
func (s *fakeSlack) answered(channel, thread string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, k := range s.thread[thread] {
		if k.channel == channel && strings.Contains(s.msgs[k].text, modelDone) {
			return true
		}
	}
	return false
}

// postedIn reports whether anything was posted in the thread (a card,
// the model's words, why nothing was done).
func (s *fakeSlack) postedIn(channel, thread string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, k := range s.thread[thread] {
		if k.channel == channel {
			return true
		}
	}
	return false
}

// messagesWithValue lists the messages (DM copies included) carrying a
// button of the value.
func (s *fakeSlack) messagesWithValue(value string) []msgKey {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []msgKey
	for _, k := range s.order {
		for _, b := range buttonsOf(s.msgs[k].blocks) {
			if b.value == value {
				out = append(out, k)
				break
			}
		}
	}
	return out
}

// lastRendering is a copy of a message's last rendering.
func (s *fakeSlack) lastRendering(k msgKey) (rendering, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	m, ok := s.msgs[k]
	if !ok {
		return rendering{}, false
	}
	return *m, true
}

// allMessages lists every message posted, in order.
func (s *fakeSlack) allMessages() []msgKey {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]msgKey(nil), s.order...)
}

// ephemeralsTo lists what one person was told privately in one place
// since a time.
func (s *fakeSlack) ephemeralsTo(user, channel, thread string, since time.Time) []ephemeral {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []ephemeral
	for _, e := range s.ephs {
		if e.user == user && e.channel == channel && e.thread == thread && !e.at.Before(since) {
			out = append(out, e)
		}
	}
	return out
}

// fakeModel is an OpenAI chat-completions API: a person's "soak calls=K
// pair=P" is answered with K calls (the first P of the tool needing two
// approvals), a tool result with modelDone.
type fakeModel struct {
	requests atomic.Int64
}

var askPattern = regexp.MustCompile(`soak calls=(\d) pair=(\d) id=([A-Za-z0-9.]+)`)

func (m *fakeModel) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	m.requests.Add(1)
	var req struct {
		Model    string `json:"model"`
		Messages []struct {
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
		} `json:"messages"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil || len(req.Messages) == 0 {
		http.Error(w, `{"error":{"message":"bad request"}}`, http.StatusBadRequest)
		return
	}
	last := req.Messages[len(req.Messages)-1]
	msg := map[string]any{"role": "assistant", "content": modelDone}
	finish := "stop"
	if last.Role == "user" {
		if sm := askPattern.FindStringSubmatch(string(last.Content)); sm != nil {
			k, p := int(sm[1][0]-'0'), int(sm[2][0]-'0')
			var calls []map[string]any
			for i := range k {
				name := toolOp
				if i < p {
					name = toolPair
				}
				args, _ := json.Marshal(map[string]any{"conv": sm[3], "n": i})
				calls = append(calls, map[string]any{"id": fmt.Sprintf("call_%d", i), "type": "function",
					"function": map[string]any{"name": name, "arguments": string(args)}})
			}
			msg = map[string]any{"role": "assistant", "content": "I'll run them.", "tool_calls": calls}
			finish = "tool_calls"
		}
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{
		"id": "chatcmpl-soak", "object": "chat.completion", "created": time.Now().Unix(), "model": req.Model,
		"choices": []any{map[string]any{"index": 0, "message": msg, "finish_reason": finish, "logprobs": nil}},
		"usage":   map[string]any{"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0},
	})
}

// toolServer is the service the soak's tools call. It counts the runs of
// each idempotency key and, in a slow stretch, answers after the tools'
// timeout (an outcome Airlock can't know).
type toolServer struct {
	faults *schedule

	slow atomic.Int64 // requests answered late
	mu   sync.Mutex
	runs map[string]int // idempotency key → requests
}

func newToolServer(faults *schedule) *toolServer {
	return &toolServer{faults: faults, runs: map[string]int{}}
}

func (t *toolServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	key := r.Header.Get("Idempotency-Key")
	t.mu.Lock()
	t.runs[key]++
	t.mu.Unlock()
	if t.faults.at(time.Now()).kind == faultToolSlow {
		t.slow.Add(1)
		select {
		case <-time.After(toolTimeout + time.Second):
		case <-r.Context().Done():
			return
		}
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = io.WriteString(w, `{"ok":true}`)
}

// counts is a copy of the runs per idempotency key.
func (t *toolServer) counts() map[string]int {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make(map[string]int, len(t.runs))
	for k, v := range t.runs {
		out[k] = v
	}
	return out
}
