package discord

import (
	"context"

	"github.com/airlockhq/airlock/bot"
	"github.com/airlockhq/airlock/card"
)

// Unknown outcomes. A run whose outcome is unknown gates its tool in the
// thread until a person marks it checked: its card (or, for a call no
// card shows, its thread line, see RenderUnknownNotice) carries "I checked
// — go on" (custom id "al:k:<checked reference>"). The bot judges the
// click (an approver of the channel); the line is then edited to say who
// checked it and when, without the button.

var _ bot.UnknownNoticer = (*Adapter)(nil)

// PostUnknownNotice implements bot.UnknownNoticer: the line in the thread,
// pinging nobody; its message id is the reference.
func (a *Adapter) PostUnknownNotice(ctx context.Context, th bot.Thread, n card.UnknownNotice) (string, error) {
	return a.send(ctx, th, RenderUnknownNotice(n), "unknown outcome")
}

// UpdateUnknownNotice implements bot.UnknownNoticer: it edits the line in
// place; once checked it has no button.
func (a *Adapter) UpdateUnknownNotice(ctx context.Context, th bot.Thread, ref string, n card.UnknownNotice) error {
	return a.editRef(ctx, th, ref, RenderUnknownNotice(n), "unknown outcome")
}
