package discord

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/airlockhq/airlock/adapters/internal/adaptertest"
	"github.com/airlockhq/airlock/bot"
	"github.com/airlockhq/airlock/card"
	"github.com/airlockhq/airlock/confirm"
)

// unknownCard: a decided card whose gated call's run ended unknown,
// checked or not.
func unknownCard(checked bool) card.Card {
	c := sampleCard()
	c.Calls = c.Calls[:2]
	c.Status = confirm.BatchDone
	at := c.CreatedAt.Add(time.Minute)
	c.Calls[0].Run = confirm.RunSucceeded
	c.Calls[1].State = card.State{Kind: card.Allowed, By: moderator, At: &at}
	c.Calls[1].Run, c.Calls[1].Result = confirm.RunUnknown, confirm.UncertainOutcomeMessage
	c.Calls[1].Check = &card.Check{Ref: confirm.CheckedRef(c.BatchID, 1)}
	if checked {
		later := at.Add(time.Minute)
		c.Calls[1].Check.By, c.Calls[1].Check.At = moderator, &later
	}
	return c
}

func unknownNoticeOf(checked bool) card.UnknownNotice {
	n := card.UnknownNotice{Number: 1, Tool: "charge", Summary: "Charge 10 @everyone ||now|| <@&" + modRole + ">",
		Check: card.Check{Ref: confirm.CheckedRef("abcdefghijklmnopqrstuvwxyz", 0)}}
	if checked {
		at := time.Date(2026, 11, 29, 16, 7, 0, 0, time.UTC)
		n.Check.By, n.Check.At = moderator, &at
	}
	return n
}

// The card of an unknown run keeps "I checked — go on" (secondary style)
// until someone checks it; the thread line too; their texts are inert.
func TestCheckedRenderGolden(t *testing.T) {
	golden(t, "card_unknown.json", render(unknownCard(false)))
	golden(t, "card_unknown_checked.json", render(unknownCard(true)))
	golden(t, "unknown_notice.json", RenderUnknownNotice(unknownNoticeOf(false)))
	golden(t, "unknown_notice_checked.json", RenderUnknownNotice(unknownNoticeOf(true)))
	for name, m := range map[string]CardMessage{
		"card":           RenderMessages(unknownCard(false))[0],
		"notice":         RenderUnknownNotice(unknownNoticeOf(false)),
		"card checked":   RenderMessages(unknownCard(true))[0],
		"notice checked": RenderUnknownNotice(unknownNoticeOf(true)),
	} {
		raw, _ := json.Marshal(m.Components)
		checkedBtn := strings.Contains(string(raw), `"custom_id":"al:k:checked-`)
		if strings.HasSuffix(name, "checked") == checkedBtn {
			t.Errorf("%s: components %s", name, raw)
		}
		if bad := liveMarkup(m.Content); len(bad) != 0 {
			t.Errorf("%s: live in %q: %v", name, m.Content, bad)
		}
	}
}

// End to end over the fake Discord: an ungated charge whose outcome is
// unknown gets a thread line with "I checked — go on"; the retry with a
// note gets a card; a member without the approver role changes nothing;
// a moderator's click edits the line; a second click changes nothing and
// is audited once.
func TestUnknownOutcomeCheckedOverDiscord(t *testing.T) {
	h := newHarnessWith(t, defaultChannels(), func(c *bot.Config) { c.GrantFor = time.Hour })
	charge := &adaptertest.ChargeTool{}
	if err := h.set.Add(charge); err != nil {
		t.Fatal(err)
	}
	h.startWith(tc("c1", "charge", `{"amount":10}`), "It may or may not have gone through.")
	h.fd.Send("MESSAGE_CREATE", guildMessage("7001", channelID, requester, mentionText("charge 10"), true))
	thread := h.threadFor("7001")
	h.waitAnswer(thread, "It may or may not have gone through.")
	notice := h.card(thread, 1) // the first message with a button
	if !strings.Contains(notice.content, "Outcome unknown") || len(notice.embeds) != 0 {
		t.Fatalf("the thread line: %q", notice.content)
	}
	raw, _ := json.Marshal(notice.components)
	var comps []struct {
		Components []struct {
			CustomID string `json:"custom_id"`
		} `json:"components"`
	}
	json.Unmarshal(raw, &comps)
	if len(comps) != 1 || len(comps[0].Components) != 1 || !strings.HasPrefix(comps[0].Components[0].CustomID, "al:k:checked-") {
		t.Fatalf("the line's buttons: %s", raw)
	}
	checkID := comps[0].Components[0].CustomID

	// The retry with a note: a card.
	h.model.PushCalls(tc("c2", "charge", `{"amount":10,"note":"retry"}`))
	h.fd.Send("MESSAGE_CREATE", guildMessage("7002", thread, requester, mentionText("try again"), true))
	retry := h.card(thread, 2)
	if why, _ := json.Marshal(retry.embeds); len(retry.embeds) != 1 || charge.Runs.Load() != 1 || !strings.Contains(string(why), "unknown outcome") {
		t.Fatalf("retry: embeds %v, runs %d", retry.embeds, charge.Runs.Load())
	}

	// A member without the approver role: nothing changes.
	h.fd.Send("INTERACTION_CREATE", click("8001", thread, outsider, []string{otherRole}, checkID, notice.id))
	fu := h.fd.WaitFor("POST", "/webhooks/"+botID+"/token-8001", 1)[0].JSON(t)
	if fu["content"] != bot.UserMessage(bot.ErrNotApprover) {
		t.Fatalf("outsider's follow-up: %v", fu)
	}
	// A moderator: the line says who checked it, without the button.
	h.fd.Send("INTERACTION_CREATE", click("8002", thread, moderator, []string{modRole}, checkID, notice.id))
	edited := h.lastEdit(thread, notice.id)
	if len(edited.components) != 0 || !strings.Contains(edited.content, "Checked by <@"+moderator+">") {
		t.Fatalf("the line after the check: %q %v", edited.content, edited.components)
	}
	// Again: nothing changes.
	h.fd.Send("INTERACTION_CREATE", click("8003", thread, moderator, []string{modRole}, checkID, notice.id))
	fu = h.fd.WaitFor("POST", "/webhooks/"+botID+"/token-8003", 1)[0].JSON(t)
	if fu["content"] != bot.UserMessage(bot.ErrAlreadyChecked) {
		t.Fatalf("double click's follow-up: %v", fu)
	}
	evs, err := h.db.AuditEvents(context.Background(), confirm.AuditFilter{})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range evs {
		if e.Kind == confirm.AuditUnknownChecked {
			n++
			if e.Actor != moderator {
				t.Errorf("checked by %s", e.Actor)
			}
		}
	}
	if n != 1 {
		t.Fatalf("%d unknown_checked events, want 1", n)
	}
}
