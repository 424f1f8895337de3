package discord

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bwmarrin/discordgo"

	"github.com/airlockhq/airlock/bot"
	"github.com/airlockhq/airlock/card"
	"github.com/airlockhq/airlock/confirm"
	"github.com/airlockhq/airlock/model"
	"github.com/airlockhq/airlock/model/modeltest"
	"github.com/airlockhq/airlock/storage"
	"github.com/airlockhq/airlock/tools"
)

// countTool is a gated tool that counts its runs and keeps the
// arguments of the last.
type countTool struct {
	runs atomic.Int64
	last atomic.Value // string
}

func (c *countTool) lastArgs() string { s, _ := c.last.Load().(string); return s }

func (c *countTool) Spec() model.ToolSpec {
	return model.ToolSpec{Name: "restart_service", Description: "Restart a service.", Parameters: json.RawMessage(`{"type":"object"}`)}
}
func (c *countTool) Confirm() bool { return true }
func (c *countTool) Validate(args json.RawMessage) error {
	var m map[string]any
	if err := json.Unmarshal(args, &m); err != nil {
		return fmt.Errorf("%w: must be a JSON object", tools.ErrInvalidArgs)
	}
	return nil
}
func (c *countTool) Summary(args json.RawMessage) (string, error) {
	var m map[string]any
	json.Unmarshal(args, &m)
	return fmt.Sprintf("Restart %v in production", m["service"]), nil
}
func (c *countTool) Run(_ context.Context, args json.RawMessage, _ string) (string, error) {
	c.last.Store(string(args))
	c.runs.Add(1)
	return "restarted", nil
}

type harness struct {
	t     *testing.T
	fd    *fakeDiscord
	db    *storage.DB
	model *modeltest.Scripted
	tool  *countTool
	set   *tools.Set
	bot   *bot.Bot
	spy   *spyBot
	a     *Adapter
}

// spyBot is the real bot, recording the turns the adapter hands it.
type spyBot struct {
	*bot.Bot
	mu    sync.Mutex
	turns []bot.Turn
}

func (s *spyBot) Admit(ctx context.Context, t bot.Turn) bot.Admission {
	s.mu.Lock()
	s.turns = append(s.turns, t)
	s.mu.Unlock()
	return s.Bot.Admit(ctx, t)
}

func (s *spyBot) HandleTurn(ctx context.Context, t bot.Turn) error {
	s.mu.Lock()
	s.turns = append(s.turns, t)
	s.mu.Unlock()
	return s.Bot.HandleTurn(ctx, t)
}

func (s *spyBot) seen() []bot.Turn {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]bot.Turn(nil), s.turns...)
}

// defaultChannels: the ops channel (approvers by role), every other
// channel of the platform and direct messages (approver by user id).
func defaultChannels() []bot.Channel {
	return []bot.Channel{
		{Platform: Platform, ID: channelID, ApproverRoles: []string{modRole}},
		{Platform: Platform, ID: "*", Approvers: []string{dmUser}},
		{Platform: Platform, ID: bot.DMChannel, Approvers: []string{dmUser}},
	}
}

func newHarness(t *testing.T) *harness {
	t.Helper()
	return newHarnessWith(t, defaultChannels(), nil)
}

func newHarnessWith(t *testing.T, channels []bot.Channel, edit func(*bot.Config)) *harness {
	t.Helper()
	ctx := context.Background()
	db, err := storage.Open(ctx, "sqlite", filepath.Join(t.TempDir(), "airlock.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	set, err := tools.New(nil, tools.Options{})
	if err != nil {
		t.Fatal(err)
	}
	tool := &countTool{}
	if err := set.Add(tool); err != nil {
		t.Fatal(err)
	}
	m := modeltest.NewScripted()
	cfg := bot.Config{
		Store:    db,
		Model:    m,
		Tools:    set,
		Channels: bot.NewChannels(channels),
		Timeout:  10 * time.Minute,
	}
	if edit != nil {
		edit(&cfg)
	}
	b, err := bot.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	fd := newFakeDiscord(t, true)
	spy := &spyBot{Bot: b}
	a, err := New(Config{Token: testToken, APIURL: fd.APIURL(), Events: db}, spy)
	if err != nil {
		t.Fatal(err)
	}
	b.Register(Platform, a)
	return &harness{t: t, fd: fd, db: db, model: m, tool: tool, set: set, bot: b, spy: spy, a: a}
}

// start runs the adapter until the test ends and checks the IDENTIFY.
// startWith scripts the model's first turn, one call then its reply once
// the call is done, and starts the adapter.
func (h *harness) startWith(call confirm.ToolCall, reply string) {
	h.t.Helper()
	h.model.PushCalls(call)
	h.model.PushText(reply)
	h.start()
}

func (h *harness) start() {
	h.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- h.a.Run(ctx) }()
	h.t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				h.t.Errorf("Run: %v", err)
			}
		case <-time.After(20 * time.Second):
			h.t.Error("Run did not return after cancel")
		}
	})
	select {
	case ident := <-h.fd.Identify():
		intents, _ := ident["intents"].(float64)
		want := int64(discordgo.IntentsGuilds | discordgo.IntentsGuildMessages | discordgo.IntentsDirectMessages | discordgo.IntentsMessageContent)
		if int64(intents) != want || int64(intents)&(1<<15) == 0 {
			h.t.Fatalf("intents %v, want %d (with MessageContent 1<<15)", ident["intents"], want)
		}
		if tok, _ := ident["token"].(string); tok != "Bot "+testToken {
			h.t.Fatal("IDENTIFY did not carry the bot token")
		}
	case err := <-done:
		h.t.Fatalf("Run: %v", err)
	case <-time.After(10 * time.Second):
		h.t.Fatal("no IDENTIFY")
	}
	// Events sent before READY is handled would be wiped by it (READY
	// resets the session's guild state): wait for it. (The bot's id is
	// known from the token before READY; its name only from READY.)
	for deadline := time.Now().Add(10 * time.Second); h.a.botName.Load() == nil; {
		if time.Now().After(deadline) {
			h.t.Fatal("READY was never handled")
		}
		time.Sleep(2 * time.Millisecond)
	}
	// The first REST call was the gateway lookup at the configured base.
	if got := h.fd.Recorded("GET", "/gateway"); len(got) != 1 || !strings.HasPrefix(got[0].Header.Get("Authorization"), "Bot ") {
		h.t.Fatalf("gateway lookup: %+v", got)
	}
}

