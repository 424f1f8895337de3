package discord

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/bwmarrin/discordgo"

	"github.com/airlockhq/airlock/bot"
	"github.com/airlockhq/airlock/card"
	"github.com/airlockhq/airlock/confirm"
)

// sampleRefs are well-formed references of each kind.
var sampleRefs = map[card.RefKind]string{
	card.RefCall:     confirm.Ref("abcdefgh", 1),
	card.RefGrant:    confirm.GrantRef("g1"),
	card.RefAll:      confirm.AllRef("abcdefgh", 3),
	card.RefRun:      confirm.RunRef("r1"),
	card.RefChecked:  confirm.CheckedRef("abcdefgh", 1),
	card.RefQuestion: confirm.QuestionRef("q1"),
}

func dmComponent(customID string) *discordgo.Interaction {
	return &discordgo.Interaction{ID: "1", Type: discordgo.InteractionMessageComponent, ChannelID: dmChannel,
		User: &discordgo.User{ID: dmUser}, Message: &discordgo.Message{ID: "9100"},
		Data: discordgo.MessageComponentInteractionData{CustomID: customID}}
}

func dmModal(customID, input, value string) *discordgo.Interaction {
	return &discordgo.Interaction{ID: "2", Type: discordgo.InteractionModalSubmit, ChannelID: dmChannel,
		User: &discordgo.User{ID: dmUser}, Message: &discordgo.Message{ID: "9100"},
		Data: discordgo.ModalSubmitInteractionData{CustomID: customID, Components: []discordgo.MessageComponent{
			&discordgo.ActionsRow{Components: []discordgo.MessageComponent{&discordgo.TextInput{CustomID: input, Value: value}}}}}}
}

// Every kind of button card lists has its row here (a kind added without
// one fails), and the row round-trips: the button the renderer lays out
// for the kind decodes back to the kind and its reference; a button that
// opens a form has the form's renderer, and the modal it opens comes back
// submitted as the kind's submission with what was typed.
func TestCodecRoundTripsEveryKind(t *testing.T) {
	a := &Adapter{log: slog.New(slog.DiscardHandler)}
	ctx := context.Background()
	for _, b := range card.Buttons() {
		row, ok := table.ByKind(b.Kind)
		if !ok {
			t.Errorf("%s: no row in Discord's table", b.Name)
			continue
		}
		ref := sampleRefs[b.Ref]
		btn, ok := button(card.Action{Kind: b.Kind, Ref: ref, Label: "x"}, false)
		if !ok {
			t.Errorf("%s: not rendered", b.Name)
			continue
		}
		i := dmComponent(btn.CustomID)
		got, submit, gotRef, ok := buttonOf(i)
		if !ok || got.kind != b.Kind || submit || gotRef != ref {
			t.Errorf("%s: %q decoded as %s %v %q %v", b.Name, btn.CustomID, got.kind, submit, gotRef, ok)
			continue
		}
		in, _, ok := a.decode(ctx, i, got, submit, gotRef)
		if !ok || in.Kind != b.Kind || in.Ref != ref || in.User != dmUser || in.Channel != dmChannel || in.Message != "9100" || in.Submit {
			t.Errorf("%s: interaction %+v", b.Name, in)
		}
		if b.Opens != (row.form != nil) {
			t.Errorf("%s: opens a form %v, has one %v", b.Name, b.Opens, row.form != nil)
		}
		if b.Submits != (row.submit != "") {
			t.Errorf("%s: submits %v, reads a submission %q", b.Name, b.Submits, row.submit)
			continue
		}
		if !b.Submits {
			continue
		}
		r, instead := row.form.show(bot.Form{Kind: b.Kind, Ref: ref, Number: 2, Edit: bot.EditForm{Ref: ref, Args: "{}"}, Phrase: bot.PhrasePrompt{Ref: ref, Number: 2, Phrase: "p"},
			Question: card.QuestionNotice{Ref: ref, Fields: []confirm.QuestionField{{Name: "env", Type: "string"}}}})
		data, _ := r.Data, instead
		if r == nil || r.Type != discordgo.InteractionResponseModal || data == nil {
			t.Errorf("%s: the form is no modal: %+v %q", b.Name, r, instead)
			continue
		}
		input := row.input
		if row.fields {
			input = answerInputID(0)
		}
		sub := dmModal(data.CustomID, input, "typed")
		got, submit, gotRef, ok = buttonOf(sub)
		if !ok || got.kind != b.Kind || !submit || gotRef != ref {
			t.Errorf("%s: its modal %q decoded as %s %v %q %v", b.Name, data.CustomID, got.kind, submit, gotRef, ok)
			continue
		}
		in, _, ok = a.decode(ctx, sub, got, submit, gotRef)
		typed := in.Value == "typed"
		if row.fields {
			typed = len(in.Values) == 1 && in.Values[0] == "typed"
		}
		if !ok || !in.Submit || !typed || in.Kind != b.Kind {
			t.Errorf("%s: submission %+v", b.Name, in)
		}
	}
}

// interactSpy records every interaction the adapter hands the bot.
type interactSpy struct {
	nopBot
	mu  sync.Mutex
	got []bot.Interaction
}

func (s *interactSpy) Interact(ctx context.Context, in bot.Interaction) (bot.Reply, error) {
	s.mu.Lock()
	s.got = append(s.got, in)
	s.mu.Unlock()
	return bot.Dispatch(ctx, s, in)
}

// A custom id Airlock did not issue (an unknown action, a submission's id
// on a button, a button's id on a modal, no reference, another bot's id)
// is answered privately as an unknown button and never reaches the bot.
func TestUnknownButtonRefused(t *testing.T) {
	fd := newFakeDiscord(t, true)
	spy := &interactSpy{}
	a, err := New(Config{Token: testToken, APIURL: fd.APIURL()}, spy)
	if err != nil {
		t.Fatal(err)
	}
	h := &harness{t: t, fd: fd, a: a}
	h.start()
	ref := confirm.Ref("abcdefgh", 1)
	sends := map[string]map[string]any{
		"8961": click("8961", threadCh, moderator, []string{modRole}, "al:Z:"+ref, "9100"),
		"8962": click("8962", threadCh, moderator, []string{modRole}, "al:m:"+ref, "9100"),
		"8963": click("8963", threadCh, moderator, []string{modRole}, "al:p:"+ref, "9100"),
		"8964": click("8964", threadCh, moderator, []string{modRole}, "al:a:", "9100"),
		"8965": click("8965", threadCh, moderator, []string{modRole}, "other:a:"+ref, "9100"),
		"8966": modalSubmit("8966", threadCh, moderator, []string{modRole}, "al:a:"+ref, "why", "9100"),
		"8967": modalSubmit("8967", threadCh, moderator, []string{modRole}, "al:s:"+ref, "why", "9100"),
	}
	for id, p := range sends {
		fd.Send("INTERACTION_CREATE", p)
		if got := h.ephemeralCallback(id); got != unknownButton {
			t.Errorf("%s: answered %q", id, got)
		}
	}
	time.Sleep(50 * time.Millisecond)
	spy.mu.Lock()
	defer spy.mu.Unlock()
	if len(spy.got) != 0 {
		t.Fatalf("an unknown button reached the bot: %+v", spy.got)
	}
}
