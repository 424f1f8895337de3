package discord

import (
	"github.com/bwmarrin/discordgo"

	"github.com/airlockhq/airlock/bot"
	"github.com/airlockhq/airlock/card"
)

// Typed confirmation: a critical call's "Allow…" answers with a modal
// asking for the call's confirmation phrase; its submission is the Allow.
const (
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
