package discord

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/bwmarrin/discordgo"

	"github.com/airlockhq/airlock/bot"
	"github.com/airlockhq/airlock/card"
)

// Routing (bot.Router): a card posted in an approvals channel links back
// to the conversation's thread with a jump URL, the thread gets a pointer
// to the card (RenderPointer), and approvers named by user id get a copy
// of the card in a DM. Roles are not expanded: Discord has no lookup of a
// role's members without the privileged Server Members intent.

var _ bot.Router = (*Adapter)(nil)

// JumpBase is where Discord's jump URLs start.
const JumpBase = "https://discord.com/channels/"

// Link implements bot.Router: the jump URL of a message
// (https://discord.com/channels/<guild>/<channel>/<message>; @me for a
// DM), of the first message of a card split over several ("id1,id2"), or
// of the channel or thread itself when ref is "". The server comes from
// the channel cache, else GET /channels/{id}.
func (a *Adapter) Link(ctx context.Context, th bot.Thread, ref string) (string, error) {
	ch := target(th)
	if !isSnowflake(ch) {
		return "", fmt.Errorf("discord: link: channel %q is not a Discord id", ch)
	}
	msg, _, _ := strings.Cut(ref, ",")
	if ref != "" && !isSnowflake(msg) {
		return "", fmt.Errorf("discord: link: reference %q is not a message id", ref)
	}
	info, err := a.channel(ctx, ch)
	if err != nil {
		return "", fmt.Errorf("discord: link: %w", err)
	}
	guild := "@me"
	if info.guild != "" {
		guild = info.guild
	}
	u := JumpBase + guild + "/" + ch
	if msg != "" {
		u += "/" + msg
	}
	return u, nil
}

// OpenDM implements bot.Router: the DM channel with a user
// (POST /users/@me/channels), as a top-level thread. user must be a user
// id, and not the bot's own.
func (a *Adapter) OpenDM(ctx context.Context, user string) (bot.Thread, error) {
	if !isSnowflake(user) {
		return bot.Thread{}, fmt.Errorf("discord: open a DM: %q is not a user id (Discord DMs go to user ids only)", user)
	}
	if user == a.userID() {
		return bot.Thread{}, errors.New("discord: open a DM: that is the bot itself")
	}
	ch, err := a.s.UserChannelCreate(user, discordgo.WithContext(ctx))
	if err != nil {
		return bot.Thread{}, fmt.Errorf("discord: open a DM with %s: %w", user, err)
	}
	if ch == nil || !isSnowflake(ch.ID) {
		return bot.Thread{}, fmt.Errorf("discord: open a DM with %s: no channel id in the answer", user)
	}
	if ch.Type == 0 {
		ch.Type = discordgo.ChannelTypeDM
	}
	ch.GuildID = ""
	a.channels.put(ch, "")
	return bot.Thread{Platform: Platform, Channel: ch.ID}, nil
}

// PostPointer implements bot.Router: the pointer (RenderPointer) in the
// thread, without buttons, pinging nobody; its message id is the
// reference.
func (a *Adapter) PostPointer(ctx context.Context, th bot.Thread, p card.Pointer) (string, error) {
	return a.send(ctx, th, RenderPointer(p), "pointer")
}

// UpdatePointer implements bot.Router: it edits the pointer in place,
// pinging nobody.
func (a *Adapter) UpdatePointer(ctx context.Context, th bot.Thread, ref string, p card.Pointer) error {
	if !isSnowflake(ref) {
		return fmt.Errorf("discord: pointer reference %q is not a message id", ref)
	}
	return a.editWith(ctx, th, ref, RenderPointer(p), "pointer", true)
}

var _ bot.RoleLookup = (*Adapter)(nil)

// MemberRoles implements bot.RoleLookup: the role ids the user holds in
// the server of channel (GET /guilds/{guild}/members/{user}), for the web
// console, where no interaction carries them. None for a DM, or for a
// user who is not a member; an error when Discord could not say.
func (a *Adapter) MemberRoles(ctx context.Context, channel, user string) ([]string, error) {
	if !isSnowflake(channel) || !isSnowflake(user) {
		return nil, nil
	}
	info, err := a.channel(ctx, channel)
	if err != nil {
		return nil, err
	}
	if info.guild == "" {
		return nil, nil // a DM: no roles
	}
	m, err := a.s.GuildMember(info.guild, user, discordgo.WithContext(ctx))
	if err != nil {
		var rest *discordgo.RESTError
		if errors.As(err, &rest) && rest.Response != nil && rest.Response.StatusCode == http.StatusNotFound {
			return nil, nil
		}
		return nil, fmt.Errorf("discord: the roles of %s: %w", user, err)
	}
	return m.Roles, nil
}
