package discord

import (
	"context"
	"strings"

	"github.com/bwmarrin/discordgo"

	"github.com/airlockhq/airlock/adapters/internal/buttonindex"
	"github.com/airlockhq/airlock/bot"
	"github.com/airlockhq/airlock/card"
	"github.com/airlockhq/airlock/confirm"
)

// The codec: a component interaction (a click) or a modal's submission
// decoded into the neutral bot.Interaction through one table, buttonRows,
// of a row per kind of button.

// Custom ids: "al:<action>:<ref>", ref being the opaque reference the bot
// issued for the button's kind (card.Button.Ref). Nothing else is
// carried; the bot checks the rest. These are wire strings: cards already
// posted keep working only while they stay as they are.
const (
	customIDPrefix     = "al:"
	actionAllow        = "a" // Allow button
	actionGrant        = "g" // "Allow for <duration>" button: allow, and grant later calls of the tool
	actionDeny         = "d" // Deny button
	actionReason       = "r" // "Deny with reason…" button: opens the modal
	actionModal        = "m" // the reason modal's submit
	actionShowArgs     = "s" // "Show full arguments" button: an ephemeral reply with them
	actionRevoke       = "v" // a grant notice's Revoke button (ref: a grant reference)
	actionEdit         = "e" // "Edit…" button: opens the edit modal (ref: the call's)
	actionEditSubmit   = "f" // the edit modal's submit
	actionExtend       = "x" // the card's Extend button (ref: any call reference of the card)
	actionChecked      = "k" // "I checked — go on" on an unknown run's card or thread line (ref: a checked reference)
	actionAllowAll     = "A" // the card's Allow all (ref: confirm.AllRef)
	actionDenyAll      = "D" // the card's Deny all (ref: confirm.AllRef)
	actionPreview      = "w" // "Show full preview": an ephemeral reply with the whole preview (a file when long)
	actionRunStop      = "t" // Stop run, on a run message (ref: confirm.RunRef)
	actionRunDone      = "n" // Mark done, on a halted run
	actionRunAgain     = "y" // Retry, on a halted run
	actionAllowTyped   = "c" // a critical call's "Allow…" button: opens the phrase modal
	actionPhraseSubmit = "p" // the phrase modal's submit
	actionAnswer       = "q" // a server's question's Answer…: opens the answer modal (ref: confirm.QuestionRef)
	actionAnswerSubmit = "u" // the answer modal's submit
	actionDecline      = "z" // a server's question's Decline
)

// buttonRow is Discord's row of a kind of button: its custom id action;
// for a button that opens a form, how the form is shown (see
// interactions.go) and, when it comes back submitted, its submission's
// custom id action and the custom id of its text input.
type buttonRow struct {
	kind   card.ActionKind
	action string
	form   *form
	submit string
	input  string
	fields bool // the form has several inputs, read as Values (answerValues)
}

// buttonRows are Discord's rows, one per kind of button Airlock posts.
var buttonRows = []buttonRow{
	{kind: card.ActAllow, action: actionAllow},
	{kind: card.ActAllowGrant, action: actionGrant},
	{kind: card.ActDeny, action: actionDeny},
	{kind: card.ActDenyReason, action: actionReason, form: reasonForm, submit: actionModal, input: ReasonInputID},
	{kind: card.ActShowArgs, action: actionShowArgs, form: argsForm},
	{kind: card.ActRevoke, action: actionRevoke},
	{kind: card.ActEdit, action: actionEdit, form: editForm, submit: actionEditSubmit, input: EditInputID},
	{kind: card.ActExtend, action: actionExtend},
	{kind: card.ActChecked, action: actionChecked},
	{kind: card.ActAllowAll, action: actionAllowAll},
	{kind: card.ActDenyAll, action: actionDenyAll},
	{kind: card.ActShowPreview, action: actionPreview, form: previewForm},
	{kind: card.ActRunStop, action: actionRunStop},
	{kind: card.ActRunMarkDone, action: actionRunDone},
	{kind: card.ActRunRetry, action: actionRunAgain},
	{kind: card.ActAllowTyped, action: actionAllowTyped, form: phraseForm, submit: actionPhraseSubmit, input: PhraseInputID},
	{kind: card.ActAnswer, action: actionAnswer, form: answerForm, submit: actionAnswerSubmit, fields: true},
	{kind: card.ActDecline, action: actionDecline},
}

// table is buttonRows indexed: by a button's action, by a submission's
// action (both in the custom id), by kind.
var table *buttonindex.Index[buttonRow]

func init() {
	table = buttonindex.Must(buttonRows, func(r buttonRow) buttonindex.Keys {
		return buttonindex.Keys{Kind: r.kind, Action: r.action, Submit: r.submit}
	}, buttonindex.Shared)
}

func customID(action, ref string) string { return customIDPrefix + action + ":" + ref }

