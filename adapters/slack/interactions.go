package slack

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

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
)

// interaction is a validated interactivity payload.
type interaction struct {
	Kind      interactionKind
	Team      string // the workspace the click came from
	User      string // the clicker
	Channel   string // where the card is
	Thread    string // the card's thread ("" at the top of a DM)
	Ref       string // the call's opaque reference (a grant's, for kindRevoke)
	Allow     bool
	Grant     bool // "Allow for 1h": allow and grant
	Reason    string
	TriggerID string
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

// ModalMeta is the deny-reason modal's private_metadata: the call's
// reference and where its card is. Slack returns it unchanged with the
// signed submission.
type ModalMeta struct {
	Ref     string `json:"ref"`
	Channel string `json:"channel"`
	Thread  string `json:"thread,omitempty"`
}

func (m ModalMeta) encode() string {
	b, _ := json.Marshal(m) // strings only: cannot fail
	return string(b)
}

// errBadInteraction marks a payload that is not one of the card's.
var errBadInteraction = errors.New("bad Slack interaction")

func badInteraction(format string, args ...any) error {
	return fmt.Errorf("%w: %s", errBadInteraction, fmt.Sprintf(format, args...))
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
		switch act.ActionID {
		case ActionAllow:
			in.Kind, in.Allow = kindDecide, true
		case ActionAllowGrant:
			in.Kind, in.Allow, in.Grant = kindDecide, true, true
		case ActionRevokeGrant:
			in.Kind = kindRevoke
		case ActionDeny:
			in.Kind = kindDecide
		case ActionDenyReason:
			in.Kind = kindOpenReason
		case ActionShowArgs:
			in.Kind = kindShowArgs
		default:
			return interaction{}, badInteraction("unknown action_id %q", clip(act.ActionID, 60))
		}
		if in.Kind == kindRevoke {
			if _, err := confirm.ParseGrantRef(act.Value); err != nil {
				return interaction{}, badInteraction("%s: button value is not a grant reference", act.ActionID)
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
		if p.Message != nil && p.Message.ThreadTS != "" {
			in.Thread = p.Message.ThreadTS
		} else {
			in.Thread = p.Container.ThreadTS
		}
		if in.Thread != "" && !tsPattern.MatchString(in.Thread) {
			return interaction{}, badInteraction("%s: malformed thread_ts", act.ActionID)
		}
		if (in.Kind == kindOpenReason || in.Kind == kindShowArgs) && in.TriggerID == "" {
			return interaction{}, badInteraction("%s: missing trigger_id", act.ActionID)
		}
	case slack.InteractionTypeViewSubmission:
		if p.View == nil {
			return interaction{}, badInteraction("view_submission without a view")
		}
		if p.View.CallbackID != CallbackDenyReason {
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
		field, ok := p.View.State.Values[reasonBlockID][reasonActionID]
		if !ok || field.Value == nil {
			return interaction{}, badInteraction("view_submission without a reason")
		}
		in.Kind, in.Ref, in.Channel, in.Thread = kindSubmitReason, meta.Ref, meta.Channel, meta.Thread
		in.Reason = strings.TrimSpace(*field.Value)
	case "":
		return interaction{}, badInteraction("no type")
	default:
		return interaction{}, badInteraction("unsupported interaction type %q", clip(p.Type, 40))
	}
	return in, nil
}

// handleInteraction works a validated click or submission.
func (a *Adapter) handleInteraction(ctx context.Context, in interaction) {
	log := a.log.With("user", in.User, "channel", in.Channel, "ref", in.Ref)
	switch in.Kind {
	case kindDecide, kindSubmitReason:
		click := bot.Click{
			Platform: Platform,
			Channel:  in.Channel,
			User:     in.User,
			Ref:      in.Ref,
			Allow:    in.Allow,
			Grant:    in.Grant,
			Reason:   in.Reason,
			IsBot:    in.User == a.identity().UserID,
		}
		if err := a.bot.Decide(ctx, click); err != nil {
			a.refused(ctx, in, err)
		}
	case kindRevoke:
		click := bot.Click{
			Platform: Platform,
			Channel:  in.Channel,
			User:     in.User,
			Ref:      in.Ref,
			IsBot:    in.User == a.identity().UserID,
		}
		if err := a.bot.Revoke(ctx, click); err != nil {
			a.refused(ctx, in, err)
		}
	case kindOpenReason:
		var call *cardpkg.Call
		if card, err := a.bot.PendingCard(ctx, bot.Thread{Platform: Platform, Channel: in.Channel, Thread: in.Thread}); err == nil {
			call = findCall(card, in.Ref)
		}
		if call != nil && !call.Open() {
			a.refused(ctx, in, bot.ErrAlreadyClosed)
			return
		}
		meta := ModalMeta{Ref: in.Ref, Channel: in.Channel, Thread: in.Thread}
		if _, err := a.api.OpenViewContext(ctx, in.TriggerID, DenyReasonModal(meta, call)); err != nil {
			log.Error("slack: views.open (deny reason)", "err", err)
			a.ephemeral(ctx, in.Channel, in.Thread, in.User, "I could not open the reason form. Use Deny, or try again.")
		}
	case kindShowArgs:
		card, err := a.bot.PendingCard(ctx, bot.Thread{Platform: Platform, Channel: in.Channel, Thread: in.Thread})
		if err != nil && !errors.Is(err, confirm.ErrNotFound) {
			log.Error("slack: load card for arguments", "err", err)
		}
		call := findCall(card, in.Ref)
		if call == nil {
			a.ephemeral(ctx, in.Channel, in.Thread, in.User, "This card no longer waits for a decision, so its arguments are not shown here. The audit log keeps them.")
			return
		}
		if _, err := a.api.OpenViewContext(ctx, in.TriggerID, ArgsModal(*call)); err != nil {
			log.Error("slack: views.open (arguments)", "err", err)
			a.ephemeral(ctx, in.Channel, in.Thread, in.User, "I could not open the arguments. Try again.")
		}
	}
}

// refused answers a click that changed nothing, only to the clicker.
// Refusals (someone else's button, a second approval by the same person,
// the requester allowing their own call, a grant already revoked, ...) are
// logged as information; anything else as an error.
func (a *Adapter) refused(ctx context.Context, in interaction, err error) {
	log := a.log.With("user", in.User, "channel", in.Channel, "ref", in.Ref)
	if refusal(err) {
		log.Info("slack: click changed nothing", "why", err)
	} else {
		log.Error("slack: click failed", "err", err)
	}
	a.ephemeral(ctx, in.Channel, in.Thread, in.User, bot.UserMessage(err))
}

// refusal reports whether err is the bot refusing a click (nothing
// changed, nothing failed).
func refusal(err error) bool {
	for _, e := range []error{
		bot.ErrNotApprover, bot.ErrAlreadyClosed, bot.ErrWrongChannel, bot.ErrSelfApproval,
		bot.ErrAlreadyVoted, bot.ErrNotGrantable, bot.ErrGrantNotActive,
		confirm.ErrBadRef, confirm.ErrNotFound,
	} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

func findCall(card *cardpkg.Card, ref string) *cardpkg.Call {
	if card == nil {
		return nil
	}
	for i := range card.Calls {
		if card.Calls[i].Ref == ref {
			return &card.Calls[i]
		}
	}
	return nil
}
