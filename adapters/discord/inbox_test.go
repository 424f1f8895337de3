package discord

import (
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/bwmarrin/discordgo"

	"github.com/airlockhq/airlock/adapters/internal/sealed"
	"github.com/airlockhq/airlock/bot"
	"github.com/airlockhq/airlock/confirm"
	"github.com/airlockhq/airlock/internal/testkit"
)

// leftBehind records a delivery as a process that then died did (its
// claim lapsed at once), encoded as the adapter encodes it: the gateway's
// payload decoded by discordgo and encoded again.
func (h *harness) leftBehind(kind, key string, gateway map[string]any) {
	h.t.Helper()
	raw, _ := json.Marshal(gateway)
	var v any = &discordgo.Message{}
	if kind == deliveryInteraction {
		v = &discordgo.Interaction{}
	}
	if err := json.Unmarshal(raw, v); err != nil {
		h.t.Fatal(err)
	}
	if i, ok := v.(*discordgo.Interaction); ok {
		v = storedOf(i)
	}
	payload, err := json.Marshal(v)
	if err != nil {
		h.t.Fatal(err)
	}
	h.recordRaw(h.a.seal.Seal(confirm.InboxItem{Platform: Platform, Key: key, Kind: kind, Payload: payload}))
}

// recordRaw writes an inbox record as it is, claimed by a dead process.
func (h *harness) recordRaw(it confirm.InboxItem) {
	h.t.Helper()
	if _, err := h.db.RecordInbox(context.Background(), it, "dead", time.Nanosecond); err != nil {
		h.t.Fatal(err)
	}
}

// Someone with write access to the database only inserts into the inbox
// a requester's mention, unsealed, and one sealed with another token:
// the inbox job works neither. No thread is started, the model is never
// asked, and the log names both records.
func TestDiscordForgedInboxRecordsRefused(t *testing.T) {
	logs := &testkit.Buffer{}
	h := newHarnessWith(t, defaultChannels(), func(c *bot.Config) { c.Logger = slog.New(slog.NewTextHandler(logs, nil)) })
	h.model.PushCalls(tc("c1", "restart_service", `{"service":"api"}`))
	h.start()
	payload := func(id string) []byte {
		raw, _ := json.Marshal(guildMessage(id, channelID, requester, mentionText("restart api"), true))
		var m discordgo.Message
		if err := json.Unmarshal(raw, &m); err != nil {
			t.Fatal(err)
		}
		out, _ := json.Marshal(&m)
		return out
	}
	h.recordRaw(confirm.InboxItem{Platform: Platform, Key: "message:7401", Kind: deliveryMessage, Payload: payload("7401")})
	h.recordRaw(sealed.New(Platform, "another-token").Seal(confirm.InboxItem{Platform: Platform, Key: "message:7402", Kind: deliveryMessage, Payload: payload("7402")}))
	h.runInbox()
	h.a.wg.Wait()
	if n := len(h.model.Requests()); n != 0 {
		t.Fatalf("a forged mention asked the model %d times", n)
	}
	for _, id := range []string{"7401", "7402"} {
		if n := len(h.fd.Recorded("POST", "/channels/"+channelID+"/messages/"+id+"/threads")); n != 0 {
			t.Fatalf("a thread was started for forged mention %s", id)
		}
	}
	for _, key := range []string{"message:7401", "message:7402"} {
		if !strings.Contains(logs.String(), key) || !strings.Contains(logs.String(), "seal does not verify") {
			t.Errorf("the log does not name the refused record %s:\n%s", key, logs.String())
		}
	}
}

// runInbox runs the bot's inbox job once.
func (h *harness) runInbox() {
	h.t.Helper()
	for _, j := range h.bot.Jobs(time.Second) {
		if j.Name == bot.JobInbox {
			if err := j.Run(context.Background()); err != nil {
				h.t.Fatal(err)
			}
			return
		}
	}
	h.t.Fatal("no inbox job")
}

