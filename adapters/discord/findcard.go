package discord

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/bwmarrin/discordgo"

	"github.com/airlockhq/airlock/bot"
	"github.com/airlockhq/airlock/confirm"
)

var _ bot.CardFinder = (*Adapter)(nil)

// findPages bounds the pages (of 100 messages, Discord's most) a look for
// a card reads: a card is posted right after its batch, so it is among
// the first messages since.
const findPages = 5

// FindCard implements bot.CardFinder: it looks for a card (or a DM copy)
// of the batch that Airlock posted but could not record (killed between
// the post and the write) among the messages posted since `since` in the
// thread, channel or DM (GET /channels/{id}/messages): messages of the
// bot's own user carrying a button of the batch. Only the bot can post
// its components as itself, so such messages are the batch's card; a
// person's or another bot's look-alike, and the bot's own text (a model's
// answer quoting a custom id), are never one. A card of several messages
// comes back as its messages' ids in order ("id1,id2"), as PostCard
// returns them; of a card posted twice, the first.
func (a *Adapter) FindCard(ctx context.Context, th bot.Thread, batchID string, since time.Time) (string, bool, error) {
	ch, me := target(th), a.userID()
	if me == "" || batchID == "" || !isSnowflake(ch) {
		return "", false, nil
	}
	after := snowflakeAt(since)
	var found []*discordgo.Message
	for range findPages {
		msgs, err := a.s.ChannelMessages(ch, 100, "", after, "", discordgo.WithContext(ctx))
		if err != nil {
			return "", false, fmt.Errorf("discord: list messages of %s: %w", ch, classifyLook(err))
		}
		for _, m := range msgs {
			if idLess(after, m.ID) {
				after = m.ID
			}
			if m.Author != nil && m.Author.ID == me && len(batchCalls(m.Components, batchID)) > 0 {
				found = append(found, m)
			}
		}
		if len(msgs) < 100 {
			break
		}
	}
	if len(found) == 0 {
		return "", false, nil
	}
	sort.Slice(found, func(i, j int) bool { return idLess(found[i].ID, found[j].ID) })
	// The card's messages follow each other with calls not yet seen; a
	// message repeating one starts a second posting.
	seen := map[int]bool{}
	var ids []string
	for _, m := range found {
		calls := batchCalls(m.Components, batchID)
		repeat := false
		for _, pos := range calls {
			repeat = repeat || (pos >= 0 && seen[pos])
		}
		if repeat {
			break
		}
		for _, pos := range calls {
			seen[pos] = true
		}
		ids = append(ids, m.ID)
	}
	return strings.Join(ids, ","), true, nil
}

// batchCalls lists the call positions the buttons of components name in
// the batch (-1 for a button of the whole batch: Allow all, Deny all);
// none when no button is the batch's.
func batchCalls(components []discordgo.MessageComponent, batchID string) []int {
	var out []int
	var walk func(cs []discordgo.MessageComponent)
	walk = func(cs []discordgo.MessageComponent) {
		for _, c := range cs {
			switch c := c.(type) {
			case *discordgo.ActionsRow:
				walk(c.Components)
			case discordgo.ActionsRow:
				walk(c.Components)
			case *discordgo.Button:
				out = append(out, buttonCall(c.CustomID, batchID)...)
			case discordgo.Button:
				out = append(out, buttonCall(c.CustomID, batchID)...)
			}
		}
	}
	walk(components)
	return out
}

func buttonCall(customID, batchID string) []int {
	_, ref, ok := parseCustomID(customID)
	if !ok {
		return nil
	}
	if r, err := confirm.ParseCallRef(ref); err == nil && r.Batch == batchID {
		return []int{r.Position}
	}
	if id, _, err := confirm.ParseAllRef(ref); err == nil && id == batchID {
		return []int{-1}
	}
	return nil
}

// discordEpoch is the first millisecond of snowflakes (2015).
const discordEpoch = 1420070400000

// snowflakeAt is the smallest snowflake of a message posted at t or
// later, less one: the id to list messages after.
func snowflakeAt(t time.Time) string {
	ms := t.UnixMilli() - discordEpoch
	if t.IsZero() || ms <= 0 {
		return "0"
	}
	return strconv.FormatInt(ms<<22-1, 10)
}

// idLess orders snowflakes.
func idLess(a, b string) bool {
	if len(a) != len(b) {
		return len(a) < len(b)
	}
	return a < b
}

// classifyLook marks Discord's answers that the bot may not read a
// channel at all (Missing Access, Missing Permissions, Unknown Channel)
// as bot.ErrCannotLook; anything else (a 429, a 5xx) is returned as it
// is.
func classifyLook(err error) error {
	var re *discordgo.RESTError
	if errors.As(err, &re) && re.Message != nil {
		switch re.Message.Code {
		case discordgo.ErrCodeMissingAccess, discordgo.ErrCodeMissingPermissions, discordgo.ErrCodeUnknownChannel:
			return fmt.Errorf("%w: %w", bot.ErrCannotLook, err)
		}
	}
	return err
}
