package slack

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/slack-go/slack"

	"github.com/airlockhq/airlock/bot"
	cardpkg "github.com/airlockhq/airlock/card"
	"github.com/airlockhq/airlock/confirm"
)

// interactionKind is what a click or a modal submission asks.
type interactionKind int

const (
	kindDecide       interactionKind = iota + 1 // Allow, "Allow for 1h" or Deny
	kindOpenReason                              // "Deny with reason…": open the modal
	kindSubmitReason                            // the modal's submission: deny with the reason
	kindShowArgs                                // "Show full arguments": open the read-only modal
	kindRevoke                                  // Revoke on a grant notice
	kindExtend                                  // Extend: push the card's deadline once
	kindOpenEdit                                // Edit…: open the edit modal
	kindSubmitEdit                              // the edit modal's submission: answered synchronously
	kindChecked                                 // "I checked — go on" on an unknown run's card or thread line
	kindRun                                     // a run message's button: Stop run, Mark done, Retry (interaction.RunAction)
	kindDecideAll                               // Allow all or Deny all (interaction.Allow which)
	kindOpenPhrase                              // a critical call's Allow…: open the phrase modal
	kindSubmitPhrase                            // the phrase modal's submission: allow with the phrase, answered synchronously
	kindShowPreview                             // "Show full preview": open the read-only preview modal
)

// interaction is a validated interactivity payload.
type interaction struct {
	Kind    interactionKind
	Team    string // the workspace the click came from
	User    string // the clicker
	Channel string // where the card is
	Thread  string // the card's thread ("" at the top of a DM or a channel)
	// Message is the card message the button was on, "<channel>/<ts>"
	// (CardRef). Every block_actions click carries it; a submission
	// carries it in its private_metadata ("" only in a deny-reason modal
	// opened before cards were remembered: the bot refuses it).
	Message   string
	Ref       string // the call's opaque reference (a grant's, for kindRevoke; a checked one for kindChecked)
	Allow     bool
	Grant     bool // "Allow for 1h": allow and grant
	Reason    string
	Args      string // kindSubmitEdit: the editor's arguments, as typed
	Phrase    string // kindSubmitPhrase: the phrase as typed
	TriggerID string
	RunAction cardpkg.ActionKind // kindRun: which button
	// Replayed: worked again from the inbox (bot.Click.Replayed);
	// delivery is its inbox record, marked done when its work ends (nil:
	// not recorded).
	Replayed bool
	delivery *confirm.InboxItem
}

// interactionPayload is the wire shape of block_actions and
// view_submission. Token is Slack's deprecated verification token: it is
// ignored.
type interactionPayload struct {
	Type      string `json:"type"`
	Token     string `json:"token"` // ignored
	TriggerID string `json:"trigger_id"`
	Team      *struct {
		ID string `json:"id"`
	} `json:"team"`
	User struct {
		ID     string `json:"id"`
		TeamID string `json:"team_id"`
	} `json:"user"`
	Channel struct {
		ID string `json:"id"`
	} `json:"channel"`
	Container struct {
		Type      string `json:"type"`
		ChannelID string `json:"channel_id"`
		MessageTS string `json:"message_ts"`
		ThreadTS  string `json:"thread_ts"`
	} `json:"container"`
	Message *struct {
		TS       string `json:"ts"`
		ThreadTS string `json:"thread_ts"`
	} `json:"message"`
	Actions []struct {
		ActionID string `json:"action_id"`
		BlockID  string `json:"block_id"`
		Value    string `json:"value"`
		Type     string `json:"type"`
	} `json:"actions"`
	View *struct {
		ID              string `json:"id"`
		CallbackID      string `json:"callback_id"`
		PrivateMetadata string `json:"private_metadata"`
		State           struct {
			Values map[string]map[string]struct {
				Type  string  `json:"type"`
				Value *string `json:"value"`
			} `json:"values"`
		} `json:"state"`
	} `json:"view"`
}

