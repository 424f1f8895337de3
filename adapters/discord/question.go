package discord

import (
	"context"
	"strconv"

	"github.com/bwmarrin/discordgo"

	"github.com/airlockhq/airlock/adapters/internal/visible"
	"github.com/airlockhq/airlock/bot"
	"github.com/airlockhq/airlock/card"
	"github.com/airlockhq/airlock/confirm"
)

// Questions. An upstream MCP server's question (bot.Questioner) is a
// message in the thread: who asks during which call, the server's message
// quoted inert, what it asks for, where it stands, and while it waits
// Answer… and Decline. Answer… opens a modal of one short text input per
// field (custom ids answer_0…; a Discord modal holds five, as many as a
// question may ask); an answer that does not fit is told privately and
// changes nothing.

// answerInputPrefix starts the custom id of an answer modal's inputs.
const answerInputPrefix = "answer_"

func answerInputID(i int) string { return answerInputPrefix + strconv.Itoa(i) }

var answerForm = &form{what: "answer modal", show: func(f bot.Form) (*discordgo.InteractionResponse, string) {
	if len(customID(actionAnswerSubmit, f.Ref)) > maxCustomID {
		return nil, unknownButton
	}
	return &discordgo.InteractionResponse{Type: discordgo.InteractionResponseModal, Data: AnswerModal(f.Ref, f.Question)}, ""
}}

// RenderQuestion lays out a server's question.
func RenderQuestion(n card.QuestionNotice) CardMessage {
	m := CardMessage{Embeds: []*discordgo.MessageEmbed{}, Components: []discordgo.MessageComponent{}}
	var row []discordgo.MessageComponent
	for _, a := range n.Actions() {
		if btn, ok := button(a, false); ok {
			row = append(row, btn)
		}
	}
	if len(row) > 0 {
		m.Components = append(m.Components, discordgo.ActionsRow{Components: row})
	}
	m.Content = truncateMarkup(noticeText(n.Notice(), len(row) > 0), maxContent)
	return m
}

// AnswerModal is the modal Answer… opens (card.AnswerForm): one short
// input per field, labelled with the field (its hint as placeholder, as
// a Discord modal shows no more).
func AnswerModal(ref string, n card.QuestionNotice) *discordgo.InteractionResponseData {
	f := card.AnswerForm(n)
	d := &discordgo.InteractionResponseData{CustomID: customID(actionAnswerSubmit, ref), Title: truncate(f.Title, maxModalTitle)}
	for i, in := range f.Fields {
		ph := in.Hint
		if in.Placeholder != "" {
			ph = in.Placeholder
		}
		d.Components = append(d.Components, discordgo.ActionsRow{Components: []discordgo.MessageComponent{discordgo.TextInput{
			CustomID:    answerInputID(i),
			Label:       truncate(visible.Reveal(in.Label), maxInputLabel),
			Style:       discordgo.TextInputShort,
			Placeholder: truncate(visible.Reveal(ph), 100),
			Required:    in.MinLen > 0,
			MaxLength:   confirm.MaxFieldChars,
		}}})
	}
	return d
}

// answerValues reads an answer modal's inputs in order.
func answerValues(components []discordgo.MessageComponent) []string {
	var out []string
	for i := range confirm.MaxQuestionFields {
		v, ok := textInput(components, answerInputID(i))
		if !ok {
			break
		}
		out = append(out, v)
	}
	return out
}

var _ bot.Questioner = (*Adapter)(nil)

// PostQuestion implements bot.Questioner: it posts the question in the
// thread; its message id is the reference (a click counts only on it).
func (a *Adapter) PostQuestion(ctx context.Context, th bot.Thread, n card.QuestionNotice) (string, error) {
	return a.send(ctx, th, RenderQuestion(n), "question")
}

// UpdateQuestion implements bot.Questioner: it edits the question in
// place; once ended it has no buttons.
func (a *Adapter) UpdateQuestion(ctx context.Context, th bot.Thread, ref string, n card.QuestionNotice) error {
	return a.editRef(ctx, th, ref, RenderQuestion(n), "question")
}
