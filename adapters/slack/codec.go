package slack

import (
	"encoding/json"
	"errors"
	"strings"
	"unicode/utf8"

	"github.com/slack-go/slack"

	"github.com/airlockhq/airlock/adapters/internal/buttonindex"
	"github.com/airlockhq/airlock/bot"
	cardpkg "github.com/airlockhq/airlock/card"
	"github.com/airlockhq/airlock/confirm"
)

// The codec: an interactivity payload (a click on a button, a modal's
// submission) decoded into the neutral bot.Interaction through one table,
// buttonRows, of a row per kind of button.

// Action ids of the buttons, callback ids of the modals and the ids of
// their inputs. Every button carries the opaque reference its kind takes
// (card.Button.Ref) as its value, never the tool name or the arguments.
// These are wire strings: cards already posted keep working only while
// they stay as they are.
const (
	ActionAllow       = "airlock_allow"         // style primary; the only primary button
	ActionAllowGrant  = "airlock_allow_grant"   // no style: "Allow for 1h", allow and grant later calls of the tool in the thread
	ActionDeny        = "airlock_deny"          // style danger; the only danger button
	ActionDenyReason  = "airlock_deny_reason"   // no style: opens the deny-reason modal
	ActionShowArgs    = "airlock_show_args"     // no style: opens a modal with the whole arguments
	ActionRevokeGrant = "airlock_revoke_grant"  // no style, on a grant notice: revokes the grant
	ActionEdit        = "airlock_edit"          // no style: "Edit…" opens the edit modal (value: the call's reference)
	ActionExtend      = "airlock_extend"        // no style, once per card: "Extend 30m" (value: Card.ExtendRef)
	ActionChecked     = "airlock_checked"       // no style: "I checked — go on" on an unknown run (value: its confirm.CheckedRef)
	ActionRunStop     = "airlock_run_stop"      // style danger, on a run message: "Stop run" (value: confirm.RunRef)
	ActionRunMarkDone = "airlock_run_mark_done" // style primary, on a halted run's message: "Mark done"
	ActionRunRetry    = "airlock_run_retry"     // no style, on a halted run's message: "Retry"
	ActionAllowAll    = "airlock_allow_all"     // no style, on a card of 2+ waiting calls: allow every one the clicker may (value: confirm.AllRef)
	ActionDenyAll     = "airlock_deny_all"      // no style, beside it: deny every one the clicker may (value: confirm.AllRef)
	ActionPreview     = "airlock_preview"       // no style: "Show full preview" opens a modal with the whole preview (value: the call's reference)
	// ActionAllowTyped is a critical call's "Allow…" (style primary, in
	// Allow's place; value: the call's reference): opens the phrase modal.
	ActionAllowTyped = "airlock_allow_typed"

	// CallbackDenyReason is the callback_id of the deny-reason modal.
	CallbackDenyReason = "airlock_deny_reason"
	// CallbackShowArgs is the callback_id of the read-only arguments modal.
	CallbackShowArgs = "airlock_show_args"
	// CallbackPreview is the callback_id of the read-only preview modal.
	CallbackPreview = "airlock_preview"
	// CallbackEdit is the callback_id of the edit modal.
	CallbackEdit = "airlock_edit"
	// CallbackPhrase is the callback_id of the phrase modal.
	CallbackPhrase = "airlock_phrase"

	reasonBlockID  = "airlock_reason"
	reasonActionID = "airlock_reason_input"

	// EditBlockID is the edit modal's input block: a refused edit's
	// message is answered under it (response_action "errors").
	EditBlockID  = "airlock_edit_args"
	editActionID = "airlock_edit_args_input"

	// PhraseBlockID is the phrase modal's input block: a wrong phrase is
	// answered under it (response_action "errors").
	PhraseBlockID  = "airlock_phrase"
	phraseActionID = "airlock_phrase_input"
)

