package slack

import (
	"context"
	"errors"
	"strconv"

	"github.com/slack-go/slack"

	"github.com/airlockhq/airlock/bot"
	cardpkg "github.com/airlockhq/airlock/card"
	"github.com/airlockhq/airlock/confirm"
)

// Questions. An upstream MCP server's question (bot.Questioner) is a
// thread message: who asks during which call, the server's message quoted
// literally, what it asks for, where it stands, and while it waits
// Answer… (action_id airlock_answer) and Decline (airlock_decline), both
// carrying confirm.QuestionRef. Answer… opens a modal of one plain-text
// input per field (blocks airlock_answer_0…); a value that does not fit
// is answered under its input, the modal staying open.

// Wire ids of the question's buttons and modal.
const (
	ActionAnswer  = "airlock_answer"
	ActionDecline = "airlock_decline"
	// CallbackAnswer is the callback_id of the answer modal.
	CallbackAnswer = "airlock_answer"

	answerBlockPrefix = "airlock_answer_"
	answerActionID    = "airlock_answer_input"
)

// answerBlockID is the input block of the form's field i.
func answerBlockID(i int) string { return answerBlockPrefix + strconv.Itoa(i) }

var answerForm = &form{what: "answer", failed: "I could not open the answer form. Try again. Nothing changed.",
	view: func(_ *Adapter, in interaction, f bot.Form) (slack.ModalViewRequest, string) {
		return AnswerModal(in.meta(), f.Question), ""
	}}

// RenderQuestion returns the Block Kit blocks of a server's question.
func RenderQuestion(n cardpkg.QuestionNotice) []slack.Block {
	nt := n.Notice()
	secs := []slack.RichTextElement{noticeSection(nt.Lines[:1], fullCaps)}
	if s := nt.Quote; s != "" {
		secs = append(secs, richQuote(revealClip(s, maxSummaryChars)))
	}
	if len(nt.Lines) > 1 {
		secs = append(secs, noticeSection(nt.Lines[1:], fullCaps))
	}
	blocks := []slack.Block{slack.NewRichTextBlock("question", secs...)}
	if acts := n.Actions(); len(acts) > 0 {
		blocks = append(blocks, actionsBlock("question_actions", acts),
			slack.NewContextBlock("question_footer", mrkdwn(faceText(nt.Foot))))
	}
	return blocks
}

// QuestionText is the message's plain text (notifications): Airlock's
// words and the server's name, no message, so it pings nobody.
func QuestionText(n cardpkg.QuestionNotice) string { return clip(postText(n.Fallback()), 3000) }

// AnswerModal is the modal Answer… opens (card.AnswerForm): the question
// and one input per field. Its private metadata carries the question's
// reference and where its message is.
func AnswerModal(meta ModalMeta, n cardpkg.QuestionNotice) slack.ModalViewRequest {
	f := cardpkg.AnswerForm(n)
	blocks := formHead(f, 6)
	for i, in := range f.Fields {
		input := slack.NewPlainTextInputBlockElement(nil, answerActionID)
		if in.Placeholder != "" {
			input.Placeholder = plain(clip(in.Placeholder, 150))
		}
		input.MaxLength = confirm.MaxFieldChars
		input.FocusOnLoad = i == 0
		label := slack.NewTextBlockObject(slack.PlainTextType, clip(revealClip(in.Label, 2000), 2000), false, false)
		hint := slack.NewTextBlockObject(slack.PlainTextType, clip(revealClip(in.Hint, 2000), 2000), false, false)
		block := slack.NewInputBlock(answerBlockID(i), label, hint, input)
		block.Optional = in.MinLen == 0
		blocks = append(blocks, block)
	}
	return slack.ModalViewRequest{
		Type:            slack.VTModal,
		CallbackID:      CallbackAnswer,
		Title:           plain(clip(f.Title, 24)),
		Submit:          plain(f.Submit),
		Close:           plain(f.Cancel),
		PrivateMetadata: meta.encode(),
		Blocks:          slack.Blocks{BlockSet: blocks},
	}
}

// answerAnswer says how to answer the answer modal's submission: a value
// that does not fit is shown under its input while the modal is open;
// anything else closes it.
func (a *Adapter) answerAnswer(in interaction, err error, modalOpen bool) editAnswer {
	log := a.log.With("user", in.User, "channel", in.Channel, "ref", in.Ref)
	var ae *confirm.AnswerError
	switch {
	case err == nil:
		log.Info("slack: question answered")
		return editAnswer{}
	case modalOpen && errors.As(err, &ae):
		log.Info("slack: answer refused", "why", ae.Message)
		return editAnswer{errors: map[string]string{answerBlockID(max(ae.Field, 0)): revealClip(oneLine(ae.Message), maxEditErrorChars)}}
	case bot.IsRefusal(err):
		log.Info("slack: answer changed nothing", "why", err)
	default:
		log.Error("slack: answer failed", "err", err)
	}
	return editAnswer{notify: bot.UserMessage(err)}
}

var _ bot.Questioner = (*Adapter)(nil)

// PostQuestion implements bot.Questioner: it posts the question in the
// thread and returns "<channel>/<ts>".
func (a *Adapter) PostQuestion(ctx context.Context, th bot.Thread, n cardpkg.QuestionNotice) (string, error) {
	return a.postBlocks(ctx, th, "question", RenderQuestion(n), QuestionText(n))
}

// UpdateQuestion implements bot.Questioner: it replaces the posted
// question (chat.update), without its buttons once it ended.
func (a *Adapter) UpdateQuestion(ctx context.Context, th bot.Thread, ref string, n cardpkg.QuestionNotice) error {
	return a.updateBlocks(ctx, ref, "question", RenderQuestion(n), QuestionText(n))
}
