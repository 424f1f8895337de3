package discord

import "github.com/airlockhq/airlock/adapters/discord/discordtest"

// The adapter's tests run against discordtest's fake Discord; these are
// its names as the tests here spell them.
const (
	botID       = discordtest.BotID
	guildID     = discordtest.GuildID
	channelID   = discordtest.ChannelID
	approvalsCh = discordtest.ApprovalsCh
	threadCh    = discordtest.ThreadCh
	otherCh     = discordtest.OtherCh
	dmChannel   = discordtest.DMChannel
	requester   = discordtest.Requester
	outsider    = discordtest.Outsider
	moderator   = discordtest.Moderator
	dmUser      = discordtest.DMUser
	modRole     = discordtest.ModRole
	otherRole   = discordtest.OtherRole
	spammer     = discordtest.Spammer
	adminUser   = discordtest.AdminUser
	peerUser    = discordtest.PeerUser
	ownerUser   = discordtest.OwnerUser
	opsAdmin    = discordtest.OpsAdmin
	stranger    = discordtest.Stranger
	botRole     = discordtest.BotRole
	adminRole   = discordtest.AdminRole
	opsRole     = discordtest.OpsRole
	appID       = discordtest.AppID
)

var testToken = discordtest.Token

type (
	apiCall     = discordtest.Call
	fakeDiscord = discordtest.Server
)

var (
	newFakeDiscord = discordtest.New
	guildRoles     = discordtest.GuildRoles
	guildObject    = discordtest.GuildObject
	guildMessage   = discordtest.GuildMessage
	dmMessage      = discordtest.DMMessage
	click          = discordtest.Click
	dmClick        = discordtest.DMClick
	dmClickIn      = discordtest.DMClickIn
)

// modalSubmit is an INTERACTION_CREATE payload for the reason modal.
func modalSubmit(id, channel, user string, roles []string, customID, reason, messageID string) map[string]any {
	return discordtest.ModalSubmit(id, channel, user, roles, customID, ReasonInputID, reason, messageID)
}

// editSubmit is an INTERACTION_CREATE payload for the edit modal, opened
// from a card message (messageID "": Discord sent no message).
func editSubmit(id, channel, user string, roles []string, customID, args, messageID string) map[string]any {
	return discordtest.EditSubmit(id, channel, user, roles, customID, EditInputID, args, messageID)
}
