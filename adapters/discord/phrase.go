package discord

import (
	"github.com/bwmarrin/discordgo"

	"github.com/airlockhq/airlock/adapters/internal/visible"
	"github.com/airlockhq/airlock/bot"
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

// PhraseModal is the modal "Allow…" opens for the call of p.Ref: titled
// with the call's number, one short input labelled "Type the phrase to
// allow <tool>" whose placeholder is the phrase (a modal shows no other
// text; placeholders are plain text, so the phrase is inert there).
func PhraseModal(p bot.PhrasePrompt) *discordgo.InteractionResponseData {
	tool := visible.Reveal(oneLine(p.Tool))
	return &discordgo.InteractionResponseData{
		CustomID: customID(actionPhraseSubmit, p.Ref),
		Title:    truncate(numbered("Allow this call", "Allow call [%d]: type its phrase", p.Number), maxModalTitle),
		Components: []discordgo.MessageComponent{discordgo.ActionsRow{Components: []discordgo.MessageComponent{
			discordgo.TextInput{
				CustomID:    PhraseInputID,
				Label:       truncate("Type the phrase to allow "+tool, maxInputLabel),
				Style:       discordgo.TextInputShort,
				Placeholder: p.Phrase,
				Required:    true,
				MinLength:   1,
				MaxLength:   2 * bot.MaxPhraseRunes,
			},
		}}},
	}
}

// heldEditLabel is the edit modal's label on a critical call, whose edit
// is saved without allowing it (bot.EditForm.Holds).
const heldEditLabel = "Arguments (JSON): saving won't allow it"

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
		in.Label = heldEditLabel
		row.Components = append([]discordgo.MessageComponent{in}, row.Components[1:]...)
		d.Components = append([]discordgo.MessageComponent{row}, d.Components[1:]...)
	}
	return d
}
