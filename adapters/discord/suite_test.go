package discord_test

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/airlockhq/airlock/adapters/discord"
	"github.com/airlockhq/airlock/adapters/discord/discordtest"
	"github.com/airlockhq/airlock/adapters/internal/surfacetest"
	"github.com/airlockhq/airlock/bot"
	"github.com/airlockhq/airlock/confirm"
	"github.com/airlockhq/airlock/internal/testkit"
	"github.com/airlockhq/airlock/storage"
)

// The behaviour suite over Discord: the real adapter and discordgo client
// against discordtest's fake gateway and REST API on 127.0.0.1. People
// act as Discord delivers them: mentions as MESSAGE_CREATE, clicks and
// modal submissions as INTERACTION_CREATE built from the messages and
// modals the fake was given to show.
func TestSurface(t *testing.T) { surfacetest.Run(t, discordDriver{}) }

var suiteUsers = map[surfacetest.Person]string{
	surfacetest.Requester: discordtest.Requester,
	surfacetest.Approver:  discordtest.Moderator,
	surfacetest.Approver2: discordtest.DMUser,
	surfacetest.Stranger:  discordtest.Outsider,
}

type discordDriver struct{}

func (discordDriver) Places() surfacetest.Places {
	return surfacetest.Places{Platform: discord.Platform, Channel: discordtest.ChannelID, Users: suiteUsers, Surface: confirm.SurfaceThread}
}

func (discordDriver) Lacks() map[surfacetest.Capability]string { return nil }

func (discordDriver) Start(t *testing.T, b *bot.Bot, db *storage.DB) surfacetest.Surface {
	fd := discordtest.New(t, true)
	a, err := discord.New(discord.Config{Token: discordtest.Token, APIURL: fd.APIURL(), Events: db}, b)
	if err != nil {
		t.Fatal(err)
	}
	b.Register(discord.Platform, a)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Run: %v", err)
			}
		case <-time.After(20 * time.Second):
			t.Error("Run did not return after its context ended")
		}
	})
	select {
	case <-fd.Identify():
	case err := <-done:
		t.Fatalf("Run: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("no IDENTIFY")
	}
	testkit.Eventually(t, 10*time.Second, "READY", func() bool { return fd.Readies() > 0 })
	return &discordSurface{t: t, fd: fd, clicker: map[string]string{}}
}

type discordSurface struct {
	t   *testing.T
	fd  *discordtest.Server
	seq atomic.Int64

	mu      sync.Mutex
	clicker map[string]string // interaction id -> its user
	sent    []string          // interaction ids, in order
	asked   string            // the last mention's message id: the conversation is the thread started on it
}

func (s *discordSurface) next() int64 { return s.seq.Add(1) }

// mention is the requester mentioning the bot in the channel.
func (s *discordSurface) mention(text string) {
	id := fmt.Sprint(7000 + s.next())
	s.mu.Lock()
	s.asked = id
	s.mu.Unlock()
	s.fd.Send("MESSAGE_CREATE", discordtest.GuildMessage(id, discordtest.ChannelID, suiteUsers[surfacetest.Requester], "<@"+discordtest.BotID+"> "+text, true))
}

func (s *discordSurface) Ask(text string)         { s.mention(text) }
func (s *discordSurface) StartRun(command string) { s.mention("run " + command) }
func (s *discordSurface) Name(p surfacetest.Person) string {
	return "<@" + suiteUsers[p] + ">"
}

// Settle waits until Discord has an answer to every interaction sent.
func (s *discordSurface) Settle() {
	s.t.Helper()
	s.mu.Lock()
	sent := append([]string(nil), s.sent...)
	s.mu.Unlock()
	for _, id := range sent {
		s.callback(id)
	}
}

// callback waits for the interaction's response and returns it.
func (s *discordSurface) callback(id string) map[string]any {
	s.t.Helper()
	return s.fd.WaitFor("POST", "/interactions/"+id+"/token-"+id+"/callback", 1)[0].JSON(s.t)
}

// message is one message the bot posted: its body as posted, then as
// each edit Discord took left it.
type message struct {
	channel, id string
	versions    []map[string]any
}

func (m message) last() map[string]any { return m.versions[len(m.versions)-1] }

var (
	postPath = regexp.MustCompile(`^/channels/(\d+)/messages$`)
	editPath = regexp.MustCompile(`^/channels/(\d+)/messages/(\d+)$`)
)

func ok(c discordtest.Call) bool { return c.Status >= 200 && c.Status < 300 }

