package discord

import (
	"context"

	"github.com/bwmarrin/discordgo"

	"github.com/airlockhq/airlock/bot"
	"github.com/airlockhq/airlock/card"
)

// Typed confirmation: a critical call's "Allow…" answers with a modal
// asking for the call's confirmation phrase; its submission is the Allow.
const (
	actionAllowTyped   = "c" // a critical call's "Allow…" button: opens the phrase modal
	actionPhraseSubmit = "p" // the phrase modal's submit
	// PhraseInputID is the custom id of the phrase modal's text input.
	PhraseInputID = "phrase"
	// Discord's limits of a modal's title and a text input's label.
	maxModalTitle = 45
	maxInputLabel = 45
)

// PhraseModal is the modal "Allow…" opens for the call of p.Ref
// (card.PhraseForm): titled with the call's number, one short input
// whose placeholder is the phrase (a modal shows no other text;
// placeholders are plain text, so the phrase is inert there).
func PhraseModal(p bot.PhrasePrompt) *discordgo.InteractionResponseData {
	f := card.PhraseForm(p.Number, p.Tool, p.Phrase)
	in := f.Fields[0]
	return &discordgo.InteractionResponseData{
		CustomID: customID(actionPhraseSubmit, p.Ref),
		Title:    truncate(f.Title, maxModalTitle),
		Components: []discordgo.MessageComponent{discordgo.ActionsRow{Components: []discordgo.MessageComponent{
			discordgo.TextInput{
				CustomID:    PhraseInputID,
				Label:       truncate(in.Label, maxInputLabel),
				Style:       discordgo.TextInputShort,
				Placeholder: in.Placeholder,
				Required:    true,
				MinLength:   in.MinLen,
				MaxLength:   2 * bot.MaxPhraseRunes,
			},
		}}},
	}
}

// openPhrase answers "Allow…" with the phrase modal; the bot says first
// whether the clicker may allow the call and what it asks typed
// (bot.PhraseFor). A refusal is answered ephemerally; a call that needs
// no phrase is decided as a plain Allow.
func (a *Adapter) openPhrase(ctx context.Context, i *discordgo.Interaction, ref string) {
	click, answer, ok := a.clickFrom(ctx, i, ref)
	if !ok {
		a.respondEphemeral(ctx, i, answer)
		return
	}
	fctx, cancel := context.WithTimeout(ctx, editFormTimeout)
	p, needed, err := a.b.PhraseFor(fctx, click)
	cancel()
	switch {
	case err != nil:
		if bot.IsRefusal(err) {
			a.log.Info("discord: phrase refused", "user", click.User, "channel", i.ChannelID, "err", err)
		} else {
			a.log.Error("discord: phrase prompt", "user", click.User, "channel", i.ChannelID, "err", err)
		}
		a.respondEphemeral(ctx, i, bot.UserMessage(err))
		return
	case !needed:
		if a.deferUpdate(ctx, i) {
			a.decide(ctx, i, ref, true, false, "")
		}
		return
	}
	if p.Ref == "" {
		p.Ref = ref
	}
	if len(customID(actionPhraseSubmit, p.Ref)) > maxCustomID {
		a.respondEphemeral(ctx, i, unknownButton)
		return
	}
	if err := a.respond(ctx, i, &discordgo.InteractionResponse{Type: discordgo.InteractionResponseModal, Data: PhraseModal(p)}); err != nil {
		a.log.Error("discord: open the phrase modal", "interaction", i.ID, "err", err)
	}
}

// submitPhrase decides the phrase modal's submission: an Allow with the
// typed phrase. A wrong or missing phrase is told ephemerally (a modal
// can't show errors in place) and changes nothing.
func (a *Adapter) submitPhrase(ctx context.Context, i *discordgo.Interaction, ref, phrase string) {
	click, ok := a.clickOf(ctx, i, ref)
	if !ok {
		return
	}
	click.Allow, click.Phrase = true, phrase
	a.refused(ctx, i, click, "phrase", a.b.Decide(ctx, click))
}

// holdsEdit relabels the edit modal of a critical call (holds): its
// submission saves the edit and the call waits for Allow… and the phrase.
func holdsEdit(d *discordgo.InteractionResponseData, holds bool) *discordgo.InteractionResponseData {
	if !holds || len(d.Components) == 0 {
		return d
	}
	row, ok := d.Components[0].(discordgo.ActionsRow)
	if !ok || len(row.Components) == 0 {
		return d
	}
	if in, ok := row.Components[0].(discordgo.TextInput); ok {
		in.Label = truncate(card.EditForm(0, "", "", "", true).Fields[0].Label, maxInputLabel)
		row.Components = append([]discordgo.MessageComponent{in}, row.Components[1:]...)
		d.Components = append([]discordgo.MessageComponent{row}, d.Components[1:]...)
	}
	return d
}
