package bot

import (
	"context"
	"errors"
	"fmt"

	"github.com/airlockhq/airlock/card"
	"github.com/airlockhq/airlock/confirm"
)

// Interaction is a click on a button Airlock posted, or the submission of
// the form such a click opened, as every platform decodes it: who, where,
// which button (its kind and the reference it carried) and what the form
// held. Adapters decode their payloads into it through a table (a row per
// kind); Interact works it.
type Interaction struct {
	Platform string
	User     string   // platform user id of the person
	Roles    []string // their roles where the platform has them (Discord)
	IsBot    bool     // clicks by bots are refused
	Channel  string   // the conversation's channel (a thread's parent)
	Thread   string   // the thread the message is in, "" for none: where private answers go
	// Message is the platform's reference of the message the button was
	// on (Click.Message); a form's submission carries the one its button
	// was on.
	Message string
	Kind    card.ActionKind
	Ref     string // the reference the button carried
	// Submit: the submission of the form Kind's button opened
	// (card.Button.Submits), with its Value.
	Submit bool
	// Value is what the person typed, as typed: a submitted form's (the
	// reason of Deny with reason…, the arguments of Edit…, the phrase of
	// Allow…) or a command's (the terminal's /deny N reason).
	Value string
	// Values are the inputs of a submitted form of several (a server's
	// question's Answer…), in the form's order.
	Values []string
	// Replayed: worked again from the inbox (Click.Replayed).
	Replayed bool
}

// click is the core's view of the interaction, without a decision.
func (in Interaction) click() Click {
	return Click{Platform: in.Platform, Channel: in.Channel, Message: in.Message, User: in.User, Ref: in.Ref,
		Roles: in.Roles, IsBot: in.IsBot, Replayed: in.Replayed}
}

// Reply is what to show the person after their interaction counted:
// nothing, a private notice, a form to open, or another interaction to
// work as a click acknowledged at once. A refusal is Interact's error
// instead (told privately, with UserMessage).
type Reply struct {
	// Notice is told to the person privately ("" for nothing).
	Notice string
	// Form is a form or a view to open (nil for none).
	Form *Form
	// Then is worked next, as a click acknowledged at once: a critical
	// call's Allow… on a card older than the call's tier asks no phrase
	// and is a plain Allow.
	Then *Interaction
}

// Form is what a click that opens a form or a view gets: Kind is the
// button that opened it, whose submission comes back with Submit set.
// Renderers lay it out in their own form (a Slack modal, a Discord modal
// or ephemeral reply, lines in the terminal).
type Form struct {
	Kind   card.ActionKind
	Ref    string // the reference its submission carries
	Number int    // the call's number on its card
	// Call is the call as its card shows it, for the reason form (nil
	// when its card could not be loaded: the submission is judged then)
	// and the full arguments and preview views (nil: the card no longer
	// waits, nothing to show).
	Call     *card.Call
	Edit     EditForm            // ActEdit: what the edit form shows
	Phrase   PhrasePrompt        // ActAllowTyped: what the phrase form asks
	Question card.QuestionNotice // ActAnswer: the question its form answers (card.AnswerForm)
}

// Buttons are the core's answers to clicks, one per kind of work;
// Dispatch maps an interaction to them. *Bot has them.
type Buttons interface {
	Decide(ctx context.Context, c Click) error
	// DecideAll is a card's Allow all or Deny all (c.Allow which).
	DecideAll(ctx context.Context, c Click) (AllResult, error)
	Revoke(ctx context.Context, c Click) error
	// Extend pushes a card's deadline once (Extend).
	Extend(ctx context.Context, c Click) error
	// MarkChecked marks a run whose outcome is unknown checked ("I
	// checked — go on" on its card or its thread line).
	MarkChecked(ctx context.Context, c Click) error
	// RunAction works a run message's button (Stop run, Mark done,
	// Retry).
	RunAction(ctx context.Context, c Click, kind card.ActionKind) error
	// ClickedCard is the waiting card a button was on, wherever it was
	// posted (its thread, an approvals channel, a DM copy).
	ClickedCard(ctx context.Context, c Click) (*card.Card, error)
	// PhraseFor checks the clicker may allow the call and says what an
	// Allow of it asks to be typed (a critical call's confirmation
	// phrase); needed is false for a call that asks for none.
	PhraseFor(ctx context.Context, c Click) (p PhrasePrompt, needed bool, err error)
	// EditForm checks the clicker may decide the call and returns what
	// the edit form shows (Edit…); Edit applies its submission.
	EditForm(ctx context.Context, c Click) (EditForm, error)
	Edit(ctx context.Context, c Click, args string) error
	// QuestionForm checks the clicker may answer a server's question and
	// returns it (Answer…); AnswerQuestion applies its submission;
	// DeclineQuestion is its Decline.
	QuestionForm(ctx context.Context, c Click) (card.QuestionNotice, error)
	AnswerQuestion(ctx context.Context, c Click, values []string) error
	DeclineQuestion(ctx context.Context, c Click) error
}

var _ Buttons = (*Bot)(nil)

// Interact works an interaction (see Dispatch).
func (b *Bot) Interact(ctx context.Context, in Interaction) (Reply, error) {
	return Dispatch(ctx, b, in)
}