// What a process killed after it received a mention, or acknowledged a
// click or a submitted form, left in the inbox is worked by the next
// one's inbox job, through the same path: the mention gets its thread and
// card, the reason modal's deny decides the first call and an Allow the
// second; that Allow worked again changes nothing and tells the clicker
// nothing.
func TestDiscordReplayedDeliveries(t *testing.T) {
	h := newHarness(t)
	h.model.PushCalls(tc("c1", "restart_service", `{"service":"api"}`), tc("c2", "restart_service", `{"service":"web"}`))
	h.model.PushText("Restarted web, not api.")
	h.start()

	h.leftBehind(deliveryMessage, "message:7301", guildMessage("7301", channelID, requester, mentionText("restart api and web"), true))
	h.runInbox()
	thread := h.threadFor("7301")
	card := h.card(thread, 1)
	allow, _, reason := buttonIDs(t, card.components)

	modalID := "al:m:" + strings.TrimPrefix(reason[0], "al:r:")
	h.leftBehind(deliveryInteraction, "interaction:8301", modalSubmit("8301", thread, moderator, []string{modRole}, modalID, "not api", card.id))
	h.runInbox()
	h.fd.WaitFor("POST", "/interactions/8301/token-8301/callback", 1)
	h.leftBehind(deliveryInteraction, "interaction:8302", click("8302", thread, moderator, []string{modRole}, allow[1], card.id))
	h.runInbox()
	h.waitAnswer(thread, "Restarted web, not api.")
	if n := h.tool.runs.Load(); n != 1 {
		t.Fatalf("the tool ran %d times; want once (web)", n)
	}
	res := toolResults(t, h.lastRequest())
	if len(res) != 2 || !res[0].IsError || !strings.Contains(res[0].Content, "not api") {
		t.Fatalf("results to the model: %+v", res)
	}
	// The Allow, counted, worked again: nothing, and no follow-up.
	h.leftBehind(deliveryInteraction, "interaction:8303", click("8303", thread, moderator, []string{modRole}, allow[1], card.id))
	h.runInbox()
	h.fd.WaitFor("POST", "/interactions/8303/token-8303/callback", 1)
	h.a.wg.Wait()
	if fus := h.fd.Recorded("POST", "/webhooks/"+botID+"/token-8303"); len(fus) != 0 {
		t.Fatalf("a counted click worked again got a follow-up: %s", fus[0].Body)
	}
	if n := h.tool.runs.Load(); n != 1 || len(h.model.Requests()) != 2 {
		t.Fatalf("after the replays: %d runs, %d model requests", n, len(h.model.Requests()))
	}
	if n := len(h.fd.Recorded("POST", "/channels/"+channelID+"/messages/7301/threads")); n != 1 {
		t.Fatalf("%d threads started for one mention", n)
	}
	// Every delivery was marked done: none is claimed, even with every
	// claim cleared.
	if err := h.db.ClearLeases(context.Background()); err != nil {
		t.Fatal(err)
	}
	if left, err := h.db.ClaimInbox(context.Background(), "another", []string{Platform}, time.Minute, 10); err != nil || len(left) != 0 {
		t.Fatalf("left in the inbox: %+v %v", left, err)
	}
}

// A click that could not be recorded (the database away) is not
// acknowledged as taken: its clicker is answered, privately, that
// nothing changed and to click again.
func TestDiscordClickNotRecorded(t *testing.T) {
	h := newHarness(t)
	h.startWith(tc("c1", "restart_service", `{"service":"api"}`), "Restarted api.")
	thread, card := h.askForCard("7401", "restart api")
	allow, _, _ := buttonIDs(t, card.components)
	h.db.Close() // the database away
	h.fd.Send("INTERACTION_CREATE", click("8401", thread, moderator, []string{modRole}, allow[0], card.id))
	cb := h.callback("8401")
	data, _ := cb["data"].(map[string]any)
	if cb["type"] != float64(discordgo.InteractionResponseChannelMessageWithSource) || data["flags"] != float64(discordgo.MessageFlagsEphemeral) ||
		!strings.Contains(data["content"].(string), "couldn't record") {
		t.Fatalf("a click not recorded was answered %v; want a private word that it was not recorded", cb)
	}
	if n := h.tool.runs.Load(); n != 0 {
		t.Fatalf("the tool ran %d times", n)
	}
}