// messages are the bot's messages in the conversation (the thread the
// bot started on the last mention), in the order posted.
func (s *discordSurface) messages() []message {
	s.mu.Lock()
	threads := "/channels/" + discordtest.ChannelID + "/messages/" + s.asked + "/threads"
	s.mu.Unlock()
	var out []message
	at := map[string]int{}
	thread := ""
	for _, c := range s.fd.AllCalls() {
		if !ok(c) {
			continue
		}
		if c.Method == "POST" && c.Path == threads {
			thread = c.ID()
		}
		var body map[string]any
		if json.Unmarshal(c.Body, &body) != nil {
			continue
		}
		if m := postPath.FindStringSubmatch(c.Path); m != nil && c.Method == "POST" && m[1] == thread {
			at[c.ID()] = len(out)
			out = append(out, message{channel: m[1], id: c.ID(), versions: []map[string]any{body}})
		} else if m := editPath.FindStringSubmatch(c.Path); m != nil && c.Method == "PATCH" {
			if i, ok := at[m[2]]; ok {
				v := map[string]any{}
				for k, x := range out[i].last() {
					v[k] = x
				}
				for k, x := range body {
					v[k] = x
				}
				out[i].versions = append(out[i].versions, v)
			}
		}
	}
	return out
}

func (s *discordSurface) Updates() int {
	n := 0
	for _, m := range s.messages() {
		n += len(m.versions) - 1
	}
	return n
}

func isCard(m message) bool {
	e, _ := m.versions[0]["embeds"].([]any)
	return len(e) > 0
}

func isRun(m message) bool {
	c, _ := m.versions[0]["content"].(string)
	return strings.HasPrefix(c, "```\nRunbook ")
}

func (s *discordSurface) cards() []message {
	var out []message
	for _, m := range s.messages() {
		if isCard(m) {
			out = append(out, m)
		}
	}
	return out
}

func (s *discordSurface) Cards() []string {
	var out []string
	for _, m := range s.cards() {
		out = append(out, shownText(m.last()))
	}
	return out
}

func (s *discordSurface) Buttons(card int) []string {
	var out []string
	if cards := s.cards(); card <= len(cards) {
		rows, _ := cards[card-1].last()["components"].([]any)
		for _, r := range rows {
			row, _ := r.(map[string]any)
			buttons, _ := row["components"].([]any)
			for _, x := range buttons {
				btn, _ := x.(map[string]any)
				label, _ := btn["label"].(string)
				out = append(out, label)
			}
		}
	}
	return out
}

func (s *discordSurface) Runs() []string {
	var out []string
	for _, m := range s.messages() {
		if isRun(m) {
			out = append(out, shownText(m.last()))
		}
	}
	return out
}

func (s *discordSurface) Posts() []string {
	var out []string
	for _, m := range s.messages() {
		if !isCard(m) && !isRun(m) {
			out = append(out, shownText(m.last()))
		}
	}
	return out
}

// Notices are the ephemeral answers to who's interactions: responses
// and follow-ups only the clicker sees.
func (s *discordSurface) Notices(who surfacetest.Person) []string {
	s.mu.Lock()
	mine := map[string]bool{}
	for id, u := range s.clicker {
		if u == suiteUsers[who] {
			mine[id] = true
		}
	}
	s.mu.Unlock()
	var out []string
	for _, c := range s.fd.AllCalls() {
		if c.Method != "POST" || !ok(c) {
			continue
		}
		var id string
		var data map[string]any
		var body map[string]any
		if json.Unmarshal(c.Body, &body) != nil {
			continue
		}
		if p, found := strings.CutPrefix(c.Path, "/interactions/"); found && strings.HasSuffix(p, "/callback") {
			id, _, _ = strings.Cut(p, "/")
			data, _ = body["data"].(map[string]any)
		} else if strings.HasPrefix(c.Path, "/webhooks/") {
			tok := c.Path[strings.LastIndex(c.Path, "/")+1:]
			id = strings.TrimPrefix(tok, "token-")
			data = body
		}
		if !mine[id] || data == nil {
			continue
		}
		if flags, _ := data["flags"].(float64); int(flags)&64 == 0 {
			continue
		}
		if text, _ := data["content"].(string); text != "" {
			out = append(out, unescape(text))
		}
	}
	return out
}

