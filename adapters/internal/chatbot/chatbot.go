// Package chatbot names what the adapters need from the bot (*bot.Bot),
// so that Slack, Discord and the shell ask for the same methods.
package chatbot

import (
	"context"

	"github.com/airlockhq/airlock/bot"
	"github.com/airlockhq/airlock/card"
	"github.com/airlockhq/airlock/confirm"
)

// Buttons serves a card's buttons and the commands that stand for them.
type Buttons interface {
	Decide(ctx context.Context, c bot.Click) error
	// PhraseFor checks the clicker may allow the call and says what an
	// Allow of it asks to be typed (a critical call's confirmation
	// phrase); needed is false for a call that asks for none.
	PhraseFor(ctx context.Context, c bot.Click) (p bot.PhrasePrompt, needed bool, err error)
	// EditForm checks the clicker may decide the call and returns what
	// the edit form shows (Edit…); Edit applies its submission.
	EditForm(ctx context.Context, c bot.Click) (bot.EditForm, error)
	Edit(ctx context.Context, c bot.Click, args string) error
	// Extend pushes a card's deadline once (Extend).
	Extend(ctx context.Context, c bot.Click) error
	// MarkChecked marks a run whose outcome is unknown checked ("I
	// checked — go on" on its card or its thread line).
	MarkChecked(ctx context.Context, c bot.Click) error
}

// Bot is what a chat adapter (Slack, Discord) needs from the bot.
type Bot interface {
	Admit(ctx context.Context, t bot.Turn) bot.Admission
	HandleTurn(ctx context.Context, t bot.Turn) error
	Note(ctx context.Context, t bot.Turn) error
	HasConversation(ctx context.Context, th bot.Thread) (bool, error)
	Revoke(ctx context.Context, c bot.Click) error
	// ClickedCard is the waiting card a button was on, wherever it was
	// posted (its thread, an approvals channel, a DM copy).
	ClickedCard(ctx context.Context, c bot.Click) (*card.Card, error)
	// RunAction works a run message's button (Stop run, Mark done,
	// Retry).
	RunAction(ctx context.Context, c bot.Click, kind card.ActionKind) error
	// DecideAll is a card's Allow all or Deny all (c.Allow which).
	DecideAll(ctx context.Context, c bot.Click) (bot.AllResult, error)
	Buttons
}

// Inbox records deliveries before they are acknowledged and marks them
// done once worked (*bot.Bot has it; see bot's inbox). An adapter whose
// bot has it records every interaction and mention, and implements
// bot.Replayer.
type Inbox interface {
	Record(ctx context.Context, it confirm.InboxItem) (bool, error)
	Finished(ctx context.Context, platform, key string)
}