// Dispatch works an interaction with the core's answers: the one place a
// button's kind decides what a click does. A kind that is none, or a
// submission of a button that opens no form, is confirm.ErrBadRef and
// changes nothing. Errors are the answers' (see UserMessage).
func Dispatch(ctx context.Context, b Buttons, in Interaction) (Reply, error) {
	row, ok := in.Kind.Button()
	if !ok || (in.Submit && !row.Submits) {
		return Reply{}, fmt.Errorf("button %s (submitted %v): %w", in.Kind, in.Submit, confirm.ErrBadRef)
	}
	c := in.click()
	switch in.Kind {
	case card.ActAllow:
		c.Allow = true
		return Reply{}, b.Decide(ctx, c)
	case card.ActAllowGrant:
		c.Allow, c.Grant = true, true
		return Reply{}, b.Decide(ctx, c)
	case card.ActDeny:
		c.Reason = in.Value // a platform's Deny carries none; the terminal's /deny N reason does
		return Reply{}, b.Decide(ctx, c)
	case card.ActDenyReason:
		if in.Submit {
			c.Reason = in.Value
			return Reply{}, b.Decide(ctx, c)
		}
		return reasonForm(ctx, b, in, c)
	case card.ActAllowTyped:
		c.Allow = true
		if in.Submit {
			c.Phrase = in.Value
			return Reply{}, b.Decide(ctx, c)
		}
		p, needed, err := b.PhraseFor(ctx, c)
		if err != nil {
			return Reply{}, err
		}
		if !needed {
			then := in
			then.Kind = card.ActAllow
			return Reply{Then: &then}, nil
		}
		if p.Ref == "" {
			p.Ref = in.Ref
		}
		return Reply{Form: &Form{Kind: in.Kind, Ref: p.Ref, Number: numberOf(p.Number, p.Ref), Phrase: p}}, nil
	case card.ActEdit:
		if in.Submit {
			return Reply{}, b.Edit(ctx, c, in.Value) // Edit counts it as the editor's Allow
		}
		f, err := b.EditForm(ctx, c)
		if err != nil {
			return Reply{}, err
		}
		if f.Ref == "" {
			f.Ref = in.Ref
		}
		return Reply{Form: &Form{Kind: in.Kind, Ref: f.Ref, Number: numberOf(f.Number, f.Ref), Edit: f}}, nil
	case card.ActShowArgs, card.ActShowPreview:
		cd, err := b.ClickedCard(ctx, c)
		if errors.Is(err, ErrStaleRevision) {
			return Reply{}, err
		}
		return Reply{Form: &Form{Kind: in.Kind, Ref: in.Ref, Number: numberOf(0, in.Ref), Call: cd.Call(in.Ref)}}, nil
	case card.ActAllowAll, card.ActDenyAll:
		c.Allow, c.Reason = in.Kind == card.ActAllowAll, in.Value
		res, err := b.DecideAll(ctx, c)
		if err != nil {
			return Reply{}, err
		}
		return Reply{Notice: res.Message()}, nil
	case card.ActRevoke:
		return Reply{}, b.Revoke(ctx, c)
	case card.ActExtend:
		return Reply{}, b.Extend(ctx, c)
	case card.ActChecked:
		return Reply{}, b.MarkChecked(ctx, c)
	case card.ActRunStop, card.ActRunMarkDone, card.ActRunRetry:
		return Reply{}, b.RunAction(ctx, c, in.Kind)
	case card.ActAnswer:
		if in.Submit {
			return Reply{}, b.AnswerQuestion(ctx, c, in.Values)
		}
		q, err := b.QuestionForm(ctx, c)
		if err != nil {
			return Reply{}, err
		}
		if len(q.Fields) == 0 {
			// Nothing to ask: Accept answers at once.
			then := in
			then.Submit, then.Values = true, nil
			return Reply{Then: &then}, nil
		}
		return Reply{Form: &Form{Kind: in.Kind, Ref: in.Ref, Question: q}}, nil
	case card.ActDecline:
		return Reply{}, b.DeclineQuestion(ctx, c)
	}
	return Reply{}, fmt.Errorf("button %s: %w: %w", in.Kind, errNoAnswer, confirm.ErrBadRef)
}

// errNoAnswer: a kind of card.Buttons the switch above has no case for.
var errNoAnswer = errors.New("no answer for this kind of button")

// reasonForm answers "Deny with reason…": the reason form, showing the
// call when its card is found; a card whose call no longer waits, or one
// an edit changed since it was shown, is refused before anyone types.
func reasonForm(ctx context.Context, b Buttons, in Interaction, c Click) (Reply, error) {
	cd, err := b.ClickedCard(ctx, c)
	if errors.Is(err, ErrStaleRevision) {
		return Reply{}, err
	}
	var call *card.Call
	if err == nil {
		call = cd.Call(in.Ref)
	}
	if call != nil && !call.Open() {
		return Reply{}, ErrAlreadyClosed
	}
	n := 0
	if call != nil {
		n = call.Number
	}
	return Reply{Form: &Form{Kind: in.Kind, Ref: in.Ref, Number: numberOf(n, in.Ref), Call: call}}, nil
}

// numberOf is n, or when n is unknown (0) the number a call reference
// gives (0 for none).
func numberOf(n int, ref string) int {
	if n > 0 {
		return n
	}
	if _, pos, err := confirm.ParseRef(ref); err == nil {
		return pos + 1
	}
	return 0
}
