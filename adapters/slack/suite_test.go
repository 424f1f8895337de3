package slack_test

import (
	"context"
	"encoding/json"
	"fmt"
	"html"
	"log/slog"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/airlockhq/airlock/adapters/internal/surfacetest"
	"github.com/airlockhq/airlock/adapters/slack"
	"github.com/airlockhq/airlock/adapters/slack/slacktest"
	"github.com/airlockhq/airlock/bot"
	"github.com/airlockhq/airlock/confirm"
	"github.com/airlockhq/airlock/internal/testkit"
	"github.com/airlockhq/airlock/storage"
)

// The behaviour suite over Slack: the real adapter and slack-go client in
// Socket Mode against slacktest's fake Slack on 127.0.0.1. People act as
// Slack delivers them: mentions as events, clicks and modal submissions
// as interactivity envelopes built from the messages and modals the fake
// was given to show.
func TestSurface(t *testing.T) { surfacetest.Run(t, slackDriver{}) }

const (
	suiteBotToken = "xoxb-suite-bot-token"
	suiteAppToken = "xapp-suite-app-token"
	suiteChannel  = "C0SUITE"
	suiteTeam     = "T0TEST" // the fake's workspace
)

var suiteUsers = map[surfacetest.Person]string{
	surfacetest.Requester: "UREQ",
	surfacetest.Approver:  "UAPPROVER",
	surfacetest.Approver2: "UAPPROVER2",
	surfacetest.Stranger:  "USTRANGER",
}

type slackDriver struct{}

func (slackDriver) Places() surfacetest.Places {
	return surfacetest.Places{Platform: slack.Platform, Channel: suiteChannel, Users: suiteUsers, Surface: confirm.SurfaceThread}
}

func (slackDriver) Lacks() map[surfacetest.Capability]string { return nil }

func (slackDriver) Start(t *testing.T, b *bot.Bot, db *storage.DB) surfacetest.Surface {
	fake := slacktest.Start(t, slacktest.Options{BotToken: suiteBotToken, AppToken: suiteAppToken, BotUser: "UBOT"})
	logs := &testkit.Buffer{}
	ad, err := slack.New(slack.Config{Mode: slack.ModeSocket, BotToken: suiteBotToken, AppToken: suiteAppToken,
		APIURL: fake.APIURL(), HTTPClient: &http.Client{Timeout: 10 * time.Second},
		Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))}, b, db)
	if err != nil {
		t.Fatal(err)
	}
	b.Register(slack.Platform, ad)
	ctx, cancel := context.WithCancel(context.Background())
	if err := ad.Start(ctx); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- ad.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Run: %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Error("Run did not return after its context ended")
		}
		if t.Failed() {
			t.Logf("logs:\n%s", logs.String())
		}
	})
	testkit.Eventually(t, 10*time.Second, "the Socket Mode connection", func() bool { return fake.Connections() > 0 })
	return &slackSurface{t: t, fake: fake, ad: ad, modalErrors: map[string][]string{}}
}

type slackSurface struct {
	t    *testing.T
	fake *slacktest.Server
	ad   *slack.Adapter
	seq  atomic.Int64

	mu          sync.Mutex
	modalErrors map[string][]string // user -> errors shown under a modal's input
	thread      string              // the conversation: the thread of the last mention
}

func (s *slackSurface) next() int64 { return s.seq.Add(1) }

// deliver sends a Socket Mode envelope and waits for its ack; it returns
// the ack's payload.
func (s *slackSurface) deliver(typ string, payload map[string]any) json.RawMessage {
	s.t.Helper()
	id, err := s.fake.SendEnvelope(typ, payload, 0)
	if err != nil {
		s.t.Fatal(err)
	}
	testkit.Eventually(s.t, 10*time.Second, "the ack of "+id, func() bool { return s.fake.Acked(id) })
	return s.fake.AckPayload(id)
}

