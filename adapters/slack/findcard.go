package slack

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/slack-go/slack"

	"github.com/airlockhq/airlock/bot"
)

var _ bot.CardFinder = (*Adapter)(nil)

// findPages bounds the pages (of findPageSize messages) a look for a card
// reads: a card is posted right after its batch, so it is among the first
// messages since.
const (
	findPages    = 5
	findPageSize = 200
)

// FindCard implements bot.CardFinder: it looks for a card (or a DM copy)
// of the batch that Airlock posted but could not record (killed between
// the post and the write) among the messages posted since `since` in a
// thread (conversations.replies) or, with th.Thread "", at the top level
// of a channel or a DM (conversations.history): a message of the bot's
// own carrying a button of the batch. Only Airlock's app can post its
// buttons (and block ids) as its bot user, so such a message is the
// batch's card; a person's look-alike, another app's message, and the
// bot's own text (a model's answer quoting a reference) are never one. A
// card over several messages is found by its parts' block ids, all of
// them, in order, or not at all.
func (a *Adapter) FindCard(ctx context.Context, th bot.Thread, batchID string, since time.Time) (string, bool, error) {
	if th.Channel == "" || batchID == "" {
		return "", false, nil
	}
	me := a.identity()
	if me.UserID == "" {
		return "", false, nil // not signed in: no message can be told to be the bot's
	}
	oldest := ""
	if !since.IsZero() {
		oldest = fmt.Sprintf("%d.%06d", since.Unix(), since.Nanosecond()/1000)
	}
	var (
		mine   []slack.Message // the bot's own messages, in any order
		cursor string
	)
	for range findPages {
		var (
			msgs []slack.Message
			more bool
			next string
			err  error
		)
		if th.Thread != "" {
			msgs, more, next, err = a.api.GetConversationRepliesContext(ctx, &slack.GetConversationRepliesParameters{
				ChannelID: th.Channel, Timestamp: th.Thread, Oldest: oldest, Cursor: cursor, Limit: findPageSize})
			if err != nil {
				return "", false, fmt.Errorf("slack: conversations.replies: %w", classifyLook(err))
			}
		} else {
			resp, herr := a.api.GetConversationHistoryContext(ctx, &slack.GetConversationHistoryParameters{
				ChannelID: th.Channel, Oldest: oldest, Cursor: cursor, Limit: findPageSize})
			if herr != nil {
				return "", false, fmt.Errorf("slack: conversations.history: %w", classifyLook(herr))
			}
			msgs, more, next = resp.Messages, resp.HasMore, resp.ResponseMetaData.NextCursor
		}
		for _, m := range msgs {
			if m.User == me.UserID || (m.BotID != "" && m.BotID == me.BotID) {
				mine = append(mine, m)
			}
		}
		if !more || next == "" {
			break
		}
		cursor = next
	}
	// Oldest first: of a card of one message posted twice (before this
	// was fixed), the first; a card over several messages is found whole
	// or not at all (a post cut short is posted again), each part the
	// latest of its number.
	sort.Slice(mine, func(i, j int) bool { return tsBefore(mine[i].Timestamp, mine[j].Timestamp) })
	var parts []string
	for _, m := range mine {
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

// tsBefore orders message timestamps ("<seconds>.<micro>") by time.
func tsBefore(a, b string) bool {
	as, af, _ := strings.Cut(a, ".")
	bs, bf, _ := strings.Cut(b, ".")
	if len(as) != len(bs) {
		return len(as) < len(bs)
	}
	if as != bs {
		return as < bs
	}
	return af < bf
}

// classifyLook marks Slack's answers that the bot may not read a place at
// all (a history scope the app lacks, a channel it is not in) as
// bot.ErrCannotLook; anything else (a 429, a 5xx) is returned as it is.
func classifyLook(err error) error {
	var se slack.SlackErrorResponse
	if errors.As(err, &se) {
		switch se.Err {
		case "missing_scope", "not_in_channel", "channel_not_found", "not_allowed_token_type", "access_denied":
			return fmt.Errorf("%w: %w", bot.ErrCannotLook, err)
		}
	}
	return err
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