// ModalMeta is the private_metadata of the deny-reason and edit modals:
// the call's reference, where its card is and the card message the
// button was on. Slack returns it unchanged with the signed submission.
// Metadata written before Message existed still decodes; the bot refuses
// a click without the card message.
type ModalMeta struct {
	Ref     string `json:"ref"`
	Channel string `json:"channel"`
	Thread  string `json:"thread,omitempty"`
	Message string `json:"message,omitempty"`
}

func (m ModalMeta) encode() string {
	b, _ := json.Marshal(m) // strings only: cannot fail
	return string(b)
}

// buttonActions are what a click on each button (by its action_id) asks.
var buttonActions = map[string]struct {
	kind         interactionKind
	allow, grant bool
	run          cardpkg.ActionKind
}{
	ActionAllow:       {kind: kindDecide, allow: true},
	ActionAllowGrant:  {kind: kindDecide, allow: true, grant: true},
	ActionRevokeGrant: {kind: kindRevoke},
	ActionDeny:        {kind: kindDecide},
	ActionDenyReason:  {kind: kindOpenReason},
	ActionShowArgs:    {kind: kindShowArgs},
	ActionPreview:     {kind: kindShowPreview},
	ActionExtend:      {kind: kindExtend},
	ActionEdit:        {kind: kindOpenEdit},
	ActionChecked:     {kind: kindChecked},
	ActionRunStop:     {kind: kindRun, run: cardpkg.ActRunStop},
	ActionRunMarkDone: {kind: kindRun, run: cardpkg.ActRunMarkDone},
	ActionRunRetry:    {kind: kindRun, run: cardpkg.ActRunRetry},
	ActionAllowAll:    {kind: kindDecideAll, allow: true},
	ActionDenyAll:     {kind: kindDecideAll},
	ActionAllowTyped:  {kind: kindOpenPhrase, allow: true},
}

// errBadInteraction marks a payload that is not one of the card's.
var errBadInteraction = errors.New("bad Slack interaction")

func badInteraction(format string, args ...any) error {
	return classed(errBadInteraction, format, args...)
}

