package slack

import (
	"context"

	"github.com/slack-go/slack"

	"github.com/airlockhq/airlock/bot"
	cardpkg "github.com/airlockhq/airlock/card"
)

// The Home tab. When a person opens Airlock's Home tab (app_home_opened,
// tab "home"), the adapter publishes their home view (views.publish):
// what waits on them in Slack and their own requests, with links to the
// cards and, with the web console, to the pages (card.Home). It is built
// when the tab is opened.

// Homes gives a person's home view (*bot.Bot has it).
type Homes interface {
	Home(ctx context.Context, platform, user string) (cardpkg.Home, error)
}

var _ Homes = (*bot.Bot)(nil)

// RenderHome lays out a home view as Block Kit blocks: a heading and a
// rich-text line per request in each list, or the list's empty words.
func RenderHome(h cardpkg.Home) []slack.Block {
	blocks := []slack.Block{slack.NewHeaderBlock(plain(cardpkg.HomeTitle))}
	list := func(id, heading, empty string, items []cardpkg.HomeItem, mine bool) {
		blocks = append(blocks, slack.NewSectionBlock(mrkdwn("*"+heading+"*"), nil, nil, slack.SectionBlockOptionBlockID(id+"_heading")))
		if len(items) == 0 {
			blocks = append(blocks, slack.NewContextBlock(id+"_empty", mrkdwn(empty)))
			return
		}
		lines := make([]cardpkg.Line, len(items))
		for i, it := range items {
			lines[i] = it.Line(mine)
		}
		blocks = append(blocks, slack.NewRichTextBlock(id, noticeSection(lines, fullCaps)))
	}
	list("waiting", cardpkg.HomeWaiting, cardpkg.HomeNoWaiting, h.Waiting, false)
	blocks = append(blocks, slack.NewDividerBlock())
	list("mine", cardpkg.HomeMine, cardpkg.HomeNoRequests, h.Mine, true)
	blocks = append(blocks, slack.NewContextBlock("home_footer", mrkdwn(cardpkg.HomeFoot)))
	return blocks
}

// publishHome publishes user's home view.
func (a *Adapter) publishHome(ctx context.Context, user string) {
	if a.cfg.Home == nil {
		return
	}
	h, err := a.cfg.Home.Home(ctx, Platform, user)
	if err != nil {
		a.log.Error("slack: home view", "user", user, "err", err)
		return
	}
	view := slack.HomeTabViewRequest{Type: slack.VTHomeTab, Blocks: slack.Blocks{BlockSet: RenderHome(h)}}
	if _, err := a.api.PublishViewContext(ctx, slack.PublishViewContextRequest{UserID: user, View: view}); err != nil {
		a.log.Error("slack: views.publish", "user", user, "err", err)
	}
}
