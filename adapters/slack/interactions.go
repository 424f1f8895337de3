package slack

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/slack-go/slack"

	"github.com/airlockhq/airlock/bot"
	cardpkg "github.com/airlockhq/airlock/card"
)

// Working an interaction: the core answers it (bot.Interact), and what it
// says is shown here: a refusal or a notice privately, a form in a modal
// (the form rows below, one per kind of button that opens one), a click
// to work next.

// interact works a validated click or submission, after it was acknowledged.
// (A submission answered with its outcome is worked by submitAnswered
// instead.)
func (a *Adapter) interact(ctx context.Context, in interaction) {
	in.IsBot = in.User == a.identity().UserID
	if in.answered() {
		// Reached only if a caller skipped submitAnswered: answer it the
		// slow way rather than drop it.
		if ans := a.submitAnswered(ctx, in); ans.notify != "" {
			a.ephemeral(ctx, in.Channel, in.Thread, in.User, ans.notify)
		}
		return
	}
	r, err := a.bot.Interact(ctx, in.Interaction)
	switch {
	case err != nil:
		a.refused(ctx, in, err)
	case r.Then != nil:
		in.Interaction = *r.Then
		a.interact(ctx, in)
	case r.Form != nil:
		a.openForm(ctx, in, *r.Form)
	case r.Notice != "":
		a.ephemeral(ctx, in.Channel, in.Thread, in.User, r.Notice)
	}
}

// form is how a form the core asks to open is shown: view builds its
// modal, or says instead what to tell the clicker when there is nothing
// to show; failed is told when Slack did not open it; what names it in
// the log.
type form struct {
	what   string
	view   func(a *Adapter, in interaction, f bot.Form) (view slack.ModalViewRequest, instead string)
	failed string
}

// The forms, by the button that opens them (see buttonRows).
var (
	reasonForm = &form{what: "deny reason", failed: "I could not open the reason form. Use Deny, or try again.",
		view: func(_ *Adapter, in interaction, f bot.Form) (slack.ModalViewRequest, string) {
			return DenyReasonModal(in.meta(), f.Call), ""
		}}
	argsForm = &form{what: "arguments", failed: "I could not open the arguments. Try again.",
		view: func(_ *Adapter, _ interaction, f bot.Form) (slack.ModalViewRequest, string) {
			if f.Call == nil {
				return slack.ModalViewRequest{}, "This card no longer waits for a decision, so its arguments are not shown here. The audit log keeps them."
			}
			return ArgsModal(*f.Call), ""
		}}
	previewForm = &form{what: "preview", failed: "I could not open the preview. Try again.",
		view: func(_ *Adapter, _ interaction, f bot.Form) (slack.ModalViewRequest, string) {
			if f.Call == nil || f.Call.Preview == nil || !f.Call.Preview.Shown() {
				return slack.ModalViewRequest{}, "This card no longer waits for a decision, or has no preview to show."
			}
			return PreviewModal(*f.Call), ""
		}}
	// Arguments longer than Slack's input holds are not offered in a
	// form that would cut them: the clicker is told so instead.
	editForm = &form{what: "edit", failed: "I could not open the edit form. Try again. Nothing changed.",
		view: func(a *Adapter, in interaction, f bot.Form) (slack.ModalViewRequest, string) {
			if n := utf8.RuneCountInString(EditValue(f.Edit.Args)); n > MaxEditChars {
				a.log.Info("slack: arguments too large to edit", "user", in.User, "ref", in.Ref, "chars", n)
				return slack.ModalViewRequest{}, fmt.Sprintf(
					"This call's arguments are too large to edit in Slack (%s; a Slack form holds %s). Allow or deny it as it is. Nothing changed.",
					cardpkg.Characters(n), cardpkg.Characters(MaxEditChars))
			}
			return EditModal(in.meta(), f.Edit), ""
		}}
	phraseForm = &form{what: "phrase", failed: "I could not open the confirmation form. Try again. Nothing changed.",
		view: func(_ *Adapter, in interaction, f bot.Form) (slack.ModalViewRequest, string) {
			return PhraseModal(in.meta(), f.Phrase), ""
		}}
)

// openForm opens the modal of a form the core asked for, with the
// click's trigger_id.
func (a *Adapter) openForm(ctx context.Context, in interaction, f bot.Form) {
	row, _ := table.ByKind(f.Kind)
	fm := row.form
	if fm == nil {
		a.log.Error("slack: the bot asked for a form this adapter has none of", "kind", f.Kind)
		return
	}
	view, instead := fm.view(a, in, f)
	if instead != "" {
		a.ephemeral(ctx, in.Channel, in.Thread, in.User, instead)
		return
	}
	if _, err := a.api.OpenViewContext(ctx, in.TriggerID, view); err != nil {
		a.log.Error("slack: views.open ("+fm.what+")", "user", in.User, "channel", in.Channel, "ref", in.Ref, "err", err)
		a.ephemeral(ctx, in.Channel, in.Thread, in.User, fm.failed)
	}
}

// editWait is how long a submission of the edit modal waits for the bot
// before it is answered: Slack drops an answer later than 3 seconds.
const editWait = 2500 * time.Millisecond