// mention is the requester mentioning the bot at the top of the channel.
func (s *slackSurface) mention(text string) {
	s.t.Helper()
	n := s.next()
	ts := fmt.Sprintf("1700000000.%06d", n)
	s.mu.Lock()
	s.thread = ts
	s.mu.Unlock()
	s.deliver("events_api", map[string]any{
		"token": "Jhj5dZrVaK7ZwHHjRyZWjbDl", "team_id": suiteTeam, "api_app_id": "A0TEST", "type": "event_callback",
		"event_id": fmt.Sprintf("EvSUITE%06d", n), "event_time": 1700000000,
		"event": map[string]any{"type": "app_mention", "user": suiteUsers[surfacetest.Requester], "text": "<@UBOT> " + text,
			"ts": ts, "channel": suiteChannel, "event_ts": ts, "team": suiteTeam},
		"authorizations": []any{map[string]any{"team_id": suiteTeam, "user_id": "UBOT", "is_bot": true}},
	})
	s.ad.Wait()
}

func (s *slackSurface) Ask(text string)         { s.mention(text) }
func (s *slackSurface) StartRun(command string) { s.mention("run " + command) }
func (s *slackSurface) Name(p surfacetest.Person) string {
	return "<@" + suiteUsers[p] + ">"
}
func (s *slackSurface) Settle() { s.ad.Wait() }

// message is one message the bot posted: each version Slack accepted,
// the post first.
type message struct {
	channel, ts, thread string
	versions            []slacktest.Call
}

func (m message) blocks() []map[string]any { return blocksOf(m.versions[len(m.versions)-1]) }

func blocksOf(c slacktest.Call) []map[string]any {
	var b []map[string]any
	_ = json.Unmarshal([]byte(c.Param("blocks")), &b)
	return b
}

// messages are the bot's messages in the conversation, in the order
// posted.
func (s *slackSurface) messages() []message {
	s.mu.Lock()
	thread := s.thread
	s.mu.Unlock()
	var out []message
	at := map[string]int{}
	for _, c := range s.fake.Calls() {
		if c.Refused != "" {
			continue
		}
		switch c.Method {
		case "chat.postMessage":
			if c.Param("channel") != suiteChannel || c.Param("thread_ts") != thread {
				continue
			}
			at[c.Param("channel")+"/"+c.TS] = len(out)
			out = append(out, message{channel: c.Param("channel"), ts: c.TS, thread: c.Param("thread_ts"), versions: []slacktest.Call{c}})
		case "chat.update":
			if i, ok := at[c.Param("channel")+"/"+c.Param("ts")]; ok {
				out[i].versions = append(out[i].versions, c)
			}
		}
	}
	return out
}

func hasBlock(blocks []map[string]any, id string) bool {
	for _, b := range blocks {
		if b["block_id"] == id {
			return true
		}
	}
	return false
}

func isCard(m message) bool { return hasBlock(blocksOf(m.versions[0]), "header") }
func isRun(m message) bool  { return hasBlock(blocksOf(m.versions[0]), "run") }

func (s *slackSurface) cards() []message {
	var out []message
	for _, m := range s.messages() {
		if isCard(m) {
			out = append(out, m)
		}
	}
	return out
}

func (s *slackSurface) Cards() []string {
	var out []string
	for _, m := range s.cards() {
		out = append(out, shownText(m.blocks()))
	}
	return out
}

func (s *slackSurface) Buttons(card int) []string {
	var out []string
	if cards := s.cards(); card <= len(cards) {
		for _, b := range cards[card-1].blocks() {
			if b["type"] != "actions" {
				continue
			}
			els, _ := b["elements"].([]any)
			for _, e := range els {
				el, _ := e.(map[string]any)
				text, _ := el["text"].(map[string]any)
				label, _ := text["text"].(string)
				out = append(out, label)
			}
		}
	}
	return out
}

func (s *slackSurface) Runs() []string {
	var out []string
	for _, m := range s.messages() {
		if isRun(m) {
			out = append(out, shownText(m.blocks()))
		}
	}
	return out
}

func (s *slackSurface) Posts() []string {
	var out []string
	for _, m := range s.messages() {
		if !isCard(m) && !isRun(m) {
			out = append(out, html.UnescapeString(m.versions[len(m.versions)-1].Param("text")))
		}
	}
	return out
}

func (s *slackSurface) Updates() int {
	n := 0
	for _, m := range s.messages() {
		n += len(m.versions) - 1
	}
	return n
}

