package slack

import (
	"context"
	"errors"
	"fmt"

	"github.com/slack-go/slack"

	"github.com/airlockhq/airlock/bot"
	cardpkg "github.com/airlockhq/airlock/card"
	"github.com/airlockhq/airlock/confirm"
)

// The Home tab. When a person opens Airlock's Home tab (app_home_opened,
// tab "home"), the adapter tells the core (HomeOpened), which stores the
// home as opened and publishes it through card sync (PublishHome:
// views.publish): what waits on them in Slack and their own requests,
// with links to the cards and, with the web console, to the pages
// (card.Home). From then on the core publishes it again whenever a
// request it lists changes, under Slack's rate limits like any card.

// HomeOpener takes a person's opening of their Home tab (*bot.Bot has it).
type HomeOpener interface {
	HomeOpened(ctx context.Context, platform, user string) error
}

var (
	_ HomeOpener        = (*bot.Bot)(nil)
	_ bot.HomePublisher = (*Adapter)(nil)
)

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

// PublishHome implements bot.HomePublisher: views.publish of the home
// view, without retries of its own (card sync retries). A rate limit is
// the Home tabs' own (Scope confirm.HomeChannel: cards go on); a person
// Slack no longer has is bot.ErrMessageGone.
func (a *Adapter) PublishHome(ctx context.Context, user string, h cardpkg.Home) error {
	view := slack.HomeTabViewRequest{Type: slack.VTHomeTab, Blocks: slack.Blocks{BlockSet: RenderHome(h)}}
	_, err := a.updates.PublishViewContext(ctx, slack.PublishViewContextRequest{UserID: user, View: view})
	if err == nil {
		return nil
	}
	var rl *slack.RateLimitedError
	var se slack.SlackErrorResponse
	switch {
	case errors.As(err, &rl):
		err = &bot.RateLimitedError{Platform: Platform, Method: "views.publish", Scope: confirm.HomeChannel, RetryAfter: rl.RetryAfter, Err: err}
	case errors.As(err, &se) && (se.Err == "user_not_found" || se.Err == "account_inactive"):
		err = fmt.Errorf("%w: %w", bot.ErrMessageGone, err)
	}
	return fmt.Errorf("slack: views.publish: %w", err)
}

// homeOpened tells the core a person opened their Home tab.
func (a *Adapter) homeOpened(ctx context.Context, user string) {
	if a.cfg.Home == nil {
		return
	}
	if err := a.cfg.Home.HomeOpened(ctx, Platform, user); err != nil {
		a.log.Error("slack: home view", "user", user, "err", err)
	}
}
