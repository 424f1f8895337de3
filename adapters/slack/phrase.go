package slack

import (
	"github.com/slack-go/slack"

	"github.com/airlockhq/airlock/adapters/internal/visible"
	"github.com/airlockhq/airlock/bot"
	cardpkg "github.com/airlockhq/airlock/card"
)

// maxPhraseInput bounds what the phrase modal's input takes: more than
// any phrase.
const maxPhraseInput = 2 * bot.MaxPhraseRunes

// PhraseModal is the modal "Allow…" opens (card.PhraseForm): "Type
// <phrase> to allow call N, <tool>" as literal rich text (the phrase
// comes from the arguments: inert, no mentions or markup), and one
// plain_text_input. Its private metadata is the edit modal's (the call's
// reference, where the card is, the card message), so the submission is
// judged as a click on that card.
func PhraseModal(meta ModalMeta, p bot.PhrasePrompt) slack.ModalViewRequest {
	f := cardpkg.PhraseForm(p.Number, p.Tool, p.Phrase)
	in := f.Fields[0]
	// The phrase comes from the arguments: no emoji shortcodes.
	placeholder := slack.NewTextBlockObject(slack.PlainTextType, clip(visible.Reveal(in.Placeholder), 150), false, false)
	input := slack.NewPlainTextInputBlockElement(placeholder, phraseActionID)
	input.MaxLength = maxPhraseInput
	input.FocusOnLoad = true
	label := slack.NewTextBlockObject(slack.PlainTextType, in.Label, false, false)
	hint := slack.NewTextBlockObject(slack.PlainTextType, in.Hint, false, false)
	return slack.ModalViewRequest{
		Type:            slack.VTModal,
		CallbackID:      CallbackPhrase,
		Title:           plain(clip(f.Title, 24)),
		Submit:          plain(f.Submit),
		Close:           plain(f.Cancel),
		PrivateMetadata: meta.encode(),
		Blocks: slack.Blocks{BlockSet: append(formHead(f, 0),
			slack.NewInputBlock(PhraseBlockID, label, hint, input),
		)},
	}
}