func (s *slackSurface) Notices(who surfacetest.Person) []string {
	s.mu.Lock()
	thread := s.thread
	s.mu.Unlock()
	var out []string
	for _, c := range s.fake.CallsTo("chat.postEphemeral") {
		if c.Param("user") == suiteUsers[who] && c.Param("channel") == suiteChannel && c.Param("thread_ts") == thread {
			out = append(out, html.UnescapeString(c.Param("text")))
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return append(out, s.modalErrors[suiteUsers[who]]...)
}

// A card's buttons by the label Slack shows on them.
var labels = map[string]surfacetest.Button{
	"Allow": surfacetest.Allow, "Allow…": surfacetest.AllowTyped, "Deny": surfacetest.Deny,
	"Deny with reason…": surfacetest.DenyReason, "Edit…": surfacetest.Edit, "Allow all": surfacetest.AllowAll,
}

var callBlock = regexp.MustCompile(`^(?:call|actions)_(\d+)$`)

type button struct {
	actionID, value, label string
}

// buttonOf finds the button b of call (0: the card's own) in blocks: a
// call's buttons are in the actions block after its call block.
func buttonOf(blocks []map[string]any, call int, b surfacetest.Button) (button, bool) {
	current := 0
	for _, blk := range blocks {
		id, _ := blk["block_id"].(string)
		if m := callBlock.FindStringSubmatch(id); m != nil {
			current, _ = strconv.Atoi(m[1])
		} else if id == "card_actions" {
			current = 0
		}
		if blk["type"] != "actions" || current != call {
			continue
		}
		els, _ := blk["elements"].([]any)
		for _, e := range els {
			el, _ := e.(map[string]any)
			text, _ := el["text"].(map[string]any)
			label, _ := text["text"].(string)
			if el["type"] == "button" && labels[label] == b {
				aid, _ := el["action_id"].(string)
				v, _ := el["value"].(string)
				return button{aid, v, label}, true
			}
		}
	}
	return button{}, false
}

func (s *slackSurface) Press(who surfacetest.Person, card, call int, b surfacetest.Button, input string) {
	s.t.Helper()
	cards := s.cards()
	if card > len(cards) {
		s.t.Fatalf("no card %d", card)
	}
	m := cards[card-1]
	// As the card last showed the button (a stale click is one on a
	// version the person still had on their screen).
	var btn button
	found := false
	for i := len(m.versions) - 1; i >= 0 && !found; i-- {
		btn, found = buttonOf(blocksOf(m.versions[i]), call, b)
	}
	if !found {
		s.t.Fatalf("card %d never showed %s for call %d:\n%s", card, b, call, shownText(m.blocks()))
	}
	user := suiteUsers[who]
	trigger := fmt.Sprintf("%d.%d.suite", 1000+s.next(), 98765)
	container := map[string]any{"type": "message", "message_ts": m.ts, "channel_id": m.channel, "is_ephemeral": false}
	msg := map[string]any{"type": "message", "ts": m.ts, "user": "UBOT", "bot_id": "BBOT", "text": "Approval needed"}
	if m.thread != "" {
		container["thread_ts"], msg["thread_ts"] = m.thread, m.thread
	}
	s.deliver("interactive", map[string]any{
		"type": "block_actions", "token": "Jhj5dZrVaK7ZwHHjRyZWjbDl", "trigger_id": trigger,
		"user":       map[string]any{"id": user, "username": strings.ToLower(user), "name": strings.ToLower(user), "team_id": suiteTeam},
		"team":       map[string]any{"id": suiteTeam, "domain": "airlock-test"},
		"api_app_id": "A0TEST", "container": container,
		"channel": map[string]any{"id": m.channel, "name": "suite"},
		"message": msg,
		"actions": []any{map[string]any{"action_id": btn.actionID, "block_id": "actions", "value": btn.value, "type": "button",
			"action_ts": "1800000001.000001", "text": map[string]any{"type": "plain_text", "text": btn.label, "emoji": true}}},
		"response_url": "https://hooks.slack.com/actions/T0TEST/1/xyz",
	})
	s.ad.Wait()
	if b == surfacetest.DenyReason || b == surfacetest.Edit || b == surfacetest.AllowTyped {
		s.submit(user, trigger, input)
	}
}

// submit types input into the modal the click with trigger opened, and
// submits it; errors shown under the input are the user's notices. A
// click refused before a modal opened submits nothing.
func (s *slackSurface) submit(user, trigger, input string) {
	s.t.Helper()
	var view map[string]any
	for _, c := range s.fake.CallsTo("views.open") {
		if c.Param("trigger_id") == trigger {
			view, _ = c.JSON()["view"].(map[string]any)
		}
	}
	if view == nil {
		return
	}
	values := map[string]any{}
	blocks, _ := view["blocks"].([]any)
	for _, b := range blocks {
		blk, _ := b.(map[string]any)
		if blk["type"] != "input" {
			continue
		}
		el, _ := blk["element"].(map[string]any)
		values[blk["block_id"].(string)] = map[string]any{el["action_id"].(string): map[string]any{"type": "plain_text_input", "value": input}}
	}
	if len(values) != 1 {
		s.t.Fatalf("a modal of %d inputs: %v", len(values), view)
	}
	ack := s.deliver("interactive", map[string]any{
		"type": "view_submission", "token": "Jhj5dZrVaK7ZwHHjRyZWjbDl", "trigger_id": trigger + ".submit",
		"user": map[string]any{"id": user, "username": strings.ToLower(user), "team_id": suiteTeam},
		"team": map[string]any{"id": suiteTeam}, "api_app_id": "A0TEST",
		"view": map[string]any{"id": "V" + trigger, "type": "modal", "callback_id": view["callback_id"],
			"private_metadata": view["private_metadata"], "state": map[string]any{"values": values}},
	})
	s.ad.Wait()
	var answer struct {
		Errors map[string]string `json:"errors"`
	}
	if len(ack) > 0 {
		_ = json.Unmarshal(ack, &answer)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, e := range answer.Errors {
		s.modalErrors[user] = append(s.modalErrors[user], e)
	}
}

// shownText is what a person reads in blocks: every text, a line a block
// (or a part of one), mrkdwn's escapes undone; buttons are controls, not
// text.
func shownText(blocks []map[string]any) string {
	var lines []string
	for _, b := range blocks {
		switch b["type"] {
		case "actions", "divider":
		case "rich_text":
			els, _ := b["elements"].([]any)
			for _, e := range els {
				lines = append(lines, richText(e))
			}
		default:
			lines = append(lines, textObjects(b)...)
		}
	}
	return strings.Join(lines, "\n")
}

// textObjects are the texts of a block's text objects (its text, fields
// and context elements), not of its buttons.
func textObjects(v any) []string {
	switch v := v.(type) {
	case map[string]any:
		switch v["type"] {
		case "button":
			return nil
		case "mrkdwn":
			s, _ := v["text"].(string)
			return []string{html.UnescapeString(s)}
		case "plain_text":
			s, _ := v["text"].(string)
			return []string{s}
		}
		var out []string
		for _, k := range []string{"text", "fields", "elements", "accessory"} {
			out = append(out, textObjects(v[k])...)
		}
		return out
	case []any:
		var out []string
		for _, e := range v {
			out = append(out, textObjects(e)...)
		}
		return out
	}
	return nil
}

// richText is a rich_text element as shown: its texts, people and
// groups as Slack writes them in mrkdwn.
func richText(v any) string {
	switch v := v.(type) {
	case map[string]any:
		switch v["type"] {
		case "text":
			s, _ := v["text"].(string)
			return s
		case "user":
			return fmt.Sprintf("<@%v>", v["user_id"])
		case "usergroup":
			return fmt.Sprintf("<!subteam^%v>", v["usergroup_id"])
		case "emoji":
			return fmt.Sprintf(":%v:", v["name"])
		case "link":
			if s, _ := v["text"].(string); s != "" {
				return s
			}
			s, _ := v["url"].(string)
			return s
		case "date":
			s, _ := v["fallback"].(string)
			return s
		}
		return richText(v["elements"])
	case []any:
		var parts []string
		for _, e := range v {
			parts = append(parts, richText(e))
		}
		return strings.Join(parts, "")
	}
	return ""
}
