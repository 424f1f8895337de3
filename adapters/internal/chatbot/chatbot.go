// Package chatbot names what the adapters need from the bot (*bot.Bot),
// so that Slack, Discord and the shell ask for the same methods.
package chatbot

import (
	"context"

	"github.com/airlockhq/airlock/bot"
	"github.com/airlockhq/airlock/confirm"
)

// Bot is what a chat adapter (Slack, Discord) needs from the bot: a
// message's turn, and the interactions (clicks and the forms they open)
// it decodes, which the core dispatches (bot.Dispatch).
type Bot interface {
	Admit(ctx context.Context, t bot.Turn) bot.Admission
	HandleTurn(ctx context.Context, t bot.Turn) error
	Note(ctx context.Context, t bot.Turn) error
	HasConversation(ctx context.Context, th bot.Thread) (bool, error)
	Interact(ctx context.Context, in bot.Interaction) (bot.Reply, error)
}

var _ Bot = (*bot.Bot)(nil)

// Inbox records deliveries before they are acknowledged and marks them
// done once worked (*bot.Bot has it; see bot's inbox). An adapter whose
// bot has it records every interaction and mention, and implements
// bot.Replayer.
type Inbox interface {
	Record(ctx context.Context, it confirm.InboxItem) (bool, error)
	Finished(ctx context.Context, platform, key string)
}