// parseInteraction decodes and validates an interactivity payload (the
// "payload" form field over HTTP, the payload over Socket Mode). Anything
// that is not a click on a card button, on a grant notice's Revoke or the
// deny-reason submission is an error.
func parseInteraction(payload []byte) (interaction, error) {
	var p interactionPayload
	if err := json.Unmarshal(payload, &p); err != nil {
		return interaction{}, badInteraction("malformed JSON: %v", err)
	}
	if !userIDPattern.MatchString(p.User.ID) {
		return interaction{}, badInteraction("%s: missing or malformed user id", clip(p.Type, 40))
	}
	in := interaction{User: p.User.ID, Team: p.User.TeamID, TriggerID: p.TriggerID}
	if p.Team != nil && p.Team.ID != "" {
		in.Team = p.Team.ID
	}
	switch slack.InteractionType(p.Type) {
	case slack.InteractionTypeBlockActions:
		if len(p.Actions) == 0 {
			return interaction{}, badInteraction("block_actions without an action")
		}
		act := p.Actions[0]
		a, ok := buttonActions[act.ActionID]
		if !ok {
			return interaction{}, badInteraction("unknown action_id %q", clip(act.ActionID, 60))
		}
		in.Kind, in.Allow, in.Grant, in.RunAction = a.kind, a.allow, a.grant, a.run
		if in.Kind == kindRevoke {
			if _, err := confirm.ParseGrantRef(act.Value); err != nil {
				return interaction{}, badInteraction("%s: button value is not a grant reference", act.ActionID)
			}
		} else if in.Kind == kindDecideAll {
			if _, _, err := confirm.ParseAllRef(act.Value); err != nil {
				return interaction{}, badInteraction("%s: button value is not a card reference", act.ActionID)
			}
		} else if in.Kind == kindRun {
			if _, err := confirm.ParseRunRef(act.Value); err != nil {
				return interaction{}, badInteraction("%s: button value is not a run reference", act.ActionID)
			}
		} else if in.Kind == kindChecked {
			if _, _, err := confirm.ParseCheckedRef(act.Value); err != nil {
				return interaction{}, badInteraction("%s: button value is not a checked reference", act.ActionID)
			}
		} else if _, _, err := confirm.ParseRef(act.Value); err != nil {
			return interaction{}, badInteraction("%s: button value is not a call reference", act.ActionID)
		}
		in.Ref = act.Value
		in.Channel = p.Channel.ID
		if in.Channel == "" {
			in.Channel = p.Container.ChannelID
		}
		if !channelIDPattern.MatchString(in.Channel) {
			return interaction{}, badInteraction("%s: missing or malformed channel", act.ActionID)
		}
		if p.Container.ChannelID != "" && p.Container.ChannelID != in.Channel {
			return interaction{}, badInteraction("%s: the message's channel is not the click's", act.ActionID)
		}
		// The message the button was on: every button of Airlock's is on
		// a message it posted, and a click counts only on such a message.
		ts := p.Container.MessageTS
		if p.Message != nil && p.Message.TS != "" {
			if ts != "" && ts != p.Message.TS {
				return interaction{}, badInteraction("%s: container and message disagree on the message", act.ActionID)
			}
			ts = p.Message.TS
		}
		if !tsPattern.MatchString(ts) {
			return interaction{}, badInteraction("%s: missing or malformed message ts", act.ActionID)
		}
		in.Message = CardRef(in.Channel, ts)
		if p.Message != nil && p.Message.ThreadTS != "" {
			in.Thread = p.Message.ThreadTS
		} else {
			in.Thread = p.Container.ThreadTS
		}
		if in.Thread != "" && !tsPattern.MatchString(in.Thread) {
			return interaction{}, badInteraction("%s: malformed thread_ts", act.ActionID)
		}
		if (in.Kind == kindOpenReason || in.Kind == kindShowArgs || in.Kind == kindShowPreview || in.Kind == kindOpenEdit || in.Kind == kindOpenPhrase) && in.TriggerID == "" {
			return interaction{}, badInteraction("%s: missing trigger_id", act.ActionID)
		}
	case slack.InteractionTypeViewSubmission:
		if p.View == nil {
			return interaction{}, badInteraction("view_submission without a view")
		}
		var blockID, actionID string
		switch p.View.CallbackID {
		case CallbackDenyReason:
			in.Kind, blockID, actionID = kindSubmitReason, reasonBlockID, reasonActionID
		case CallbackEdit:
			in.Kind, blockID, actionID = kindSubmitEdit, EditBlockID, editActionID
		case CallbackPhrase:
			in.Kind, blockID, actionID = kindSubmitPhrase, PhraseBlockID, phraseActionID
		default:
			return interaction{}, badInteraction("view_submission of unknown view %q", clip(p.View.CallbackID, 60))
		}
		var meta ModalMeta
		if err := json.Unmarshal([]byte(p.View.PrivateMetadata), &meta); err != nil {
			return interaction{}, badInteraction("view_submission: malformed private_metadata")
		}
		if _, _, err := confirm.ParseRef(meta.Ref); err != nil {
			return interaction{}, badInteraction("view_submission: private_metadata holds no call reference")
		}
		if !channelIDPattern.MatchString(meta.Channel) {
			return interaction{}, badInteraction("view_submission: private_metadata holds no channel")
		}
		if meta.Thread != "" && !tsPattern.MatchString(meta.Thread) {
			return interaction{}, badInteraction("view_submission: malformed thread in private_metadata")
		}
		switch {
		case meta.Message == "" && (in.Kind == kindSubmitEdit || in.Kind == kindSubmitPhrase):
			return interaction{}, badInteraction("view_submission: private_metadata holds no card message")
		case meta.Message != "":
			ch, _, err := ParseCardRef(meta.Message)
			if err != nil || ch != meta.Channel {
				return interaction{}, badInteraction("view_submission: malformed card message in private_metadata")
			}
		}
		field, ok := p.View.State.Values[blockID][actionID]
		if !ok || field.Value == nil {
			return interaction{}, badInteraction("view_submission without a value")
		}
		in.Ref, in.Channel, in.Thread, in.Message = meta.Ref, meta.Channel, meta.Thread, meta.Message
		if in.Kind == kindSubmitEdit {
			// Slack's input holds at most MaxEditChars: a longer value was
			// not typed in the modal.
			if utf8.RuneCountInString(*field.Value) > MaxEditChars {
				return interaction{}, badInteraction("view_submission: arguments longer than the form holds")
			}
			in.Args = strings.TrimSpace(*field.Value) // blank: the bot says it is no JSON, in the modal
		} else if in.Kind == kindSubmitPhrase {
			if utf8.RuneCountInString(*field.Value) > maxPhraseInput {
				return interaction{}, badInteraction("view_submission: a phrase longer than the form holds")
			}
			in.Allow, in.Phrase = true, *field.Value // the bot trims and compares
		} else {
			in.Reason = strings.TrimSpace(*field.Value)
		}
	case "":
		return interaction{}, badInteraction("no type")
	default:
		return interaction{}, badInteraction("unsupported interaction type %q", clip(p.Type, 40))
	}
	return in, nil
}