// postedCard is a card message the bot posted.
type postedCard struct {
	id         string
	content    string
	embeds     []map[string]any
	components []map[string]any
}

func decodeMessage(t *testing.T, c apiCall) postedCard {
	t.Helper()
	var body struct {
		Content    string           `json:"content"`
		Embeds     []map[string]any `json:"embeds"`
		Components []map[string]any `json:"components"`
	}
	if err := json.Unmarshal(c.Body, &body); err != nil {
		t.Fatal(err)
	}
	return postedCard{id: c.ID(), content: body.Content, embeds: body.Embeds, components: body.Components}
}

// card waits for the n-th message with buttons posted in channel.
func (h *harness) card(channel string, n int) postedCard {
	h.t.Helper()
	return h.nthPosted(channel, n, `"components":[{`, fmt.Sprintf("no card %d in channel %s", n, channel))
}

// nthPosted waits for the n-th message posted in channel whose body holds
// marker; missing is the failure when none comes in time.
func (h *harness) nthPosted(channel string, n int, marker, missing string) postedCard {
	h.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		var found []apiCall
		for _, c := range h.fd.Recorded("POST", "/channels/"+channel+"/messages") {
			if strings.Contains(string(c.Body), marker) {
				found = append(found, c)
			}
		}
		if len(found) >= n {
			return decodeMessage(h.t, found[n-1])
		}
		if time.Now().After(deadline) {
			h.t.Fatal(missing)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// lastEdit is the newest edit of a message.
func (h *harness) lastEdit(channel, id string) postedCard {
	h.t.Helper()
	edits := h.fd.WaitFor("PATCH", "/channels/"+channel+"/messages/"+id, 1)
	return decodeMessage(h.t, edits[len(edits)-1])
}

// buttonIDs sorts a card's buttons by style, secondary ones by purpose.
func buttonIDs(t *testing.T, components []map[string]any) (allow, deny, reason []string) {
	t.Helper()
	allow, deny, reason, _ = buttonIDsAll(t, components)
	return
}

func buttonIDsAll(t *testing.T, components []map[string]any) (allow, deny, reason, show []string) {
	t.Helper()
	byAction := buttonsByAction(t, components)
	return byAction[actionAllow], byAction[actionDeny], byAction[actionReason], byAction[actionShowArgs]
}

// grantIDs are the custom ids of a card's "Allow for" buttons.
func grantIDs(t *testing.T, components []map[string]any) []string {
	t.Helper()
	return buttonsByAction(t, components)[actionGrant]
}

// buttonsByAction sorts buttons by the action of their custom id, and
// checks each has its action's style: Allow success, Deny and Revoke
// danger, the others secondary; at most 5 a row.
func buttonsByAction(t *testing.T, components []map[string]any) map[string][]string {
	t.Helper()
	styles := map[string]discordgo.ButtonStyle{
		actionAllow: discordgo.SuccessButton, actionDeny: discordgo.DangerButton, actionRevoke: discordgo.DangerButton,
		actionGrant: discordgo.SecondaryButton, actionReason: discordgo.SecondaryButton, actionShowArgs: discordgo.SecondaryButton,
		actionEdit: discordgo.SecondaryButton, actionExtend: discordgo.SecondaryButton,
		actionAllowAll: discordgo.SecondaryButton, actionDenyAll: discordgo.SecondaryButton,
		actionAllowTyped: discordgo.SuccessButton,
	}
	out := map[string][]string{}
	for _, row := range components {
		if row["type"].(float64) != 1 {
			t.Fatalf("top-level component of type %v", row["type"])
		}
		buttons := row["components"].([]any)
		if len(buttons) > maxButtons {
			t.Fatalf("a row of %d buttons", len(buttons))
		}
		for _, c := range buttons {
			b := c.(map[string]any)
			id := b["custom_id"].(string)
			action, _, ok := parseCustomID(id)
			if !ok {
				t.Fatalf("custom_id %q is not Airlock's", id)
			}
			if want, ok := styles[action]; !ok || b["style"].(float64) != float64(want) {
				t.Fatalf("button %q of style %v", id, b["style"])
			}
			out[action] = append(out[action], id)
		}
	}
	return out
}

// answers are the messages without buttons the bot posted in channel.
func (h *harness) answers(channel string) []string {
	var out []string
	for _, c := range h.fd.Recorded("POST", "/channels/"+channel+"/messages") {
		var m struct {
			Content    string `json:"content"`
			Components []any  `json:"components"`
		}
		json.Unmarshal(c.Body, &m)
		if len(m.Components) == 0 {
			out = append(out, m.Content)
		}
	}
	return out
}

func (h *harness) waitAnswer(channel, want string) {
	h.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !slices.Contains(h.answers(channel), want) {
		if time.Now().After(deadline) {
			h.t.Fatalf("no answer %q in %s; answers: %q", want, channel, h.answers(channel))
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// threadFor waits for the thread started from a message and returns its id.
// askForCard has the requester mention the bot in channelID with text, as
// message messageID, and returns the thread started on it and the first
// card posted there.
func (h *harness) askForCard(messageID, text string) (string, postedCard) {
	h.t.Helper()
	h.fd.Send("MESSAGE_CREATE", guildMessage(messageID, channelID, requester, mentionText(text), true))
	thread := h.threadFor(messageID)
	return thread, h.card(thread, 1)
}

func (h *harness) threadFor(messageID string) string {
	h.t.Helper()
	c := h.fd.WaitFor("POST", "/channels/"+channelID+"/messages/"+messageID+"/threads", 1)[0]
	return c.ID()
}

// callbacks returns the interaction callbacks sent for interaction id.
func (h *harness) callback(id string) map[string]any {
	h.t.Helper()
	c := h.fd.WaitFor("POST", "/interactions/"+id+"/token-"+id+"/callback", 1)
	return c[0].JSON(h.t)
}

func (h *harness) lastRequest() model.Request {
	h.t.Helper()
	reqs := h.model.Requests()
	if len(reqs) == 0 {
		h.t.Fatal("the model got no request")
	}
	return reqs[len(reqs)-1]
}

var toolResults = modeltest.LastToolResults

var tc = modeltest.ToolCall

func mentionText(s string) string { return "<@" + botID + "> " + s }

// TestMentionThreadCardRolesAndAnswer is the whole guild flow: a mention
// starts a thread, the paused reply is a card there, a member without the
// approver role changes nothing, a moderator's Allow runs the tool once,
// the card loses its buttons and says who decided, the answer follows.
func TestMentionThreadCardRolesAndAnswer(t *testing.T) {
	h := newHarness(t)
	h.startWith(tc("c1", "restart_service", `{"service":"api"}`), "Restarted api.")

	msg := guildMessage("7001", channelID, requester, mentionText("restart api please"), true)
	h.fd.Send("MESSAGE_CREATE", msg)
	h.fd.Send("MESSAGE_CREATE", msg) // a redelivery starts nothing more
	thread := h.threadFor("7001")
	tcall := h.fd.Recorded("POST", "/channels/"+channelID+"/messages/7001/threads")[0].JSON(t)
	if tcall["name"] != "restart api please" || tcall["auto_archive_duration"] != float64(1440) {
		t.Fatalf("thread start: %v", tcall)
	}

	card := h.card(thread, 1)
	if !strings.Contains(card.content, "<@"+requester+">") || !strings.Contains(card.content, "<@&"+modRole+">") || !strings.Contains(card.content, "<t:") {
		t.Fatalf("card content: %q", card.content)
	}
	if len(card.embeds) != 1 || shown(card.embeds[0]["title"]) != "[1] restart_service" || shown(card.embeds[0]["description"]) != "Restart api in production" {
		t.Fatalf("card embeds: %v", card.embeds)
	}
	allow, deny, reason := buttonIDs(t, card.components)
	if len(allow) != 1 || len(deny) != 1 || len(reason) != 1 || !strings.HasPrefix(allow[0], "al:a:") || !strings.HasPrefix(deny[0], "al:d:") || !strings.HasPrefix(reason[0], "al:r:") {
		t.Fatalf("buttons: %v %v %v", allow, deny, reason)
	}
	posted := h.fd.Recorded("POST", "/channels/"+thread+"/messages")
	if am := posted[0].JSON(t)["allowed_mentions"].(map[string]any); len(am["parse"].([]any)) != 0 {
		t.Fatalf("the card may ping: %v", am)
	}

	// A member without the approver role: ephemeral answer, nothing runs.
	h.fd.Send("INTERACTION_CREATE", click("8001", thread, outsider, []string{otherRole}, allow[0], card.id))
	if cb := h.callback("8001"); cb["type"] != float64(discordgo.InteractionResponseDeferredMessageUpdate) {
		t.Fatalf("callback: %v", cb)
	}
	fu := h.fd.WaitFor("POST", "/webhooks/"+botID+"/token-8001", 1)[0].JSON(t)
	if fu["content"] != bot.UserMessage(bot.ErrNotApprover) || fu["flags"] != float64(discordgo.MessageFlagsEphemeral) {
		t.Fatalf("follow-up: %v", fu)
	}
	if n := h.tool.runs.Load(); n != 0 {
		t.Fatalf("a non-approver's click ran the tool %d times", n)
	}
	events, err := h.db.AuditEvents(context.Background(), confirm.AuditFilter{})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(events, func(e confirm.AuditEvent) bool { return e.Kind == confirm.AuditRejectedClick && e.Actor == outsider }) {
		t.Fatalf("no rejected_click audited for %s: %+v", outsider, events)
	}

	// A moderator: the tool runs once, the card shows who decided, the answer follows.
	h.fd.Send("INTERACTION_CREATE", click("8002", thread, moderator, []string{otherRole, modRole}, allow[0], card.id))
	h.waitAnswer(thread, "Restarted api.")
	if cb := h.callback("8002"); cb["type"] != float64(discordgo.InteractionResponseDeferredMessageUpdate) {
		t.Fatalf("callback: %v", cb)
	}
	if n := h.tool.runs.Load(); n != 1 {
		t.Fatalf("tool ran %d times, want 1", n)
	}
	if fus := h.fd.Recorded("POST", "/webhooks/"+botID+"/token-8002"); len(fus) != 0 {
		t.Fatalf("a successful click got a follow-up: %s", fus[0].Body)
	}
	final := h.lastEdit(thread, card.id)
	if len(final.components) != 0 {
		t.Fatalf("decided card still has buttons: %v", final.components)
	}
	status := field(final.embeds[0], "Status")
	if !strings.Contains(status, "allowed by <@"+moderator+">") || !strings.Contains(status, "succeeded") {
		t.Fatalf("status: %q", status)
	}
	// The same click again changes nothing.
	h.fd.Send("INTERACTION_CREATE", click("8003", thread, moderator, []string{modRole}, allow[0], card.id))
	fu = h.fd.WaitFor("POST", "/webhooks/"+botID+"/token-8003", 1)[0].JSON(t)
	if fu["content"] != bot.UserMessage(bot.ErrAlreadyClosed) || h.tool.runs.Load() != 1 {
		t.Fatalf("second click: %v, runs %d", fu, h.tool.runs.Load())
	}
	if n := len(h.fd.Recorded("POST", "/channels/"+channelID+"/messages/7001/threads")); n != 1 {
		t.Fatalf("threads started: %d", n)
	}
	if n := len(h.model.Requests()); n != 2 {
		t.Fatalf("model requests: %d, want 2", n)
	}
	// The bot's own posts came back over the gateway (the fake echoes
	// them) and started nothing.
	if n := len(h.fd.Recorded("POST", "/channels/"+thread+"/messages/*")); n != 0 {
		t.Fatalf("the bot answered its own messages: %d threads", n)
	}
}

// TestDenyWithReasonViaModal: the reason button opens a modal; its submit
// denies with the reason, which reaches the model; nothing runs.
func TestDenyWithReasonViaModal(t *testing.T) {
	h := newHarness(t)
	h.startWith(tc("c1", "restart_service", `{"service":"web"}`), "OK, I will not restart web.")

	thread, card := h.askForCard("7101", "restart web")
	_, _, reason := buttonIDs(t, card.components)

	h.fd.Send("INTERACTION_CREATE", click("8101", thread, moderator, []string{modRole}, reason[0], card.id))
	cb := h.callback("8101")
	if cb["type"] != float64(discordgo.InteractionResponseModal) {
		t.Fatalf("callback: %v", cb)
	}
	data := cb["data"].(map[string]any)
	modalID := data["custom_id"].(string)
	if modalID != "al:m:"+strings.TrimPrefix(reason[0], "al:r:") || len(modalID) > 100 {
		t.Fatalf("modal custom_id %q", modalID)
	}
	input := data["components"].([]any)[0].(map[string]any)["components"].([]any)[0].(map[string]any)
	if input["type"] != float64(discordgo.TextInputComponent) || input["custom_id"] != ReasonInputID {
		t.Fatalf("modal input: %v", input)
	}
	if h.tool.runs.Load() != 0 || len(h.fd.Recorded("PATCH", "/channels/"+thread+"/messages/*")) != 0 {
		t.Fatal("opening the modal changed something")
	}

	h.fd.Send("INTERACTION_CREATE", modalSubmit("8102", thread, moderator, []string{modRole}, modalID, "not during the incident", card.id))
	h.waitAnswer(thread, "OK, I will not restart web.")
	if cb := h.callback("8102"); cb["type"] != float64(discordgo.InteractionResponseDeferredMessageUpdate) {
		t.Fatalf("modal callback: %v", cb)
	}
	if h.tool.runs.Load() != 0 {
		t.Fatal("a denied call ran")
	}
	res := toolResults(t, h.lastRequest())
	if len(res) != 1 || !res[0].IsError || !strings.Contains(res[0].Content, "not during the incident") || !strings.Contains(res[0].Content, moderator) {
		t.Fatalf("result to the model: %+v", res)
	}
	final := h.lastEdit(thread, card.id)
	status := field(final.embeds[0], "Status")
	if len(final.components) != 0 || !strings.Contains(status, "denied by <@"+moderator+">") || !strings.Contains(shown(status), "not during the incident") {
		t.Fatalf("final card: %q %v", status, final.components)
	}
}

// TestAsidesRepliesAndBots: in a conversation's thread, a message without
// a mention is context only; a reply to the bot is a turn; bots, the bot
// itself and system messages are ignored.
func TestAsidesRepliesAndBots(t *testing.T) {
	h := newHarness(t)
	h.model.PushText("Hello, what should I look at?")
	h.model.PushText("The web is fine.")
	h.start()

	h.fd.Send("MESSAGE_CREATE", guildMessage("7201", channelID, requester, mentionText("hi"), true))
	thread := h.threadFor("7201")
	h.waitAnswer(thread, "Hello, what should I look at?")

	h.fd.Send("MESSAGE_CREATE", guildMessage("7202", thread, "2100", "is the migration done?", false))
	own := guildMessage("7203", thread, botID, mentionText("my own words"), true)
	own["author"] = map[string]any{"id": botID, "username": "Airlock", "bot": true}
	h.fd.Send("MESSAGE_CREATE", own)
	other := guildMessage("7204", thread, "2200", mentionText("I am another bot"), true)
	other["author"] = map[string]any{"id": "2200", "username": "otherbot", "bot": true}
	h.fd.Send("MESSAGE_CREATE", other)
	system := guildMessage("7205", thread, requester, mentionText("pinned a message"), true)
	system["type"] = 6
	h.fd.Send("MESSAGE_CREATE", system)
	// Messages outside any conversation: a channel message without a
	// mention, and a thread the bot is not in.
	h.fd.Send("MESSAGE_CREATE", guildMessage("7206", channelID, requester, "just chatting", false))

	reply := guildMessage("7207", thread, requester, "and the web?", false)
	reply["type"] = 19
	reply["message_reference"] = map[string]any{"message_id": "999", "channel_id": thread, "guild_id": guildID}
	reply["referenced_message"] = map[string]any{"id": "999", "channel_id": thread, "content": "Hello", "type": 0,
		"author": map[string]any{"id": botID, "username": "Airlock", "bot": true}}
	h.fd.Send("MESSAGE_CREATE", reply)
	h.waitAnswer(thread, "The web is fine.")

	reqs := h.model.Requests()
	if len(reqs) != 2 {
		t.Fatalf("model requests: %d, want 2 (asides, bots and system messages are no turns)", len(reqs))
	}
	msgs := reqs[1].Messages
	last := msgs[len(msgs)-1]
	if last.Role != model.RoleUser || last.Text != "and the web?" || last.Author != requester {
		t.Fatalf("last message: %+v", last)
	}
	var aside bool
	for _, m := range msgs {
		if m.Role == model.RoleUser && strings.Contains(m.Text, "is the migration done?") && strings.Contains(m.Text, "not addressed to you") {
			aside = true
		}
		if strings.Contains(m.Text, "my own words") || strings.Contains(m.Text, "another bot") || strings.Contains(m.Text, "pinned") || strings.Contains(m.Text, "just chatting") {
			t.Fatalf("ignored message reached the model: %+v", m)
		}
	}
	if !aside {
		t.Fatalf("the aside is not in the context: %+v", msgs)
	}
	if first := reqs[0].Messages[0]; first.Text != "hi" {
		t.Fatalf("the mention was not stripped: %q", first.Text)
	}
	if n := len(h.fd.Recorded("POST", "/channels/"+channelID+"/messages/*")); n != 1 {
		t.Fatalf("threads started: %d, want 1", n)
	}
}

// TestDirectMessages: in a DM every message is a turn, without a thread;
// the approver is listed by user id; the click carries a user, no
// member. In a DM the requester is the only one who can click, so their
// Allow counts only with self-approval on; with it off (the default) it
// is refused ephemerally and nothing runs.
func TestDirectMessages(t *testing.T) {
	for _, self := range []bool{false, true} {
		t.Run(fmt.Sprintf("self_approval=%v", self), func(t *testing.T) {
			h := newHarnessWith(t, defaultChannels(), func(c *bot.Config) { c.SelfApproval = self })
			h.model.PushText("Hi there.")
			h.startWith(tc("c1", "restart_service", `{"service":"worker"}`), "Worker restarted.")

			h.fd.Send("MESSAGE_CREATE", dmMessage("7301", dmUser, "hello"))
			h.waitAnswer(dmChannel, "Hi there.")
			h.fd.Send("MESSAGE_CREATE", dmMessage("7302", dmUser, "restart the worker"))
			card := h.card(dmChannel, 1)
			allow, _, _ := buttonIDs(t, card.components)
			h.fd.Send("INTERACTION_CREATE", dmClick("8301", dmUser, allow[0], card.id))
			if !self {
				fu := h.fd.WaitFor("POST", "/webhooks/"+botID+"/token-8301", 1)[0].JSON(t)
				if fu["content"] != bot.UserMessage(bot.ErrSelfApproval) || fu["flags"] != float64(discordgo.MessageFlagsEphemeral) {
					t.Fatalf("follow-up: %v", fu)
				}
				if h.tool.runs.Load() != 0 || len(h.fd.Recorded("PATCH", "/channels/"+dmChannel+"/messages/*")) != 0 {
					t.Fatal("a refused self-approval changed something")
				}
				return
			}
			h.waitAnswer(dmChannel, "Worker restarted.")
			if h.tool.runs.Load() != 1 {
				t.Fatalf("runs: %d", h.tool.runs.Load())
			}
			if n := len(h.fd.Recorded("POST", "/channels/*")) - len(h.fd.Recorded("POST", "/channels/"+dmChannel+"/messages")); n != 0 {
				t.Fatalf("%d posts outside the DM (threads?)", n)
			}
			if ok, _ := h.bot.HasConversation(context.Background(), bot.Thread{Platform: Platform, Channel: dmChannel}); !ok {
				t.Fatal("no DM conversation")
			}
		})
	}
}

// TestUnknownCustomIDs: custom ids Airlock did not issue change nothing.
func TestUnknownCustomIDs(t *testing.T) {
	h := newHarness(t)
	h.start()
	h.fd.Send("INTERACTION_CREATE", click("8401", channelID, moderator, []string{modRole}, "someone-elses-button", "1"))
	cb := h.callback("8401")
	data := cb["data"].(map[string]any)
	if cb["type"] != float64(discordgo.InteractionResponseChannelMessageWithSource) || data["flags"] != float64(discordgo.MessageFlagsEphemeral) || !strings.Contains(data["content"].(string), "not one I know") {
		t.Fatalf("callback: %v", cb)
	}
	h.fd.Send("INTERACTION_CREATE", click("8402", channelID, moderator, []string{modRole}, "al:a:nosuchbatch.0", "1"))
	fu := h.fd.WaitFor("POST", "/webhooks/"+botID+"/token-8402", 1)[0].JSON(t)
	if !strings.Contains(fu["content"].(string), "not one I know") || fu["flags"] != float64(discordgo.MessageFlagsEphemeral) {
		t.Fatalf("follow-up: %v", fu)
	}
	if h.tool.runs.Load() != 0 || len(h.model.Requests()) != 0 {
		t.Fatal("an unknown button did something")
	}
}

// TestModerationToolEndToEnd: a moderator approves timeout_member; the
// REST call names the approver in X-Audit-Log-Reason.
func TestModerationToolEndToEnd(t *testing.T) {
	h := newHarness(t)
	mods, err := ModerationTools([]string{ToolTimeoutMember}, h.a.Session())
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range mods {
		if err := h.set.Add(m); err != nil {
			t.Fatal(err)
		}
	}
	h.startWith(tc("c1", ToolTimeoutMember, `{"user":"`+spammer+`","duration":"10m","reason":"spamming links"}`), "Done: timed out for 10 minutes.")

	thread, card := h.askForCard("7501", "time out the spammer")
	// The read-back is inert: the id shows as written, no mention pill.
	if d := card.embeds[0]["description"].(string); shown(d) != "Time out <@"+spammer+"> for 10 minutes. Reason: spamming links" || strings.Contains(unescapedText(d), "<@") {
		t.Fatalf("read-back: %v", d)
	}
	allow, _, _ := buttonIDs(t, card.components)
	before := time.Now()
	h.fd.Send("INTERACTION_CREATE", click("8501", thread, moderator, []string{modRole}, allow[0], card.id))
	h.waitAnswer(thread, "Done: timed out for 10 minutes.")
	calls := h.fd.Recorded("PATCH", "/guilds/"+guildID+"/members/"+spammer)
	if len(calls) != 1 {
		t.Fatalf("timeout calls: %d", len(calls))
	}
	reason, err := url.PathUnescape(calls[0].Header.Get("X-Audit-Log-Reason"))
	if err != nil || reason != "Approved by "+moderator+" via Airlock: spamming links" {
		t.Fatalf("audit reason %q (%v), raw %q", reason, err, calls[0].Header.Get("X-Audit-Log-Reason"))
	}
	until, err := time.Parse(time.RFC3339, calls[0].JSON(t)["communication_disabled_until"].(string))
	if err != nil || until.Before(before.Add(9*time.Minute)) || until.After(time.Now().Add(11*time.Minute)) {
		t.Fatalf("until %v (%v)", until, err)
	}
}

// TestTwoAdaptersDoNotInterfere: two adapters with different api_urls in
// one process each reach their own base, and discordgo's globals stay.
func TestTwoAdaptersDoNotInterfere(t *testing.T) {
	before := discordgo.EndpointAPI
	f1, f2 := newFakeDiscord(t, false), newFakeDiscord(t, false)
	a1 := nopAdapter(t, f1)
	a2 := nopAdapter(t, f2)
	ctx := context.Background()
	done := make(chan error, 2)
	go func() {
		done <- a1.Post(ctx, bot.Thread{Platform: Platform, Channel: channelID, Thread: "3101"}, "one")
	}()
	go func() {
		done <- a2.Post(ctx, bot.Thread{Platform: Platform, Channel: channelID, Thread: "3102"}, "two")
	}()
	for range 2 {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	if got := f1.AllCalls(); len(got) != 1 || got[0].Path != "/channels/3101/messages" || got[0].JSON(t)["content"] != "one" {
		t.Fatalf("first base got %+v", got)
	}
	if got := f2.AllCalls(); len(got) != 1 || got[0].Path != "/channels/3102/messages" || got[0].JSON(t)["content"] != "two" {
		t.Fatalf("second base got %+v", got)
	}
	if discordgo.EndpointAPI != before || before != DefaultAPIURL {
		t.Fatalf("discordgo's endpoint changed: %q", discordgo.EndpointAPI)
	}
}

// allowedMentions decodes a posted message's allowed_mentions.
type allowedMentions struct {
	Parse       []string `json:"parse"`
	Users       []string `json:"users"`
	Roles       []string `json:"roles"`
	RepliedUser bool     `json:"replied_user"`
}

func postedMentions(t *testing.T, c apiCall) (content string, am allowedMentions) {
	t.Helper()
	var m struct {
		Content         string           `json:"content"`
		AllowedMentions *allowedMentions `json:"allowed_mentions"`
	}
	if err := json.Unmarshal(c.Body, &m); err != nil {
		t.Fatal(err)
	}
	if m.AllowedMentions == nil || m.AllowedMentions.Parse == nil {
		t.Fatalf("a message without allowed_mentions.parse (Discord would ping every mention in it): %s", c.Body)
	}
	return m.Content, *m.AllowedMentions
}

// TestPostSplitsAndPingsOnlyApprovers: long answers are split under 2000
// characters; only the reminder pings, exactly the approvers Mention
// named, and a later answer quoting their mentions pings nobody.
func TestPostSplitsAndPingsOnlyApprovers(t *testing.T) {
	f := newFakeDiscord(t, false)
	a := nopAdapter(t, f)
	ctx := context.Background()
	th := bot.Thread{Platform: Platform, Channel: channelID, Thread: "3101"}
	long := strings.Repeat("a line of text\n", 300)
	if err := a.Post(ctx, th, long); err != nil {
		t.Fatal(err)
	}
	posts := f.Recorded("POST", "/channels/3101/messages")
	if len(posts) < 3 {
		t.Fatalf("posts: %d", len(posts))
	}
	for _, p := range posts {
		if n := runes(p.JSON(t)["content"].(string)); n > 2000 {
			t.Fatalf("a part of %d characters", n)
		}
	}

	who := a.Mention(confirm.Approvers{Users: []string{moderator, "not-an-id"}, Roles: []string{modRole}})
	if strings.Contains(who, "<@") {
		t.Fatalf("Mention returned live mentions %q: anyone could paste them", who)
	}
	summaries := "1. Restart <@" + outsider + "> @everyone <@&" + otherRole + "> ||x|| [x](http://evil) :skull: \u202e"
	if err := a.Post(ctx, th, who+": a request here still needs a decision: "+summaries); err != nil {
		t.Fatal(err)
	}
	posts = f.Recorded("POST", "/channels/3101/messages")
	content, am := postedMentions(t, posts[len(posts)-1])
	if !strings.HasPrefix(content, "<@"+moderator+">") || !strings.HasPrefix(shown(content), "<@"+moderator+">, <@&"+modRole+">: ") {
		t.Fatalf("reminder %q does not start with the approvers' mentions", content)
	}
	if len(am.Parse) != 0 || !slices.Equal(am.Users, []string{moderator}) || !slices.Equal(am.Roles, []string{modRole}) {
		t.Fatalf("reminder allowed mentions: %+v", am)
	}
	rest := strings.NewReplacer("<@"+moderator+">", "", "<@&"+modRole+">", "").Replace(unescapedText(content))
	for _, live := range []string{"<@", "@everyone", "||", "](", ":skull:", "\u202e"} {
		if strings.Contains(rest, live) {
			t.Errorf("the reminder's quoted read-backs hold live %q: %q", live, content)
		}
	}
	if shown(content) != "<@"+moderator+">, <@&"+modRole+">: a request here still needs a decision: "+strings.ReplaceAll(summaries, "\u202e", `\u202e`) {
		t.Errorf("reminder reads %q", shown(content))
	}

	// A model's answer (or a guessed marker) naming the approvers pings nobody.
	for _, text := range []string{
		"Done <@" + moderator + "> <@&" + modRole + "> @everyone @here",
		"\uE000GUESS:u" + moderator + "\uE001 hi",
	} {
		if err := a.Post(ctx, th, text); err != nil {
			t.Fatal(err)
		}
		posts = f.Recorded("POST", "/channels/3101/messages")
		content, am := postedMentions(t, posts[len(posts)-1])
		if len(am.Parse) != 0 || len(am.Users) != 0 || len(am.Roles) != 0 {
			t.Fatalf("answer %q may ping: %+v", content, am)
		}
		if strings.Contains(content, "\uE000") {
			t.Fatalf("a guessed marker reached the channel: %q", content)
		}
	}
}

// TestTransportRewrite: paths, escapes and queries keep; others pass.
func TestTransportRewrite(t *testing.T) {
	f := newFakeDiscord(t, false)
	s, err := NewSession(Config{Token: testToken, APIURL: f.APIURL()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.RequestWithBucketID("GET", discordgo.EndpointAPI+"channels/"+channelID+"?with_x=1", nil, "b"); err != nil {
		t.Fatal(err)
	}
	got := f.Recorded("GET", "/channels/"+channelID)
	if len(got) != 1 || got[0].Query != "with_x=1" || got[0].Header.Get("Authorization") != "Bot "+testToken {
		t.Fatalf("calls: %+v", got)
	}
	for _, bad := range []string{"", "ftp://x/", "not a url", "http://"} {
		if _, err := NewSession(Config{Token: testToken, APIURL: bad}); bad != "" && err == nil {
			t.Errorf("api_url %q accepted", bad)
		}
	}
	if _, err := NewSession(Config{Token: "Bot " + testToken}); err == nil {
		t.Error(`a token with "Bot " accepted`)
	}
}

// nopAdapter is an adapter on the fake f whose bot does nothing.
func nopAdapter(t *testing.T, f *fakeDiscord) *Adapter {
	t.Helper()
	a, err := New(Config{Token: testToken, APIURL: f.APIURL()}, nopBot{})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

type nopBot struct{}

func (nopBot) Admit(context.Context, bot.Turn) bot.Admission { return bot.Admitted }
func (n nopBot) Interact(ctx context.Context, in bot.Interaction) (bot.Reply, error) {
	return bot.Dispatch(ctx, n, in)
}
func (nopBot) ClickedCard(context.Context, bot.Click) (*card.Card, error) {
	return nil, confirm.ErrNotFound
}
func (nopBot) HandleTurn(context.Context, bot.Turn) error                { return nil }
func (nopBot) Note(context.Context, bot.Turn) error                      { return nil }
func (nopBot) HasConversation(context.Context, bot.Thread) (bool, error) { return false, nil }
func (nopBot) Decide(context.Context, bot.Click) error                   { return nil }
func (nopBot) Revoke(context.Context, bot.Click) error                   { return nil }
func (nopBot) MarkChecked(context.Context, bot.Click) error              { return nil }
func (nopBot) EditForm(context.Context, bot.Click) (bot.EditForm, error) {
	return bot.EditForm{}, confirm.ErrNotFound
}
func (nopBot) Edit(context.Context, bot.Click, string) error { return nil }
func (nopBot) Extend(context.Context, bot.Click) error       { return nil }

// TestGuildCreateThreadsAndRoleMention: channels and threads come from
// GUILD_CREATE (no REST lookups); a mention of the bot's managed role
// counts as a mention; a mention in a thread someone else started holds
// the conversation there, keyed by the parent channel.
func TestGuildCreateThreadsAndRoleMention(t *testing.T) {
	h := newHarness(t)
	h.model.PushText("Looking at it.")
	h.start()
	const userThread, botRole = "3600", "5999"
	h.fd.Send("GUILD_CREATE", map[string]any{
		"id": guildID, "name": "ops",
		"channels": []any{map[string]any{"id": channelID, "type": 0, "name": "ops"}},
		"threads":  []any{map[string]any{"id": userThread, "type": 11, "parent_id": channelID, "guild_id": guildID, "name": "incident"}},
		"roles": []any{
			map[string]any{"id": botRole, "name": "Airlock", "managed": true, "permissions": "0"},
			map[string]any{"id": modRole, "name": "Moderators", "permissions": "8"},
		},
	})
	// discordgo runs event handlers concurrently: let the guild's roles
	// land before a message mentions one of them.
	deadline := time.Now().Add(5 * time.Second)
	for {
		h.a.mu.Lock()
		known := h.a.botRoles[guildID] == botRole
		h.a.mu.Unlock()
		if known {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the guild's bot role was never noted")
		}
		time.Sleep(5 * time.Millisecond)
	}
	m := guildMessage("7601", userThread, requester, "<@&"+botRole+"> what broke?", false)
	m["mention_roles"] = []string{botRole}
	h.fd.Send("MESSAGE_CREATE", m)
	h.waitAnswer(userThread, "Looking at it.")
	if got := h.lastRequest().Messages[0].Text; got != "what broke?" {
		t.Fatalf("turn text %q", got)
	}
	if n := len(h.fd.Recorded("GET", "/channels/*")); n != 0 {
		t.Fatalf("%d channel lookups despite GUILD_CREATE", n)
	}
	if n := len(h.fd.Recorded("POST", "/channels/"+channelID+"/messages/*")); n != 0 {
		t.Fatal("started a thread inside a thread")
	}
	if ok, _ := h.bot.HasConversation(context.Background(), bot.Thread{Platform: Platform, Channel: channelID, Thread: userThread}); !ok {
		t.Fatal("the conversation is not keyed (discord, parent, thread)")
	}
}

// TestRunFailsWithoutGateway: an unreachable gateway is Run's error.
func TestRunFailsWithoutGateway(t *testing.T) {
	f := newFakeDiscord(t, false)
	a := nopAdapter(t, f)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := a.Run(ctx)
	var rest *discordgo.RESTError
	if err == nil || !errors.As(err, &rest) || rest.Response.StatusCode != 404 {
		t.Fatalf("Run: %v", err)
	}
	if strings.Contains(err.Error(), "secret-part") {
		t.Fatal("the error shows the token")
	}
	if err := a.Run(ctx); err == nil {
		t.Fatal("a second Run was accepted")
	}
}

// TestRunExplainsDisallowedIntents: a gateway refusing the Message Content
// intent (close 4014) makes Run fail with a hint.
func TestRunExplainsDisallowedIntents(t *testing.T) {
	f := newFakeDiscord(t, true)
	f.Refuse(4014)
	a := nopAdapter(t, f)
	a.Session().ShouldReconnectOnError = false
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := a.Run(ctx)
	if err == nil || !strings.Contains(err.Error(), "Message Content intent") {
		t.Fatalf("Run: %v", err)
	}
}

// TestBotRoleNotedWhateverTheOrder: discordgo runs event handlers
// concurrently, so a GUILD_CREATE can be handled before READY told the
// bot's name; the guild's managed role named after the bot still counts
// as the bot's, in either order.
func TestBotRoleNotedWhateverTheOrder(t *testing.T) {
	f := newFakeDiscord(t, false)
	guild := &discordgo.Guild{ID: guildID, Roles: []*discordgo.Role{
		{ID: "5999", Name: "Airlock", Managed: true},
		{ID: "6000", Name: "Other bot", Managed: true},
		{ID: "6001", Name: "Airlock"}, // not managed: a role anyone could name so
	}}
	ready := &discordgo.Ready{User: &discordgo.User{ID: botID, Username: "Airlock"}}
	for _, guildFirst := range []bool{true, false} {
		a := nopAdapter(t, f)
		if guildFirst {
			a.noteGuild(guild)
			a.onReady(nil, ready)
		} else {
			a.onReady(nil, ready)
			a.noteGuild(guild)
		}
		a.mu.Lock()
		got := a.botRoles[guildID]
		a.mu.Unlock()
		if got != "5999" {
			t.Errorf("guild first %v: the bot's role is %q", guildFirst, got)
		}
	}
}

func (nopBot) RunAction(context.Context, bot.Click, card.ActionKind) error { return nil }
func (nopBot) DecideAll(context.Context, bot.Click) (bot.AllResult, error) {
	return bot.AllResult{}, nil
}

func (nopBot) PhraseFor(context.Context, bot.Click) (bot.PhrasePrompt, bool, error) {
	return bot.PhrasePrompt{}, false, nil
}

func (nopBot) QuestionForm(context.Context, bot.Click) (card.QuestionNotice, error) {
	return card.QuestionNotice{}, nil
}
func (nopBot) AnswerQuestion(context.Context, bot.Click, []string) error { return nil }
func (nopBot) DeclineQuestion(context.Context, bot.Click) error          { return nil }