// parseCustomID splits a custom id made by customID: a row's button or
// submission action, and a reference. The reference itself is the bot's
// to check.
func parseCustomID(id string) (action, ref string, ok bool) {
	if len(id) > maxCustomID || !strings.HasPrefix(id, customIDPrefix) {
		return "", "", false
	}
	action, ref, ok = strings.Cut(strings.TrimPrefix(id, customIDPrefix), ":")
	if !ok || ref == "" {
		return "", "", false
	}
	if _, button := table.ByAction(action); button {
		return action, ref, true
	}
	if _, submit := table.BySubmit(action); submit {
		return action, ref, true
	}
	return "", "", false
}

// unknownButton is the answer to a custom id Airlock did not issue.
var unknownButton = bot.UserMessage(confirm.ErrBadRef)

// buttonOf finds an interaction's row by its custom id: a click on a
// button (by the button's action) or the submission of a modal one
// opened (by the submission's action; submit). false for anything else,
// a submission's id on a button and a button's on a modal included.
func buttonOf(i *discordgo.Interaction) (row buttonRow, submit bool, ref string, ok bool) {
	switch i.Type {
	case discordgo.InteractionMessageComponent:
		data, _ := i.Data.(discordgo.MessageComponentInteractionData)
		action, ref, parsed := parseCustomID(data.CustomID)
		row, ok = table.ByAction(action)
		return row, false, ref, parsed && ok
	case discordgo.InteractionModalSubmit:
		data, _ := i.Data.(discordgo.ModalSubmitInteractionData)
		action, ref, parsed := parseCustomID(data.CustomID)
		row, ok = table.BySubmit(action)
		return row, true, ref, parsed && ok
	}
	return buttonRow{}, false, "", false
}

// decode is the neutral interaction of a click or a submission found by
// buttonOf: the clicker (the member's user in a guild, the user in a DM)
// and their roles, the conversation (the parent channel and the thread
// for a click in a thread), the message the button was on (Discord sends
// it with both; without it Message stays "" and the bot refuses the
// click), the submitted form's value. false, with what to tell the
// clicker, when it can't be.
func (a *Adapter) decode(ctx context.Context, i *discordgo.Interaction, row buttonRow, submit bool, ref string) (bot.Interaction, string, bool) {
	user := i.User
	var roles []string
	if i.Member != nil {
		roles = i.Member.Roles
		if i.Member.User != nil {
			user = i.Member.User
		}
	}
	if user == nil || user.ID == "" {
		return bot.Interaction{}, unknownButton, false
	}
	th, err := a.interactionThread(ctx, i)
	if err != nil {
		a.log.Error("discord: click in an unknown channel", "channel", i.ChannelID, "err", err)
		return bot.Interaction{}, bot.UserMessage(err), false
	}
	in := bot.Interaction{Platform: Platform, User: user.ID, Roles: roles, IsBot: user.Bot, Channel: th.Channel, Thread: th.Thread,
		Kind: row.kind, Ref: ref, Submit: submit, Replayed: replayed(ctx) != nil}
	if i.Message != nil {
		in.Message = i.Message.ID
	}
	if submit {
		data, _ := i.Data.(discordgo.ModalSubmitInteractionData)
		if row.fields {
			in.Values = answerValues(data.Components)
		} else {
			in.Value = textInputValue(data.Components, row.input)
		}
	}
	return in, "", true
}

// interactionThread is the conversation an interaction happened in:
// (parent channel, thread) in a thread, (channel, "") elsewhere.
func (a *Adapter) interactionThread(ctx context.Context, i *discordgo.Interaction) (bot.Thread, error) {
	th := bot.Thread{Platform: Platform, Channel: i.ChannelID}
	if i.GuildID == "" {
		return th, nil
	}
	info, err := a.channel(ctx, i.ChannelID)
	if err != nil {
		return bot.Thread{}, err
	}
	if info.isThread() && info.parent != "" {
		th.Channel, th.Thread = info.parent, i.ChannelID
	}
	return th, nil
}

// textInputValue finds a modal's text input by custom id ("" for none).
func textInputValue(components []discordgo.MessageComponent, id string) string {
	v, _ := textInput(components, id)
	return v
}

// textInput finds a modal's text input by custom id: its value, and
// whether the modal holds it.
func textInput(components []discordgo.MessageComponent, id string) (string, bool) {
	for _, c := range components {
		switch v := c.(type) {
		case *discordgo.ActionsRow:
			if s, ok := textInput(v.Components, id); ok {
				return s, true
			}
		case discordgo.ActionsRow:
			if s, ok := textInput(v.Components, id); ok {
				return s, true
			}
		case *discordgo.TextInput:
			if v.CustomID == id {
				return v.Value, true
			}
		case discordgo.TextInput:
			if v.CustomID == id {
				return v.Value, true
			}
		}
	}
	return "", false
}
