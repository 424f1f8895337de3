package slack

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/slack-go/slack"

	"github.com/airlockhq/airlock/bot"
)

var _ bot.CardFinder = (*Adapter)(nil)

// FindCard looks in a thread for a card of the batch that Airlock posted
// but could not record (killed between the post and the write): a message
// of the bot's own carrying a button of the batch. Only Airlock's app can
// post its buttons, so such a message is the batch's card. A card over
// several messages is found by its parts' block ids, all of them, in
// order, or not at all.
func (a *Adapter) FindCard(ctx context.Context, th bot.Thread, batchID string) (string, bool, error) {
	if th.Thread == "" || batchID == "" {
		return "", false, nil
	}
	msgs, _, _, err := a.api.GetConversationRepliesContext(ctx, &slack.GetConversationRepliesParameters{ChannelID: th.Channel, Timestamp: th.Thread, Limit: 200})
	if err != nil {
		return "", false, fmt.Errorf("slack: conversations.replies: %w", err)
	}
	me := a.identity()
	if me.UserID == "" {
		return "", false, nil // not signed in: no message can be told to be the bot's
	}
	// A card over several messages is found whole or not at all (a post
	// cut short is posted again); each part the latest of its number.
	var parts []string
	for _, m := range msgs {
		if m.User != me.UserID && (m.BotID == "" || m.BotID != me.BotID) {
			continue
		}
		if part, n, ok := partOf(m.Blocks, batchID); ok {
			if len(parts) != n {
				parts = make([]string, n)
			}
			parts[part-1] = CardRef(th.Channel, m.Timestamp)
			continue
		}
		if carriesBatch(m.Blocks, batchID) {
			return CardRef(th.Channel, m.Timestamp), true, nil
		}
	}
	if len(parts) > 0 && !slices.Contains(parts, "") {
		return strings.Join(parts, ","), true, nil
	}
	return "", false, nil
}

// partOf reports which part of the batch's card over several messages
// blocks are (see partBlockID).
func partOf(blocks slack.Blocks, batchID string) (part, parts int, ok bool) {
	for _, b := range blocks.BlockSet {
		cb, isContext := b.(*slack.ContextBlock)
		if !isContext {
			continue
		}
		if p, n, id, found := parsePartBlockID(cb.BlockID); found && id == batchID {
			return p, n, true
		}
	}
	return 0, 0, false
}

// carriesBatch reports whether blocks hold a button whose value is one of
// the batch's references ("<batch>.<position>…", "all-<batch>.…").
func carriesBatch(blocks slack.Blocks, batchID string) bool {
	for _, b := range blocks.BlockSet {
		ab, ok := b.(*slack.ActionBlock)
		if !ok || ab.Elements == nil {
			continue
		}
		for _, e := range ab.Elements.ElementSet {
			if btn, ok := e.(*slack.ButtonBlockElement); ok &&
				(strings.HasPrefix(btn.Value, batchID+".") || strings.HasPrefix(btn.Value, "all-"+batchID+".")) {
				return true
			}
		}
	}
	return false
}