// click is the bot's view of a validated interaction.
func (a *Adapter) click(in interaction) bot.Click {
	return bot.Click{
		Platform: Platform,
		Channel:  in.Channel,
		Message:  in.Message,
		User:     in.User,
		Ref:      in.Ref,
		Allow:    in.Allow,
		Grant:    in.Grant,
		Reason:   in.Reason,
		Phrase:   in.Phrase,
		IsBot:    in.User == a.identity().UserID,
		Replayed: in.Replayed,
	}
}

// handleInteraction works a validated click or submission, after it was
// acknowledged. (The edit modal's submission is answered with its
// outcome instead: see submitEdit.)
func (a *Adapter) handleInteraction(ctx context.Context, in interaction) {
	log := a.log.With("user", in.User, "channel", in.Channel, "ref", in.Ref)
	switch in.Kind {
	case kindDecide, kindSubmitReason:
		if err := a.bot.Decide(ctx, a.click(in)); err != nil {
			a.refused(ctx, in, err)
		}
	case kindRevoke:
		c := a.click(in)
		c.Allow, c.Grant, c.Reason = false, false, ""
		if err := a.bot.Revoke(ctx, c); err != nil {
			a.refused(ctx, in, err)
		}
	case kindExtend:
		if err := a.bot.Extend(ctx, a.click(in)); err != nil {
			a.refused(ctx, in, err)
		}
	case kindChecked:
		if err := a.bot.MarkChecked(ctx, a.click(in)); err != nil {
			a.refused(ctx, in, err)
		}
	case kindRun:
		if err := a.bot.RunAction(ctx, a.click(in), in.RunAction); err != nil {
			a.refused(ctx, in, err)
		}
	case kindDecideAll:
		res, err := a.bot.DecideAll(ctx, a.click(in))
		if err != nil {
			a.refused(ctx, in, err)
			return
		}
		a.ephemeral(ctx, in.Channel, in.Thread, in.User, res.Message())
	case kindOpenEdit:
		a.openEdit(ctx, in)
	case kindOpenPhrase:
		a.openPhrase(ctx, in)
	case kindSubmitEdit, kindSubmitPhrase:
		// Reached only if a caller skipped submitAnswered: answer it the
		// slow way rather than drop it.
		if ans := a.submitAnswered(ctx, in); ans.notify != "" {
			a.ephemeral(ctx, in.Channel, in.Thread, in.User, ans.notify)
		}
	case kindOpenReason:
		var call *cardpkg.Call
		card, err := a.clickedCard(ctx, in)
		if errors.Is(err, bot.ErrStaleRevision) {
			a.refused(ctx, in, err)
			return
		}
		if err == nil {
			call = card.Call(in.Ref)
		}
		if call != nil && !call.Open() {
			a.refused(ctx, in, bot.ErrAlreadyClosed)
			return
		}
		meta := ModalMeta{Ref: in.Ref, Channel: in.Channel, Thread: in.Thread, Message: in.Message}
		if _, err := a.api.OpenViewContext(ctx, in.TriggerID, DenyReasonModal(meta, call)); err != nil {
			log.Error("slack: views.open (deny reason)", "err", err)
			a.ephemeral(ctx, in.Channel, in.Thread, in.User, "I could not open the reason form. Use Deny, or try again.")
		}
	case kindShowArgs:
		card, err := a.clickedCard(ctx, in)
		if errors.Is(err, bot.ErrStaleRevision) {
			a.refused(ctx, in, err)
			return
		}
		if err != nil && !errors.Is(err, confirm.ErrNotFound) {
			log.Error("slack: load card for arguments", "err", err)
		}
		call := card.Call(in.Ref)
		if call == nil {
			a.ephemeral(ctx, in.Channel, in.Thread, in.User, "This card no longer waits for a decision, so its arguments are not shown here. The audit log keeps them.")
			return
		}
		if _, err := a.api.OpenViewContext(ctx, in.TriggerID, ArgsModal(*call)); err != nil {
			log.Error("slack: views.open (arguments)", "err", err)
			a.ephemeral(ctx, in.Channel, in.Thread, in.User, "I could not open the arguments. Try again.")
		}
	case kindShowPreview:
		a.showPreview(ctx, in)
	}
}

