package discord

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/bwmarrin/discordgo"

	"github.com/airlockhq/airlock/adapters/discord/discordtest"
	"github.com/airlockhq/airlock/bot"
	"github.com/airlockhq/airlock/confirm"
)

// The phrase modal: the phrase is the input's placeholder (plain text: a
// mention or markup in it stays characters); the label and the title
// stay within Discord's 45 characters.
func TestPhraseModalGolden(t *testing.T) {
	m := PhraseModal(bot.PhrasePrompt{Ref: "abcdefghijklmnopqrstuvwxyz.1", Number: 2, Tool: "restart_service_in_every_region_now",
		Phrase: "@everyone <@123> `x` **prod**/api"})
	golden(t, "modal_phrase.json", m)
	in := m.Components[0].(discordgo.ActionsRow).Components[0].(discordgo.TextInput)
	if runes(m.Title) > maxModalTitle || runes(in.Label) > maxInputLabel || in.Placeholder != "@everyone <@123> `x` **prod**/api" {
		t.Fatalf("title %q, label %q, placeholder %q", m.Title, in.Label, in.Placeholder)
	}
}

// criticalRestarts rates every call critical.
func criticalRestarts(c *bot.Config) {
	c.Policy = confirm.NewPolicy(true, nil, confirm.PolicyFunc(func(confirm.Request) confirm.Verdict {
		return confirm.Verdict{Ask: true, Risk: confirm.RiskCritical}
	}))
}

// A critical call's card offers "Allow…" (no plain Allow); a forged plain
// Allow is refused; a stranger's "Allow…" gets no modal; the moderator's
// opens the phrase modal; a wrong phrase, and a stranger's submission
// with the right one, change nothing and are told ephemerally; the right
// phrase runs the call once.
func TestRouteCriticalCallNeedsThePhrase(t *testing.T) {
	h := newHarnessWith(t, defaultChannels(), criticalRestarts)
	h.startWith(tc("c1", "restart_service", `{"service":"api"}`), "Restarted.")
	thread, card := h.askForCard("7931", "restart api")
	by := buttonsByAction(t, card.components)
	if len(by[actionAllow]) != 0 || len(by[actionAllowTyped]) != 1 {
		t.Fatalf("buttons %v: want Allow… and no plain Allow", by)
	}
	raw, _ := json.Marshal(card.components)
	if !strings.Contains(string(raw), `"label":"Allow…"`) {
		t.Fatalf("components %s", raw)
	}
	ref := strings.TrimPrefix(by[actionAllowTyped][0], "al:"+actionAllowTyped+":")
	submit := "al:" + actionPhraseSubmit + ":" + ref

	h.fd.Send("INTERACTION_CREATE", click("8931", thread, moderator, []string{modRole}, "al:"+actionAllow+":"+ref, card.id))
	if got := h.followUp("8931"); got != bot.UserMessage(bot.ErrPhraseRequired) {
		t.Fatalf("a plain Allow: %q", got)
	}
	h.fd.Send("INTERACTION_CREATE", click("8932", thread, outsider, []string{otherRole}, by[actionAllowTyped][0], card.id))
	if cb := h.callback("8932"); cb["type"] != float64(discordgo.InteractionResponseChannelMessageWithSource) ||
		cb["data"].(map[string]any)["content"] != bot.UserMessage(bot.ErrNotApprover) {
		t.Fatalf("a stranger's Allow…: %v", cb)
	}
	h.fd.Send("INTERACTION_CREATE", click("8933", thread, moderator, []string{modRole}, by[actionAllowTyped][0], card.id))
	cb := h.callback("8933")
	raw, _ = json.Marshal(cb["data"])
	if cb["type"] != float64(discordgo.InteractionResponseModal) || !strings.Contains(string(raw), `"custom_id":"`+submit+`"`) ||
		!strings.Contains(string(raw), `"placeholder":"restart_service"`) {
		t.Fatalf("phrase callback %s", raw)
	}

	h.fd.Send("INTERACTION_CREATE", phraseSubmit("8934", thread, moderator, []string{modRole}, submit, "Restart_service", card.id))
	if got := h.followUp("8934"); got != bot.UserMessage(bot.ErrWrongPhrase) {
		t.Fatalf("a wrong phrase: %q", got)
	}
	h.fd.Send("INTERACTION_CREATE", phraseSubmit("8935", thread, outsider, []string{otherRole}, submit, "restart_service", card.id))
	if got := h.followUp("8935"); got != bot.UserMessage(bot.ErrNotApprover) {
		t.Fatalf("a stranger's submission: %q", got)
	}
	if h.tool.runs.Load() != 0 {
		t.Fatal("a refused phrase ran the call")
	}

	h.fd.Send("INTERACTION_CREATE", phraseSubmit("8936", thread, moderator, []string{modRole}, submit, " restart_service ", card.id))
	h.waitAnswer(thread, "Restarted.")
	h.noFollowUp("8936")
	if n := h.tool.runs.Load(); n != 1 {
		t.Fatalf("runs %d, want 1", n)
	}
	h.checkNothingPings()
}

// phraseSubmit is the phrase modal's submission with the phrase typed.
func phraseSubmit(id, channel, user string, roles []string, customID, phrase, messageID string) map[string]any {
	return discordtest.ModalSubmit(id, channel, user, roles, customID, PhraseInputID, phrase, messageID)
}

// The edit modal of a critical call says saving does not allow it.
func TestHeldEditModalSaysItDoesNotAllow(t *testing.T) {
	label := func(d *discordgo.InteractionResponseData) string {
		return d.Components[0].(discordgo.ActionsRow).Components[0].(discordgo.TextInput).Label
	}
	if got := label(holdsEdit(EditModal("abc.1", 1, "{}"), false)); !strings.Contains(got, "submitting allows") {
		t.Fatalf("plain edit label %q", got)
	}
	if got := label(holdsEdit(EditModal("abc.1", 1, "{}"), true)); got != "Arguments (JSON): saving won't allow it" || runes(got) > maxInputLabel {
		t.Fatalf("held edit label %q", got)
	}
}
