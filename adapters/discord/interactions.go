package discord

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/bwmarrin/discordgo"

	"github.com/airlockhq/airlock/adapters/internal/visible"
	"github.com/airlockhq/airlock/bot"
	"github.com/airlockhq/airlock/card"
)

// Working an interaction: the core answers it (bot.Interact), and what it
// says is shown here: a refusal or a notice privately, a form (a modal,
// or an ephemeral reply for a view) from the rows below, a click to work
// next.

// handleInteraction answers an interaction. A click that opens a form is
// answered with the form, its first response (Discord's rule); every
// other click and every submission is acknowledged first (recorded in the
// inbox, then a deferred response: see deferred) and worked after.
func (a *Adapter) handleInteraction(ctx context.Context, i *discordgo.Interaction) {
	if i.Type != discordgo.InteractionMessageComponent && i.Type != discordgo.InteractionModalSubmit {
		// Slash commands and the like: Airlock registers none.
		a.respondEphemeral(ctx, i, "I have no commands. Mention me in a channel to start a conversation.")
		return
	}
	row, submit, ref, ok := buttonOf(i)
	switch {
	case !ok:
		a.respondEphemeral(ctx, i, unknownButton)
	case row.form != nil && !submit:
		a.open(ctx, i, row, ref)
	default:
		a.deferred(ctx, i, func(ctx context.Context) {
			in, answer, ok := a.decode(ctx, i, row, submit, ref)
			if !ok {
				a.followUp(ctx, i, answer)
				return
			}
			a.work(ctx, i, in)
		})
	}
}

// work works an acknowledged interaction: what the core answers is told
// in a follow-up.
func (a *Adapter) work(ctx context.Context, i *discordgo.Interaction, in bot.Interaction) {
	r, err := a.b.Interact(ctx, in)
	switch {
	case err != nil:
		a.followUp(ctx, i, a.refusal(i, in, err))
	case r.Then != nil:
		a.work(ctx, i, *r.Then)
	case r.Form != nil:
		a.log.Error("discord: a form for a click already acknowledged", "kind", in.Kind, "interaction", i.ID)
	case r.Notice != "":
		a.followUp(ctx, i, r.Notice)
	}
}

// formTimeout bounds the core's answer to a click that opens a form: the
// form must be the interaction's first response, within Discord's 3
// seconds.
const formTimeout = 2500 * time.Millisecond

// open answers a click that opens a form: the core says first whether the
// clicker may (a refusal is answered ephemerally) and what the form
// shows. A click that turns out to need none (an Allow… that asks no
// phrase is a plain Allow) is acknowledged as any click, then worked.
func (a *Adapter) open(ctx context.Context, i *discordgo.Interaction, row buttonRow, ref string) {
	in, answer, ok := a.decode(ctx, i, row, false, ref)
	if !ok {
		a.respondEphemeral(ctx, i, answer)
		return
	}
	fctx, cancel := context.WithTimeout(ctx, formTimeout)
	r, err := a.b.Interact(fctx, in)
	cancel()
	switch {
	case err != nil:
		a.respondEphemeral(ctx, i, a.refusal(i, in, err))
	case r.Then != nil:
		if a.deferUpdate(ctx, i) {
			a.work(ctx, i, *r.Then)
		}
	case r.Form != nil:
		a.showForm(ctx, i, *r.Form)
	case r.Notice != "":
		a.respondEphemeral(ctx, i, r.Notice)
	default:
		a.deferUpdate(ctx, i)
	}
}

// form is how a form the core asks to open is shown: show builds the
// interaction's response, or says instead what to tell the clicker when
// there is nothing to show; what names it in the log.
type form struct {
	what string
	show func(f bot.Form) (r *discordgo.InteractionResponse, instead string)
}

// argsGone answers "Show full arguments" on a card that no longer waits.
const argsGone = "This card no longer waits for a decision, so its arguments are not shown here. The audit log keeps them."

