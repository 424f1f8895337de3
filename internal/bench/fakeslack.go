package bench

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/airlockhq/airlock/adapters/slack"
	"github.com/airlockhq/airlock/adapters/slack/slacktest"
)

// Identities of the bench's fake workspace.
const (
	team          = "T0BENCH"
	botUser       = "U0BENCHBOT"
	requester     = "U0BENCHREQ"
	approver      = "U0BENCHAPP"
	signingSecret = "bench-signing-secret-0123456789abcdef"
	toolName      = "bench_tool"
	modelAnswer   = "bench: done"
	channelCount  = 16
)

func channelID(i int) string { return fmt.Sprintf("C0BENCH%04d", i%channelCount) }
func threadTS(i int) string  { return fmt.Sprintf("1700000000.%06d", i) }

// fakeSlack is the bench's Slack: slacktest's fake Web API, keeping no
// calls, with a counter on top that sees each chat.postMessage (a card: its
// Allow button's reference is kept; the model's answer: the card's
// decision is finished), chat.update and chat.postEphemeral. It keeps one
// reference per card and nothing else per message.
type fakeSlack struct {
	http.Handler
	cards   int
	mu      sync.Mutex
	refs    []string
	cardTSs []string // each card's message ts
	waiters map[int]chan struct{}

	doneCount  atomic.Int64
	lastDone   atomic.Int64
	done       []atomic.Bool
	allDone    chan struct{}
	updates    atomic.Int64
	ephemerals atomic.Int64
	unexpected atomic.Int64
}

func newFakeSlack(cards int) *fakeSlack {
	f := &fakeSlack{cards: cards, refs: make([]string, cards), cardTSs: make([]string, cards), waiters: map[int]chan struct{}{},
		done: make([]atomic.Bool, cards), allDone: make(chan struct{})}
	f.Handler = slacktest.New(slacktest.Options{TeamID: team, Team: "Bench", Domain: "bench", BotUser: botUser, BotID: "B0BENCH",
		Discard: true, OnCall: f.call})
	return f
}

// call counts a Web API call.
func (f *fakeSlack) call(c slacktest.Call) {
	switch c.Method {
	case "chat.postMessage":
		f.postMessage(c)
	case "chat.update":
		f.updates.Add(1)
	case "chat.postEphemeral":
		f.ephemerals.Add(1)
	}
}

// await returns a channel closed when card i is posted.
func (f *fakeSlack) await(i int) <-chan struct{} {
	c := make(chan struct{})
	f.mu.Lock()
	f.waiters[i] = c
	f.mu.Unlock()
	return c
}

func (f *fakeSlack) ref(i int) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.refs[i]
}

// cardTS is the ts of card i's message.
func (f *fakeSlack) cardTS(i int) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.cardTSs[i]
}

// card is the index of the card whose thread ts is ts, or -1.
func (f *fakeSlack) card(ts string) int {
	_, frac, ok := strings.Cut(ts, ".")
	i, err := strconv.Atoi(frac)
	if !ok || err != nil || i < 0 || i >= f.cards || ts != threadTS(i) {
		return -1
	}
	return i
}

// postMessage takes a message posted: a card, or the model's answer
// that finishes a card's decision; anything else is unexpected.
func (f *fakeSlack) postMessage(c slacktest.Call) {
	i, blocks := f.card(c.Param("thread_ts")), c.Param("blocks")
	switch {
	case i < 0:
		f.unexpected.Add(1)
	case blocks != "":
		f.posted(i, allowRef(blocks), c.TS)
	case c.Param("text") == modelAnswer:
		f.finished(i)
	default:
		f.unexpected.Add(1)
	}
}

func (f *fakeSlack) posted(i int, ref, ts string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.refs[i] == "" {
		f.refs[i], f.cardTSs[i] = ref, ts
	}
	if c := f.waiters[i]; c != nil {
		close(c)
		delete(f.waiters, i)
	}
}

// finished counts card i's decision done, once; a second answer in its
// thread is unexpected.
func (f *fakeSlack) finished(i int) {
	if !f.done[i].CompareAndSwap(false, true) {
		f.unexpected.Add(1)
		return
	}
	f.lastDone.Store(time.Now().UnixNano())
	if f.doneCount.Add(1) == int64(f.cards) {
		close(f.allDone)
	}
}

// allowRef finds the Allow button's value in a card's blocks.
func allowRef(blocks string) string {
	var bs []struct {
		Elements []struct {
			ActionID string `json:"action_id"`
			Value    string `json:"value"`
		} `json:"elements"`
	}
	if json.Unmarshal([]byte(blocks), &bs) != nil {
		return ""
	}
	for _, b := range bs {
		for _, e := range b.Elements {
			if e.ActionID == slack.ActionAllow {
				return e.Value
			}
		}
	}
	return ""
}