// A button's label names its call on a card of several: "Allow [2]".
var labels = map[surfacetest.Button]*regexp.Regexp{
	surfacetest.Allow:      regexp.MustCompile(`^Allow(?: \[(\d+)\])?$`),
	surfacetest.AllowTyped: regexp.MustCompile(`^Allow(?: \[(\d+)\])?…$`),
	surfacetest.Deny:       regexp.MustCompile(`^Deny(?: \[(\d+)\])?$`),
	surfacetest.DenyReason: regexp.MustCompile(`^Deny(?: \[(\d+)\])? with reason…$`),
	surfacetest.Edit:       regexp.MustCompile(`^Edit(?: \[(\d+)\])?…$`),
	surfacetest.AllowAll:   regexp.MustCompile(`^Allow all$()`),
}

// customIDOf finds the button b of call (0: the card's own) in a version
// of a message.
func customIDOf(v map[string]any, call int, b surfacetest.Button) (string, bool) {
	rows, _ := v["components"].([]any)
	for _, r := range rows {
		row, _ := r.(map[string]any)
		buttons, _ := row["components"].([]any)
		for _, x := range buttons {
			btn, _ := x.(map[string]any)
			label, _ := btn["label"].(string)
			m := labels[b].FindStringSubmatch(label)
			if m == nil || (m[1] != "" && m[1] != fmt.Sprint(call)) {
				continue
			}
			id, _ := btn["custom_id"].(string)
			return id, true
		}
	}
	return "", false
}

func (s *discordSurface) interact(user string, payload func(id string) map[string]any) map[string]any {
	s.t.Helper()
	id := fmt.Sprint(8000 + s.next())
	s.mu.Lock()
	s.clicker[id] = user
	s.sent = append(s.sent, id)
	s.mu.Unlock()
	s.fd.Send("INTERACTION_CREATE", payload(id))
	return s.callback(id)
}

func (s *discordSurface) Press(who surfacetest.Person, card, call int, b surfacetest.Button, input string) {
	s.t.Helper()
	cards := s.cards()
	if card > len(cards) {
		s.t.Fatalf("no card %d", card)
	}
	m := cards[card-1]
	// As the card last showed the button (a stale click is one on a
	// version the person still had on their screen).
	var custom string
	found := false
	for i := len(m.versions) - 1; i >= 0 && !found; i-- {
		custom, found = customIDOf(m.versions[i], call, b)
	}
	if !found {
		s.t.Fatalf("card %d never showed %s for call %d:\n%s", card, b, call, shownText(m.last()))
	}
	user, roles := suiteUsers[who], []string{}
	cb := s.interact(user, func(id string) map[string]any {
		return discordtest.Click(id, m.channel, user, roles, custom, m.id)
	})
	if cb["type"] != float64(9) { // no modal opened
		return
	}
	// The modal's one text input, filled with input.
	data, _ := cb["data"].(map[string]any)
	modal, _ := data["custom_id"].(string)
	rows, _ := data["components"].([]any)
	if len(rows) != 1 {
		s.t.Fatalf("a modal of %d rows: %v", len(rows), data)
	}
	in := rows[0].(map[string]any)["components"].([]any)[0].(map[string]any)["custom_id"].(string)
	s.interact(user, func(id string) map[string]any {
		return discordtest.ModalSubmit(id, m.channel, user, roles, modal, in, input, m.id)
	})
}

// shownText is what a person reads in a message: its content, then each
// embed's title, description, fields and footer, markdown's escapes
// undone (outside code blocks, where Discord shows text as it is).
func shownText(v map[string]any) string {
	var lines []string
	add := func(x any) {
		if s, _ := x.(string); s != "" {
			lines = append(lines, unescape(s))
		}
	}
	add(v["content"])
	embeds, _ := v["embeds"].([]any)
	for _, e := range embeds {
		em, _ := e.(map[string]any)
		add(em["title"])
		add(em["description"])
		fields, _ := em["fields"].([]any)
		for _, f := range fields {
			fm, _ := f.(map[string]any)
			add(fm["name"])
			add(fm["value"])
		}
		if ft, _ := em["footer"].(map[string]any); ft != nil {
			add(ft["text"])
		}
	}
	return strings.Join(lines, "\n")
}

var (
	escaped = regexp.MustCompile(`\\([[:punct:]])`)
	bold    = regexp.MustCompile(`(^|[^\\])\*\*`)
)

// unescape undoes markdown's bold markers and backslash escapes outside
// code blocks (a person reads bold words, not asterisks) and takes the
// fences out.
func unescape(s string) string {
	parts := strings.Split(s, "```")
	for i := range parts {
		if i%2 == 0 {
			parts[i] = escaped.ReplaceAllString(bold.ReplaceAllString(parts[i], "$1"), "$1")
		} else {
			parts[i] = strings.TrimPrefix(strings.TrimPrefix(parts[i], "json"), "text")
		}
	}
	return strings.Join(parts, "")
}
