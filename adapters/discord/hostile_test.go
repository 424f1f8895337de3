package discord

import (
	"context"
	"encoding/json"
	"io"
	"mime"
	"mime/multipart"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bwmarrin/discordgo"

	"github.com/airlockhq/airlock/adapters/internal/visible"
	"github.com/airlockhq/airlock/bot"
	"github.com/airlockhq/airlock/confirm"
	"github.com/airlockhq/airlock/model"
)

// Tests written as an attacker who controls the model's words and a
// tool's arguments and output, or who writes in a channel.

// cardTexts are the texts of a posted card message.
func cardTexts(c postedCard) []string {
	texts := []string{c.content}
	for _, e := range c.embeds {
		for _, k := range []string{"title", "description"} {
			if s, ok := e[k].(string); ok {
				texts = append(texts, s)
			}
		}
		fields, _ := e["fields"].([]any)
		for _, f := range fields {
			m, _ := f.(map[string]any)
			s, _ := m["value"].(string)
			texts = append(texts, s)
		}
	}
	return texts
}

// TestHostileModelCannotPingOrHide: the model's intro and arguments try
// to ping, spoil, link, spoof with a bidi override and break the code
// block; the card shows them inert and pings nobody, and the model's
// answer naming the approver pings nobody either.
func TestHostileModelCannotPingOrHide(t *testing.T) {
	h := newHarness(t)
	evil := "<@" + moderator + "> @everyone @here ||secret|| [docs](http://evil.example) :skull: ``` \u202egnp.exe\u200b"
	args, _ := json.Marshal(map[string]string{"service": evil})
	h.model.Push(model.Message{Text: "@everyone <@&" + modRole + "> approve this [now](http://evil.example) ||x||", ToolCalls: []confirm.ToolCall{tc("c1", "restart_service", string(args))}})
	h.model.PushText("Done <@" + moderator + "> <@&" + modRole + "> @everyone \u202eexe.txt")
	h.start()

	thread, card := h.askForCard("7701", "restart it")
	for _, s := range cardTexts(card) {
		if bad := liveMarkup(s); len(bad) != 0 {
			t.Errorf("live on the card: %v in %q", bad, s)
		}
	}
	desc := card.embeds[0]["description"].(string)
	if want := "Restart " + strings.NewReplacer("\u202e", `\u202e`, "\u200b", `\u200b`).Replace(evil) + " in production"; shown(desc) != want {
		t.Errorf("read-back reads %q, want %q", shown(desc), want)
	}
	if a := field(card.embeds[0], "Arguments"); !strings.Contains(a, `\u0060\u0060\u0060 \u202egnp.exe\u200b`) {
		t.Errorf("arguments do not show the backticks and hidden characters escaped: %q", a)
	}
	for _, p := range h.fd.Recorded("POST", "/channels/"+thread+"/messages") {
		if _, am := postedMentions(t, p); len(am.Parse) != 0 || len(am.Users) != 0 || len(am.Roles) != 0 {
			t.Fatalf("a card message may ping: %+v", am)
		}
	}
	allow, _, _ := buttonIDs(t, card.components)
	h.fd.Send("INTERACTION_CREATE", click("8701", thread, moderator, []string{modRole}, allow[0], card.id))
	h.waitAnswer(thread, "Done <@"+moderator+"> <@&"+modRole+"> @everyone \\u202eexe.txt") // the bidi control shown, not obeyed
	for _, p := range h.fd.Recorded("POST", "/channels/"+thread+"/messages") {
		if content, am := postedMentions(t, p); len(am.Parse) != 0 || len(am.Users) != 0 || len(am.Roles) != 0 {
			t.Fatalf("%q may ping: %+v", content, am)
		}
	}
	for _, e := range h.fd.Recorded("PATCH", "/channels/"+thread+"/messages/*") {
		if _, am := postedMentions(t, e); len(am.Parse) != 0 {
			t.Fatalf("a card update may ping: %+v", am)
		}
	}
}

// interactionReply decodes an interaction callback, JSON or multipart
// (with its attached files).
func interactionReply(t *testing.T, c apiCall) (map[string]any, map[string]string) {
	t.Helper()
	mt, params, err := mime.ParseMediaType(c.Header.Get("Content-Type"))
	if err != nil {
		t.Fatal(err)
	}
	if mt != "multipart/form-data" {
		return c.JSON(t), nil
	}
	var payload map[string]any
	files := map[string]string{}
	r := multipart.NewReader(strings.NewReader(string(c.Body)), params["boundary"])
	for {
		p, err := r.NextPart()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(p)
		if p.FormName() == "payload_json" {
			if err := json.Unmarshal(b, &payload); err != nil {
				t.Fatal(err)
			}
		} else {
			files[p.FileName()] = string(b)
		}
	}
	return payload, files
}