// The forms, by the button that opens them (see buttonRows).
var (
	reasonForm = &form{what: "reason modal", show: func(f bot.Form) (*discordgo.InteractionResponse, string) {
		return &discordgo.InteractionResponse{Type: discordgo.InteractionResponseModal, Data: ReasonModal(f.Ref, f.Number)}, ""
	}}
	// The whole arguments, only to the clicker. The reference must name
	// a call of a waiting card and the button must be on that card's
	// message (in its thread, an approvals channel or a DM copy); anyone
	// who sees it may look.
	argsForm = &form{what: "arguments", show: func(f bot.Form) (*discordgo.InteractionResponse, string) {
		if f.Call == nil {
			return nil, argsGone
		}
		return &discordgo.InteractionResponse{Type: discordgo.InteractionResponseChannelMessageWithSource, Data: ArgsReply(*f.Call)}, ""
	}}
	previewForm = &form{what: "preview", show: func(f bot.Form) (*discordgo.InteractionResponse, string) {
		if f.Call == nil {
			return nil, "This card no longer waits for a decision, so its preview is not shown here."
		}
		return &discordgo.InteractionResponse{Type: discordgo.InteractionResponseChannelMessageWithSource, Data: PreviewReply(*f.Call)}, ""
	}}
	// The edit modal holds the call's arguments; arguments too large for
	// its one text input are answered ephemerally instead.
	editForm = &form{what: "edit modal", show: func(f bot.Form) (*discordgo.InteractionResponse, string) {
		value := visible.Reveal(strings.TrimSpace(f.Edit.Args))
		if n := runes(value); n > MaxEditChars {
			return nil, tooLargeToEdit(n)
		}
		if len(customID(actionEditSubmit, f.Ref)) > maxCustomID {
			return nil, unknownButton
		}
		return &discordgo.InteractionResponse{Type: discordgo.InteractionResponseModal, Data: holdsEdit(EditModal(f.Ref, f.Number, value), f.Edit.Holds)}, ""
	}}
	phraseForm = &form{what: "phrase modal", show: func(f bot.Form) (*discordgo.InteractionResponse, string) {
		if len(customID(actionPhraseSubmit, f.Phrase.Ref)) > maxCustomID {
			return nil, unknownButton
		}
		return &discordgo.InteractionResponse{Type: discordgo.InteractionResponseModal, Data: PhraseModal(f.Phrase)}, ""
	}}
)

// showForm answers a click with the form the core asked for.
func (a *Adapter) showForm(ctx context.Context, i *discordgo.Interaction, f bot.Form) {
	row, _ := table.ByKind(f.Kind)
	fm := row.form
	if fm == nil {
		a.log.Error("discord: the bot asked for a form this adapter has none of", "kind", f.Kind)
		a.respondEphemeral(ctx, i, unknownButton)
		return
	}
	r, instead := fm.show(f)
	if instead != "" {
		a.respondEphemeral(ctx, i, instead)
		return
	}
	if err := a.respond(ctx, i, r); err != nil {
		a.log.Error("discord: answer with the "+fm.what, "interaction", i.ID, "err", err)
	}
}

// tooLargeToEdit answers Edit… on a call whose arguments do not fit the
// modal's one text input.
func tooLargeToEdit(n int) string {
	return fmt.Sprintf("This call's arguments are too large to edit in Discord (%s; a form holds at most %s). Allow or deny it as it is. Nothing changed.",
		card.Characters(n), card.Characters(MaxEditChars))
}

// refusal is what to tell the clicker, privately, of an interaction that
// changed nothing: an edit refused for what it says (*bot.EditError), in
// the bot's words escaped (a modal can't show errors in place), anything
// else as UserMessage says. Refusals are logged at Info; anything else is
// an error.
func (a *Adapter) refusal(i *discordgo.Interaction, in bot.Interaction, err error) string {
	var ee *bot.EditError
	switch {
	case errors.As(err, &ee):
		a.log.Info("discord: edit refused", "user", in.User, "channel", i.ChannelID, "err", err)
		return editRefused(ee.Message)
	case bot.IsRefusal(err):
		a.log.Info("discord: click changed nothing", "action", in.Kind, "user", in.User, "channel", i.ChannelID, "err", err)
	default:
		a.log.Error("discord: "+in.Kind.String(), "user", in.User, "channel", i.ChannelID, "err", err)
	}
	return bot.UserMessage(err)
}

// editRefused is the answer to an edit refused for what it says.
func editRefused(message string) string {
	m := strings.TrimRight(strings.TrimSpace(message), ".")
	if m == "" {
		m = "the arguments are not valid"
	}
	return "Edit refused: " + escapeClip(m, 1500) + ". Nothing changed."
}
