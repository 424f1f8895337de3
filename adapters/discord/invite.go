package discord

import (
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/bwmarrin/discordgo"
)

// BasePermissions are what the bot needs in a server: View Channels, Send
// Messages, Send Messages in Threads, Create Public Threads, Read Message
// History and Embed Links.
const BasePermissions int64 = discordgo.PermissionViewChannel |
	discordgo.PermissionSendMessages |
	discordgo.PermissionSendMessagesInThreads |
	discordgo.PermissionCreatePublicThreads |
	discordgo.PermissionReadMessageHistory |
	discordgo.PermissionEmbedLinks

// Permissions returns the permission integer the bot needs with the named
// moderation tools enabled: BasePermissions, plus Moderate Members
// (timeout_member), Kick Members (kick_member), Ban Members (ban_member)
// and Manage Messages (delete_message).
func Permissions(moderation []string) (int64, error) {
	p := BasePermissions
	for _, n := range moderation {
		if !knownModerationTool(n) {
			return 0, fmt.Errorf("discord: %q is not a moderation tool (one of %s)", n, strings.Join(ModerationToolNames, ", "))
		}
		p |= moderationPermissions[n]
	}
	return p, nil
}

// ApplicationID reads the application (bot user) id from a bot token: its
// first dot-separated segment is the id in base64. The token itself never
// appears in an error.
func ApplicationID(token string) (string, error) {
	token = strings.TrimPrefix(strings.TrimSpace(token), "Bot ")
	first, _, ok := strings.Cut(token, ".")
	if !ok || first == "" {
		return "", errors.New("discord: the token does not look like a bot token (no application id segment)")
	}
	for _, enc := range []*base64.Encoding{base64.RawStdEncoding, base64.StdEncoding, base64.RawURLEncoding, base64.URLEncoding} {
		b, err := enc.DecodeString(first)
		if err == nil && isSnowflake(string(b)) {
			return string(b), nil
		}
	}
	return "", errors.New("discord: the token's first segment is not a base64 application id")
}

// InviteURL is the OAuth2 URL that installs the bot in a server with
// exactly the permissions it needs (see Permissions).
func InviteURL(token string, moderation []string) (string, error) {
	id, err := ApplicationID(token)
	if err != nil {
		return "", err
	}
	p, err := Permissions(moderation)
	if err != nil {
		return "", err
	}
	return "https://discord.com/oauth2/authorize?client_id=" + id + "&scope=bot&permissions=" + strconv.FormatInt(p, 10), nil
}