// editAnswer is how a submission of the edit modal is answered.
type editAnswer struct {
	// errors, when set, keeps the modal open showing them under the
	// arguments: response_action "errors". Otherwise the answer is empty
	// and the modal closes.
	errors map[string]string
	// notify is told to the editor ephemerally after the answer.
	notify string
}

// payload is the answer's body: nil for an empty 200.
func (e editAnswer) payload() map[string]any {
	if len(e.errors) == 0 {
		return nil
	}
	return map[string]any{"response_action": "errors", "errors": e.errors}
}

// submitAnswered works a submission answered with its outcome (the edit
// and phrase modals': submission.answered) and says how to answer it.
// Unlike every other click, such a submission is answered only after the
// bot has judged it: an edit that does not parse, does not validate or
// that a rule refuses, or a wrong phrase, is to be shown in the modal,
// which stays open (Slack shows response_action "errors" only as the
// answer to the submission itself). So the answer waits, at most
// editWait, within Slack's 3 seconds. The work itself is not bound to
// that wait: it runs on the adapter's context, so a submission that
// completes the card and runs it is never cut short; if it is not done
// in time the modal closes and the clicker is told the outcome
// ephemerally when it fails.
func (a *Adapter) submitAnswered(ctx context.Context, in interaction) editAnswer {
	in.IsBot = in.User == a.identity().UserID
	s := in.row().submit
	what := in.Kind.String()
	return a.answerWithin(ctx, in, what, func() error { _, err := a.bot.Interact(ctx, in.Interaction); return err },
		func(err error, modalOpen bool) editAnswer { return s.answer(a, in, err, modalOpen) })
}

// answerWithin runs do (a modal's submission) and answers it with
// answer(do's error, true) when it ends within editWait; otherwise the
// modal closes (an empty answer) and, once do ends, what answer(err,
// false) would notify is told ephemerally. do runs on the adapter's
// context, never cut short by the wait.
func (a *Adapter) answerWithin(ctx context.Context, in interaction, what string, do func() error, answer func(error, bool) editAnswer) editAnswer {
	done := make(chan error, 1)
	a.wg.Add(1)
	go func() {
		defer a.wg.Done()
		defer a.finish(in.delivery) // recorded before the work, done after it
		defer func() {
			if p := recover(); p != nil {
				a.log.Error("slack: panic in a submission", "what", what, "panic", fmt.Sprint(p))
				done <- errors.New("slack: " + what + " panicked")
			}
		}()
		done <- do()
	}()
	timer := time.NewTimer(a.editWait)
	defer timer.Stop()
	select {
	case err := <-done:
		return answer(err, true)
	case <-timer.C:
	}
	a.log.Warn("slack: submission still running at the answer's deadline; the modal closes", "what", what, "user", in.User, "ref", in.Ref)
	a.wg.Add(1)
	go func() {
		defer a.wg.Done()
		if ans := answer(<-done, false); ans.notify != "" {
			a.ephemeral(ctx, in.Channel, in.Thread, in.User, ans.notify)
		}
	}()
	return editAnswer{}
}

// editAnswer says how to answer an edit's outcome: a refused edit's
// message in the modal while it is open, anything else ephemerally.
func (a *Adapter) editAnswer(in interaction, err error, modalOpen bool) editAnswer {
	log := a.log.With("user", in.User, "channel", in.Channel, "ref", in.Ref)
	var ee *bot.EditError
	switch {
	case err == nil:
		log.Info("slack: call edited")
		return editAnswer{}
	case errors.As(err, &ee):
		log.Info("slack: edit refused", "why", ee.Message)
		msg := revealClip(oneLine(ee.Message), maxEditErrorChars)
		if strings.TrimSpace(msg) == "" {
			msg = "These arguments can't be used."
		}
		if modalOpen {
			return editAnswer{errors: map[string]string{EditBlockID: msg}}
		}
		return editAnswer{notify: "Your edit was not applied: " + msg + " Nothing changed."}
	case bot.IsRefusal(err):
		log.Info("slack: edit changed nothing", "why", err)
	default:
		log.Error("slack: edit failed", "err", err)
	}
	return editAnswer{notify: bot.UserMessage(err)}
}

// phraseAnswer says how to answer the phrase modal's submission (an
// Allow with the typed phrase): a wrong or missing phrase keeps the modal
// open with the bot's message under the input; anything else closes it.
func (a *Adapter) phraseAnswer(in interaction, err error, modalOpen bool) editAnswer {
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
}

// refused answers a click that changed nothing, only to the clicker.
// Refusals (someone else's button, a second approval by the same person,
// the requester allowing their own call, a grant already revoked, ...) are
// logged as information; anything else as an error.
func (a *Adapter) refused(ctx context.Context, in interaction, err error) {
	log := a.log.With("user", in.User, "channel", in.Channel, "ref", in.Ref)
	if bot.IsRefusal(err) {
		log.Info("slack: click changed nothing", "why", err)
	} else {
		log.Error("slack: click failed", "err", err)
	}
	a.ephemeral(ctx, in.Channel, in.Thread, in.User, bot.UserMessage(err))
}