// buttonRow is Slack's row of a kind of button: its action_id and, for a
// button that opens a form, how that form is shown (see forms.go) and,
// when it comes back submitted, how its submission is read.
type buttonRow struct {
	kind     cardpkg.ActionKind
	actionID string
	form     *form
	submit   *submission
}

// submission is how a modal's submission is read: its callback_id, the
// input holding its value, the most characters that input holds (0: no
// bound), whether the value is trimmed, whether metadata written before
// the card message was remembered is taken (the bot refuses it), and
// whether it is answered with its outcome rather than acknowledged at once
// (response_action "errors" keeps the modal open: see answerWithin).
type submission struct {
	callbackID      string
	block, action   string
	maxRunes        int
	trim            bool
	messageOptional bool
	// fields: a form of several inputs (blocks answerBlockID(0), (1), …,
	// each holding at most confirm.MaxFieldChars), read in order as the
	// interaction's Values.
	fields   bool
	answered bool
	answer   func(a *Adapter, in interaction, err error, modalOpen bool) editAnswer
}

// buttonRows are Slack's rows, one per kind of button Airlock posts here.
var buttonRows = []buttonRow{
	{kind: cardpkg.ActAllow, actionID: ActionAllow},
	{kind: cardpkg.ActAllowGrant, actionID: ActionAllowGrant},
	{kind: cardpkg.ActDeny, actionID: ActionDeny},
	{kind: cardpkg.ActDenyReason, actionID: ActionDenyReason, form: reasonForm,
		submit: &submission{callbackID: CallbackDenyReason, block: reasonBlockID, action: reasonActionID, trim: true, messageOptional: true}},
	{kind: cardpkg.ActShowArgs, actionID: ActionShowArgs, form: argsForm},
	{kind: cardpkg.ActRevoke, actionID: ActionRevokeGrant},
	{kind: cardpkg.ActEdit, actionID: ActionEdit, form: editForm,
		// Slack's input holds at most MaxEditChars; blank arguments are
		// the bot's to call no JSON, in the modal.
		submit: &submission{callbackID: CallbackEdit, block: EditBlockID, action: editActionID, maxRunes: MaxEditChars, trim: true,
			answered: true, answer: (*Adapter).editAnswer}},
	{kind: cardpkg.ActExtend, actionID: ActionExtend},
	{kind: cardpkg.ActChecked, actionID: ActionChecked},
	{kind: cardpkg.ActRunStop, actionID: ActionRunStop},
	{kind: cardpkg.ActRunMarkDone, actionID: ActionRunMarkDone},
	{kind: cardpkg.ActRunRetry, actionID: ActionRunRetry},
	{kind: cardpkg.ActAllowAll, actionID: ActionAllowAll},
	{kind: cardpkg.ActDenyAll, actionID: ActionDenyAll},
	{kind: cardpkg.ActShowPreview, actionID: ActionPreview, form: previewForm},
	{kind: cardpkg.ActAnswer, actionID: ActionAnswer, form: answerForm,
		submit: &submission{callbackID: CallbackAnswer, fields: true, answered: true, answer: (*Adapter).answerAnswer}},
	{kind: cardpkg.ActDecline, actionID: ActionDecline},
	{kind: cardpkg.ActAllowTyped, actionID: ActionAllowTyped, form: phraseForm,
		// The phrase is the bot's to trim and compare.
		submit: &submission{callbackID: CallbackPhrase, block: PhraseBlockID, action: phraseActionID, maxRunes: maxPhraseInput,
			answered: true, answer: (*Adapter).phraseAnswer}},
}

// table is buttonRows indexed: by action_id, by callback_id (a
// namespace of its own), by kind.
var table *buttonindex.Index[buttonRow]

func init() {
	table = buttonindex.Must(buttonRows, func(r buttonRow) buttonindex.Keys {
		k := buttonindex.Keys{Kind: r.kind, Action: r.actionID}
		if r.submit != nil {
			k.Submit = r.submit.callbackID
		}
		return k
	}, buttonindex.Separate)
}