// TestShowFullArguments: cut arguments get "Show full arguments"; anyone
// in the channel who clicks it gets the whole arguments, ephemerally, in
// the message or as arguments.json; nothing is decided, nothing pings.
func TestShowFullArguments(t *testing.T) {
	h := newHarness(t)
	medium := `{"note":"` + strings.Repeat("m", 1500) + ` <@` + moderator + `> @everyone \u202e","service":"api"}`
	huge := `{"note":"` + strings.Repeat("h", 6000) + ` ` + "```" + ` end","service":"db"}`
	h.model.PushCalls(tc("c1", "restart_service", medium), tc("c2", "restart_service", huge))
	h.start()

	thread, card := h.askForCard("7801", "restart both")
	_, _, _, show := buttonIDsAll(t, card.components)
	if len(show) != 2 {
		t.Fatalf("show-arguments buttons: %v", show)
	}
	for i, e := range card.embeds {
		if a := field(e, "Arguments"); !strings.Contains(a, "more characters hidden") {
			t.Fatalf("call %d: cut arguments not marked: %q", i+1, a)
		}
	}

	// Not an approver: may still look.
	h.fd.Send("INTERACTION_CREATE", click("8801", thread, outsider, nil, show[0], card.id))
	cb := h.fd.WaitFor("POST", "/interactions/8801/token-8801/callback", 1)[0]
	reply, files := interactionReply(t, cb)
	data := reply["data"].(map[string]any)
	if reply["type"] != float64(discordgo.InteractionResponseChannelMessageWithSource) || data["flags"] != float64(discordgo.MessageFlagsEphemeral) || len(files) != 0 {
		t.Fatalf("reply: type %v flags %v, %d files", reply["type"], data["flags"], len(files))
	}
	if am := data["allowed_mentions"].(map[string]any); len(am["parse"].([]any)) != 0 {
		t.Fatalf("the reply may ping: %v", am)
	}
	content := data["content"].(string)
	if !strings.Contains(content, strings.Repeat("m", 1500)+` <@`+moderator+`> @everyone \u202e`) || !strings.Contains(content, "```json\n") {
		t.Fatalf("the reply does not hold the whole arguments: %q", content)
	}
	if bad := liveMarkup(content); len(bad) != 0 {
		t.Fatalf("the reply is live: %v", bad)
	}

	// Too long for a message: attached as arguments.json, exact.
	h.fd.Send("INTERACTION_CREATE", click("8802", thread, outsider, nil, show[1], card.id))
	cb = h.fd.WaitFor("POST", "/interactions/8802/token-8802/callback", 1)[0]
	reply, files = interactionReply(t, cb)
	data = reply["data"].(map[string]any)
	if data["flags"] != float64(discordgo.MessageFlagsEphemeral) || !strings.Contains(data["content"].(string), ArgsFileName) {
		t.Fatalf("reply: %v", data)
	}
	var got any
	if err := json.Unmarshal([]byte(files[ArgsFileName]), &got); err != nil {
		t.Fatalf("attached %q: %v", files, err)
	}
	if g, _ := json.Marshal(got); string(g) != mustCompact(t, huge) || visible.Contains(files[ArgsFileName]) {
		t.Fatalf("attached arguments differ from the call's")
	}

	// A reference that is not a call of this thread's waiting card.
	h.fd.Send("INTERACTION_CREATE", click("8803", thread, outsider, nil, "al:s:nosuchbatch.0", card.id))
	cb = h.fd.WaitFor("POST", "/interactions/8803/token-8803/callback", 1)[0]
	if reply, _ = interactionReply(t, cb); reply["data"].(map[string]any)["content"] != argsGone {
		t.Fatalf("unknown reference: %v", reply)
	}
	time.Sleep(50 * time.Millisecond)
	if h.tool.runs.Load() != 0 || len(h.fd.Recorded("PATCH", "/channels/"+thread+"/messages/*")) != 0 || len(h.model.Requests()) != 1 {
		t.Fatal("looking at the arguments decided something")
	}
}

