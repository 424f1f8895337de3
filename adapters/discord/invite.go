package discord

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
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

// ApplicationID reads the bot's user id from a bot token: its first
// dot-separated segment is that id in base64. It is the application id
// only for applications whose bot was made with them (most, not all);
// Invite asks Discord instead. The token itself never appears in an
// error.
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
// exactly the permissions it needs (see Permissions), its client id read
// offline from the token (ApplicationID). Prefer Invite, which asks
// Discord for the application id.
func InviteURL(token string, moderation []string) (string, error) {
	id, err := ApplicationID(token)
	if err != nil {
		return "", err
	}
	return inviteURL(id, moderation)
}

// Invite is the OAuth2 URL that installs the bot in a server with exactly
// the permissions it needs (see Permissions), its client id the
// application id Discord gives for the token: GET
// {cfg.APIURL}oauth2/applications/@me, through cfg.HTTPClient as every
// REST call of the adapter. The token never appears in an error.
func Invite(ctx context.Context, cfg Config, moderation []string) (string, error) {
	if _, err := Permissions(moderation); err != nil {
		return "", err // before asking Discord anything
	}
	s, err := NewSession(cfg)
	if err != nil {
		return "", err
	}
	id, err := applicationID(ctx, s)
	if err != nil {
		return "", err
	}
	return inviteURL(id, moderation)
}

// applicationID asks Discord for the id of the token's application.
func applicationID(ctx context.Context, s *discordgo.Session) (string, error) {
	body, err := s.RequestWithBucketID("GET", discordgo.EndpointOAuth2Application("@me"), nil, discordgo.EndpointOAuth2Application(""), discordgo.WithContext(ctx))
	if err != nil {
		var rest *discordgo.RESTError
		if errors.As(err, &rest) && rest.Response != nil && rest.Response.StatusCode == http.StatusUnauthorized {
			return "", errors.New("discord: GET oauth2/applications/@me: 401 Unauthorized: Discord refused the token (check discord.token, the bare bot token)")
		}
		return "", fmt.Errorf("discord: GET oauth2/applications/@me: %w", err)
	}
	var app struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal(body, &app); err != nil || !isSnowflake(app.ID) {
		return "", fmt.Errorf("discord: GET oauth2/applications/@me returned no application id")
	}
	return app.ID, nil
}

func inviteURL(id string, moderation []string) (string, error) {
	p, err := Permissions(moderation)
	if err != nil {
		return "", err
	}
	return "https://discord.com/oauth2/authorize?client_id=" + id + "&scope=bot&permissions=" + strconv.FormatInt(p, 10), nil
}
