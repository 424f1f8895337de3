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
	es, err := b.inbox(ctx, web.Who{IDs: map[string]string{platform: user}}) // only the platform's requests are visible
	if err != nil {
		return card.Home{}, err
	}
	var h card.Home
	for _, e := range es {
		item := card.HomeItem{BatchID: e.BatchID, Tools: e.Tools, Waiting: e.Waiting, Channel: e.Channel, Requester: e.Requester,
			ExpiresAt: e.ExpiresAt, PageURL: b.consoleURL(e.BatchID), CardURL: b.cardURL(ctx, e.conv, e.batch)}
		if e.MayDecide && e.Waiting > 0 && len(h.Waiting) < maxHomeItems {
			h.Waiting = append(h.Waiting, item)
		}
		if e.Mine && len(h.Mine) < maxHomeItems {
			h.Mine = append(h.Mine, item)
		}
	}
	return h, nil
}
