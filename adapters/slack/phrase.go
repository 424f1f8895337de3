package slack

import (
	"context"
	"errors"

	"github.com/slack-go/slack"

	"github.com/airlockhq/airlock/adapters/internal/visible"
	"github.com/airlockhq/airlock/bot"
	cardpkg "github.com/airlockhq/airlock/card"
)

// Typed confirmation: a critical call's "Allow…" opens a modal asking
// for the call's confirmation phrase; its submission is the Allow.
const (
	// ActionAllowTyped is a critical call's "Allow…" (style primary, in
	// Allow's place; value: the call's reference): opens the phrase modal.
	ActionAllowTyped = "airlock_allow_typed"
	// CallbackPhrase is the callback_id of the phrase modal.
	CallbackPhrase = "airlock_phrase"
	// PhraseBlockID is the phrase modal's input block: a wrong phrase is
	// answered under it (response_action "errors").
	PhraseBlockID  = "airlock_phrase"
	phraseActionID = "airlock_phrase_input"
	// maxPhraseInput bounds what the input takes: more than any phrase.
	maxPhraseInput = 2 * bot.MaxPhraseRunes
)

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

// openPhrase answers "Allow…": the bot checks that the clicker may allow
// the call and gives the phrase, which the modal asks for. A call that
// needs no phrase (its card was older than its tier) is decided as a
// plain Allow.
func (a *Adapter) openPhrase(ctx context.Context, in interaction) {
	p, needed, err := a.bot.PhraseFor(ctx, a.click(in))
	if err != nil {
		a.refused(ctx, in, err)
		return
	}
	if !needed {
		if err := a.bot.Decide(ctx, a.click(in)); err != nil {
			a.refused(ctx, in, err)
		}
		return
	}
	meta := ModalMeta{Ref: in.Ref, Channel: in.Channel, Thread: in.Thread, Message: in.Message}
	if _, err := a.api.OpenViewContext(ctx, in.TriggerID, PhraseModal(meta, p)); err != nil {
		a.log.Error("slack: views.open (phrase)", "user", in.User, "ref", in.Ref, "err", err)
		a.ephemeral(ctx, in.Channel, in.Thread, in.User, "I could not open the confirmation form. Try again. Nothing changed.")
	}
}

// submitPhrase decides the phrase modal's submission (an Allow with the
// typed phrase) and says how to answer it: a wrong or missing phrase
// keeps the modal open with the bot's message under the input; anything
// else closes it. As the edit modal's, the answer waits at most editWait.
func (a *Adapter) submitPhrase(ctx context.Context, in interaction) editAnswer {
	return a.answerWithin(ctx, in, "phrase", func() error { return a.bot.Decide(ctx, a.click(in)) },
		func(err error, modalOpen bool) editAnswer {
			log := a.log.With("user", in.User, "channel", in.Channel, "ref", in.Ref)
			switch {
			case err == nil:
				return editAnswer{}
			case modalOpen && (errors.Is(err, bot.ErrWrongPhrase) || errors.Is(err, bot.ErrPhraseRequired)):
				log.Info("slack: phrase refused", "why", err)
				return editAnswer{errors: map[string]string{PhraseBlockID: bot.UserMessage(err)}}
			case bot.IsRefusal(err):
				log.Info("slack: click changed nothing", "why", err)
			default:
				log.Error("slack: click failed", "err", err)
			}
			return editAnswer{notify: bot.UserMessage(err)}
		})
}

// answered reports whether a submission of this kind is answered with its
// outcome (response_action "errors" keeps its modal open), not acked at
// once: the edit and phrase modals'.
func (k interactionKind) answered() bool { return k == kindSubmitEdit || k == kindSubmitPhrase }

// submitAnswered works a submission whose answer waits on its outcome
// (see answered).
func (a *Adapter) submitAnswered(ctx context.Context, in interaction) editAnswer {
	if in.Kind == kindSubmitPhrase {
		return a.submitPhrase(ctx, in)
	}
	return a.submitEdit(ctx, in)
}