// clickedCard is the waiting card a click was on, wherever it was posted:
// in the conversation's thread, an approvals channel or a DM copy.
func (a *Adapter) clickedCard(ctx context.Context, in interaction) (*cardpkg.Card, error) {
	return a.bot.ClickedCard(ctx, a.click(in))
}

// openEdit answers Edit…: the bot checks that the clicker may decide the
// call and gives its arguments, which open in the edit modal. Arguments
// longer than Slack's input holds are not offered in a form that would
// cut them: the clicker is told so instead.
func (a *Adapter) openEdit(ctx context.Context, in interaction) {
	form, err := a.bot.EditForm(ctx, a.click(in))
	if err != nil {
		a.refused(ctx, in, err)
		return
	}
	if n := utf8.RuneCountInString(EditValue(form.Args)); n > MaxEditChars {
		a.log.Info("slack: arguments too large to edit", "user", in.User, "ref", in.Ref, "chars", n)
		a.ephemeral(ctx, in.Channel, in.Thread, in.User, fmt.Sprintf(
			"This call's arguments are too large to edit in Slack (%s; a Slack form holds %s). Allow or deny it as it is. Nothing changed.",
			cardpkg.Characters(n), cardpkg.Characters(MaxEditChars)))
		return
	}
	meta := ModalMeta{Ref: in.Ref, Channel: in.Channel, Thread: in.Thread, Message: in.Message}
	if _, err := a.api.OpenViewContext(ctx, in.TriggerID, EditModal(meta, form)); err != nil {
		a.log.Error("slack: views.open (edit)", "user", in.User, "ref", in.Ref, "err", err)
		a.ephemeral(ctx, in.Channel, in.Thread, in.User, "I could not open the edit form. Try again. Nothing changed.")
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

// submitEdit applies the edit modal's submission with bot.Edit and says
// how to answer it. Unlike every other click, the submission is answered
// only after the bot has judged the edit: the issue wants an edit that
// does not parse, does not validate or that a rule refuses to be shown in
// the modal, which stays open (Slack shows response_action "errors" only
// as the answer to the submission itself). So the answer waits, at most
// editWait, within Slack's 3 seconds. The edit itself is not bound to
// that wait: it runs on the adapter's context, so an edit that completes
// the card and runs it is never cut short; if it is not done in time the
// modal closes and the editor is told the outcome ephemerally when it
// fails.
func (a *Adapter) submitEdit(ctx context.Context, in interaction) editAnswer {
	return a.answerWithin(ctx, in, "edit", func() error { return a.bot.Edit(ctx, a.click(in), in.Args) },
		func(err error, modalOpen bool) editAnswer { return a.editAnswer(in, err, modalOpen) })
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
