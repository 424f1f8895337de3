package slack

import (
	"fmt"

	"github.com/slack-go/slack"

	"github.com/airlockhq/airlock/bot"
)

// maxPhraseInput bounds what the phrase modal's input takes: more than
// any phrase.
const maxPhraseInput = 2 * bot.MaxPhraseRunes

// PhraseModal is the modal "Allow…" opens: "Type <phrase> to allow
// <tool>" as literal rich text (the phrase comes from the arguments:
// inert, no mentions or markup), and one plain_text_input. Its private
// metadata is the edit modal's (the call's reference, where the card is,
// the card message), so the submission is judged as a click on that card.
func PhraseModal(meta ModalMeta, p bot.PhrasePrompt) slack.ModalViewRequest {
	tool := revealClip(oneLine(p.Tool), maxToolChars)
	about := []slack.RichTextElement{slack.NewRichTextSection(
		rtText("Type ", nil),
		rtText(revealClip(p.Phrase, bot.MaxPhraseRunes+10), code),
		rtText(fmt.Sprintf(" to allow call %d, ", p.Number), nil),
		rtText(tool, code),
	)}
	input := slack.NewPlainTextInputBlockElement(nil, phraseActionID)
	input.MaxLength = maxPhraseInput
	input.FocusOnLoad = true
	label := slack.NewTextBlockObject(slack.PlainTextType, "Confirmation phrase", false, false)
	hint := slack.NewTextBlockObject(slack.PlainTextType, "This call is rated critical. A wrong phrase changes nothing.", false, false)
	return slack.ModalViewRequest{
		Type:            slack.VTModal,
		CallbackID:      CallbackPhrase,
		Title:           plain(clip(fmt.Sprintf("Allow call %d", p.Number), 24)),
		Submit:          plain("Allow"),
		Close:           plain("Cancel"),
		PrivateMetadata: meta.encode(),
		Blocks: slack.Blocks{BlockSet: []slack.Block{
			slack.NewRichTextBlock("call", about...),
			slack.NewInputBlock(PhraseBlockID, label, hint, input),
		}},
	}
}
