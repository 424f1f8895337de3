package bot

import (
	"context"

	"github.com/airlockhq/airlock/card"
	"github.com/airlockhq/airlock/web"
)

// maxHomeItems bounds each list of a home view.
const maxHomeItems = 40

// Home is a person's home view on a platform (Slack's Home tab): the
// requests waiting on them there and their own, as the console's inbox
// lists them, each with its card's link and, with the console, its page.
func (b *Bot) Home(ctx context.Context, platform, user string) (card.Home, error) {
	es, err := b.Inbox(ctx, web.Who{IDs: map[string]string{platform: user}})
	if err != nil {
		return card.Home{}, err
	}
	var h card.Home
	for _, e := range es {
		if e.Platform != platform {
			continue
		}
		item := card.HomeItem{BatchID: e.BatchID, Tools: e.Tools, Waiting: e.Waiting, Channel: e.Channel, Requester: e.Requester,
			ExpiresAt: e.ExpiresAt, PageURL: b.consoleURL(e.BatchID)}
		if batch, err := b.store.Batch(ctx, e.BatchID); err == nil {
			if conv, err := b.conversation(ctx, batch.ConversationID); err == nil {
				item.CardURL = b.cardURL(ctx, conv, batch)
			}
		}
		if e.MayDecide && e.Waiting > 0 && len(h.Waiting) < maxHomeItems {
			h.Waiting = append(h.Waiting, item)
		}
		if e.Mine && len(h.Mine) < maxHomeItems {
			h.Mine = append(h.Mine, item)
		}
	}
	return h, nil
}