func mustCompact(t *testing.T, s string) string {
	t.Helper()
	var v any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// TestReminderPingsExactlyTheApprovers: the reminder before expiry pings
// the approvers' role and nobody else, its quoted read-back is inert, and
// no later message pings anyone.
func TestReminderPingsExactlyTheApprovers(t *testing.T) {
	var now atomic.Int64
	now.Store(time.Now().UnixNano())
	h := newHarnessWith(t, defaultChannels(), func(c *bot.Config) {
		c.Now = func() time.Time { return time.Unix(0, now.Load()) }
		c.RemindBefore = 5 * time.Minute
	})
	h.startWith(tc("c1", "restart_service", `{"service":"<@`+outsider+`> @everyone ||x||"}`), "Restarted, thanks <@&"+modRole+"> <@"+moderator+">.")

	thread, card := h.askForCard("7901", "restart")
	now.Add(int64(6 * time.Minute))
	if err := h.bot.Sweep(context.Background()); err != nil {
		t.Fatal(err)
	}
	var reminder apiCall
	deadline := time.Now().Add(10 * time.Second)
	for reminder.Body == nil {
		for _, p := range h.fd.Recorded("POST", "/channels/"+thread+"/messages") {
			if strings.Contains(string(p.Body), "still needs a decision") {
				reminder = p
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("no reminder")
		}
		time.Sleep(5 * time.Millisecond)
	}
	content, am := postedMentions(t, reminder)
	if len(am.Parse) != 0 || len(am.Users) != 0 || len(am.Roles) != 1 || am.Roles[0] != modRole || am.RepliedUser {
		t.Fatalf("reminder allowed mentions %+v, want exactly the role %s", am, modRole)
	}
	if !strings.HasPrefix(content, "<@&"+modRole+">") {
		t.Fatalf("reminder %q does not mention the approvers", content)
	}
	if bad := liveMarkup(strings.Replace(content, "<@&"+modRole+">", "", 1)); len(bad) != 0 {
		t.Fatalf("reminder live beyond the approvers: %v in %q", bad, content)
	}

	allow, _, _ := buttonIDs(t, card.components)
	h.fd.Send("INTERACTION_CREATE", click("8901", thread, moderator, []string{modRole}, allow[0], card.id))
	h.waitAnswer(thread, "Restarted, thanks <@&"+modRole+"> <@"+moderator+">.")
	posts := h.fd.Recorded("POST", "/channels/"+thread+"/messages")
	if content, am := postedMentions(t, posts[len(posts)-1]); len(am.Users)+len(am.Roles)+len(am.Parse) != 0 {
		t.Fatalf("the answer %q naming the approvers may ping: %+v", content, am)
	}
}

// TestMentionWhereNotServed: a mention in a channel nobody configured is
// answered with a reply in the channel (no thread, no ping, no model); a
// mention by someone who may not ask gets nothing at all.
func TestMentionWhereNotServed(t *testing.T) {
	h := newHarnessWith(t, []bot.Channel{
		{Platform: Platform, ID: channelID, ApproverRoles: []string{modRole}, Requesters: []string{requester}},
	}, nil)
	h.model.PushText("Hi.")
	h.start()

	h.fd.Send("MESSAGE_CREATE", guildMessage("7951", otherCh, outsider, mentionText("@everyone hello"), true))
	reply := h.fd.WaitFor("POST", "/channels/"+otherCh+"/messages", 1)[0]
	content, am := postedMentions(t, reply)
	var ref struct {
		MessageReference struct {
			MessageID string `json:"message_id"`
		} `json:"message_reference"`
	}
	json.Unmarshal(reply.Body, &ref)
	if content != bot.NotServedMessage || ref.MessageReference.MessageID != "7951" || len(am.Parse)+len(am.Users)+len(am.Roles) != 0 || am.RepliedUser {
		t.Fatalf("not-served answer %q, reference %q, mentions %+v", content, ref.MessageReference.MessageID, am)
	}

	// Someone who may not ask here, then someone who may: only the second
	// gets a thread (messages of a channel are handled in order).
	h.fd.Send("MESSAGE_CREATE", guildMessage("7952", channelID, outsider, mentionText("restart everything"), true))
	h.fd.Send("MESSAGE_CREATE", guildMessage("7953", channelID, requester, mentionText("hi"), true))
	thread := h.threadFor("7953")
	h.waitAnswer(thread, "Hi.")
	if n := len(h.fd.Recorded("POST", "/channels/"+channelID+"/messages/7952/threads")); n != 0 {
		t.Fatal("a thread was started for someone who may not ask")
	}
	if n := len(h.fd.Recorded("POST", "/channels/"+channelID+"/messages")); n != 0 {
		t.Fatalf("%d answers in the channel to someone who may not ask", n)
	}
	if n := len(h.fd.Recorded("POST", "/channels/"+otherCh+"/messages/*")); n != 0 {
		t.Fatal("a thread was started in a channel not served")
	}
	if n := len(h.model.Requests()); n != 1 {
		t.Fatalf("model requests: %d, want 1", n)
	}
}

// TestTurnsCarryDMAndRoles: a guild message's turn carries the author's
// roles and is no DM; a direct message's turn is a DM.
func TestTurnsCarryDMAndRoles(t *testing.T) {
	h := newHarness(t)
	h.model.PushText("Guild answer.").PushText("DM answer.")
	h.start()
	m := guildMessage("7961", channelID, requester, mentionText("hi"), true)
	m["member"] = map[string]any{"roles": []string{otherRole, modRole}}
	h.fd.Send("MESSAGE_CREATE", m)
	h.waitAnswer(h.threadFor("7961"), "Guild answer.")
	h.fd.Send("MESSAGE_CREATE", dmMessage("7962", dmUser, "hello"))
	h.waitAnswer(dmChannel, "DM answer.")
	var guild, dm bool
	for _, tt := range h.spy.seen() {
		switch tt.Channel {
		case channelID:
			guild = true
			if tt.DM || strings.Join(tt.Roles, ",") != otherRole+","+modRole {
				t.Errorf("guild turn %+v", tt)
			}
		case dmChannel:
			dm = true
			if !tt.DM || tt.Thread != "" {
				t.Errorf("DM turn %+v", tt)
			}
		}
	}
	if !guild || !dm {
		t.Fatalf("turns seen: %+v", h.spy.seen())
	}
}