// interaction is a validated interactivity payload: the neutral
// interaction, and what only Slack has.
type interaction struct {
	bot.Interaction
	Team      string // the workspace the click came from
	TriggerID string // opens a modal, within 3 seconds of the click
	// delivery is its inbox record, marked done when its work ends (nil:
	// not recorded).
	delivery *confirm.InboxItem
}

// row is the interaction's row of the table.
func (in interaction) row() buttonRow { r, _ := table.ByKind(in.Kind); return r }

// answered reports whether the interaction is a submission answered with
// its outcome, not acknowledged at once (see submission.answered).
func (in interaction) answered() bool {
	s := in.row().submit
	return in.Submit && s != nil && s.answered
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

// ModalMeta is the private_metadata of the deny-reason, edit and phrase
// modals: the call's reference, where its card is and the card message
// the button was on. Slack returns it unchanged with the signed
// submission. Metadata written before Message existed still decodes; the
// bot refuses a click without the card message.
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

// meta is the metadata of a modal opened from the interaction's button.
func (in interaction) meta() ModalMeta {
	return ModalMeta{Ref: in.Ref, Channel: in.Channel, Thread: in.Thread, Message: in.Message}
}

// errBadInteraction marks a payload that is not one of the card's.
var errBadInteraction = errors.New("bad Slack interaction")

func badInteraction(format string, args ...any) error {
	return classed(errBadInteraction, format, args...)
}

// parseInteraction decodes and validates an interactivity payload (the
// "payload" form field over HTTP, the payload over Socket Mode). Anything
// that is not a click on one of Airlock's buttons or the submission of a
// modal one opened is an error.
func parseInteraction(payload []byte) (interaction, error) {
	var p interactionPayload
	if err := json.Unmarshal(payload, &p); err != nil {
		return interaction{}, badInteraction("malformed JSON: %v", err)
	}
	if !userIDPattern.MatchString(p.User.ID) {
		return interaction{}, badInteraction("%s: missing or malformed user id", clip(p.Type, 40))
	}
	in := interaction{Interaction: bot.Interaction{Platform: Platform, User: p.User.ID}, Team: p.User.TeamID, TriggerID: p.TriggerID}
	if p.Team != nil && p.Team.ID != "" {
		in.Team = p.Team.ID
	}
	var err error
	switch slack.InteractionType(p.Type) {
	case slack.InteractionTypeBlockActions:
		err = parseClick(&p, &in)
	case slack.InteractionTypeViewSubmission:
		err = parseSubmission(&p, &in)
	case "":
		err = badInteraction("no type")
	default:
		err = badInteraction("unsupported interaction type %q", clip(p.Type, 40))
	}
	if err != nil {
		return interaction{}, err
	}
	return in, nil
}

// parseClick reads a block_actions payload: the button (by its
// action_id's row), its reference (by its kind), and the message it was
// on, in its channel and thread.
func parseClick(p *interactionPayload, in *interaction) error {
	if len(p.Actions) == 0 {
		return badInteraction("block_actions without an action")
	}
	act := p.Actions[0]
	b, ok := table.ByAction(act.ActionID)
	if !ok {
		return badInteraction("unknown action_id %q", clip(act.ActionID, 60))
	}
	row, _ := b.kind.Button()
	if err := b.kind.ParseRef(act.Value); err != nil {
		return badInteraction("%s: button value is not a %s reference", act.ActionID, row.Ref)
	}
	in.Kind, in.Ref = b.kind, act.Value
	in.Channel = p.Channel.ID
	if in.Channel == "" {
		in.Channel = p.Container.ChannelID
	}
	if !channelIDPattern.MatchString(in.Channel) {
		return badInteraction("%s: missing or malformed channel", act.ActionID)
	}
	if p.Container.ChannelID != "" && p.Container.ChannelID != in.Channel {
		return badInteraction("%s: the message's channel is not the click's", act.ActionID)
	}
	// The message the button was on: every button of Airlock's is on a
	// message it posted, and a click counts only on such a message.
	ts := p.Container.MessageTS
	if p.Message != nil && p.Message.TS != "" {
		if ts != "" && ts != p.Message.TS {
			return badInteraction("%s: container and message disagree on the message", act.ActionID)
		}
		ts = p.Message.TS
	}
	if !tsPattern.MatchString(ts) {
		return badInteraction("%s: missing or malformed message ts", act.ActionID)
	}
	in.Message = CardRef(in.Channel, ts)
	if p.Message != nil && p.Message.ThreadTS != "" {
		in.Thread = p.Message.ThreadTS
	} else {
		in.Thread = p.Container.ThreadTS
	}
	if in.Thread != "" && !tsPattern.MatchString(in.Thread) {
		return badInteraction("%s: malformed thread_ts", act.ActionID)
	}
	if row.Opens && in.TriggerID == "" {
		return badInteraction("%s: missing trigger_id", act.ActionID)
	}
	return nil
}

// parseFields reads the inputs of a form of several, in order: an input
// left empty (an optional one) is "", one longer than it holds or past the
// most a form has is refused.
func parseFields(p *interactionPayload, in *interaction) error {
	for i := 0; ; i++ {
		block, ok := p.View.State.Values[answerBlockID(i)]
		if !ok {
			break
		}
		if i == confirm.MaxQuestionFields {
			return badInteraction("view_submission: more inputs than a form holds")
		}
		v := ""
		if f, ok := block[answerActionID]; ok && f.Value != nil {
			v = *f.Value
		}
		if utf8.RuneCountInString(v) > confirm.MaxFieldChars {
			return badInteraction("view_submission: a value longer than the form holds")
		}
		in.Values = append(in.Values, v)
	}
	if len(p.View.State.Values) != len(in.Values) {
		return badInteraction("view_submission: inputs the form does not have")
	}
	return nil
}

// parseSubmission reads a view_submission payload: the modal (by its
// callback_id's row), the call, card and card message its metadata
// names, and the value of its input.
func parseSubmission(p *interactionPayload, in *interaction) error {
	if p.View == nil {
		return badInteraction("view_submission without a view")
	}
	b, ok := table.BySubmit(p.View.CallbackID)
	if !ok {
		return badInteraction("view_submission of unknown view %q", clip(p.View.CallbackID, 60))
	}
	s := b.submit
	var meta ModalMeta
	if err := json.Unmarshal([]byte(p.View.PrivateMetadata), &meta); err != nil {
		return badInteraction("view_submission: malformed private_metadata")
	}
	if err := b.kind.ParseRef(meta.Ref); err != nil {
		row, _ := b.kind.Button()
		return badInteraction("view_submission: private_metadata holds no %s reference", row.Ref)
	}
	if !channelIDPattern.MatchString(meta.Channel) {
		return badInteraction("view_submission: private_metadata holds no channel")
	}
	if meta.Thread != "" && !tsPattern.MatchString(meta.Thread) {
		return badInteraction("view_submission: malformed thread in private_metadata")
	}
	switch {
	case meta.Message == "" && !s.messageOptional:
		return badInteraction("view_submission: private_metadata holds no card message")
	case meta.Message != "":
		ch, _, err := ParseCardRef(meta.Message)
		if err != nil || ch != meta.Channel {
			return badInteraction("view_submission: malformed card message in private_metadata")
		}
	}
	in.Kind, in.Submit = b.kind, true
	in.Ref, in.Channel, in.Thread, in.Message = meta.Ref, meta.Channel, meta.Thread, meta.Message
	if s.fields {
		return parseFields(p, in)
	}
	field, ok := p.View.State.Values[s.block][s.action]
	if !ok || field.Value == nil {
		return badInteraction("view_submission without a value")
	}
	if s.maxRunes > 0 && utf8.RuneCountInString(*field.Value) > s.maxRunes {
		return badInteraction("view_submission: a value longer than the form holds")
	}
	in.Value = *field.Value
	if s.trim {
		in.Value = strings.TrimSpace(in.Value)
	}
	return nil
}
