package discord

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/bwmarrin/discordgo"

	"github.com/airlockhq/airlock/adapters/internal/visible"
	"github.com/airlockhq/airlock/bot"
	"github.com/airlockhq/airlock/card"
	"github.com/airlockhq/airlock/confirm"
	"github.com/airlockhq/airlock/model"
	"github.com/airlockhq/airlock/tools"
)

// The built-in moderation tools (config `discord.moderation_tools`).
const (
	ToolTimeoutMember = "timeout_member"
	ToolKickMember    = "kick_member"
	ToolBanMember     = "ban_member"
	ToolDeleteMessage = "delete_message"
)

// ModerationToolNames lists the built-in moderation tools.
var ModerationToolNames = []string{ToolTimeoutMember, ToolKickMember, ToolBanMember, ToolDeleteMessage}

// MaxTimeout is the longest timeout Discord allows.
const MaxTimeout = 28 * 24 * time.Hour

// MaxModerationReason caps a moderation reason, in characters (the audit
// log keeps 512, with Airlock's prefix).
const MaxModerationReason = 400

// grantActorPrefix starts the decider the bot records for a call a grant
// allowed ("grant:<id>").
const grantActorPrefix = "grant:"

// maxAuditReason is Discord's limit of X-Audit-Log-Reason, in characters
// before URL encoding.
const maxAuditReason = 512

var moderationSchemas = map[string]string{
	ToolTimeoutMember: `{"type":"object","properties":{` +
		`"user":{"type":"string","pattern":"^[0-9]{1,20}$","description":"The member's user id (a snowflake, digits only)."},` +
		`"duration":{"type":"string","pattern":"^([0-9]+[smhdw])+$","description":"How long, e.g. 10m, 1h30m, 2d; at least 1s, at most 28d."},` +
		`"reason":{"type":"string","minLength":1,"maxLength":400,"description":"Why; shown to the approver and written to the audit log."}},` +
		`"required":["user","duration","reason"],"additionalProperties":false}`,
	ToolKickMember: `{"type":"object","properties":{` +
		`"user":{"type":"string","pattern":"^[0-9]{1,20}$","description":"The member's user id (a snowflake, digits only)."},` +
		`"reason":{"type":"string","minLength":1,"maxLength":400,"description":"Why; shown to the approver and written to the audit log."}},` +
		`"required":["user","reason"],"additionalProperties":false}`,
	ToolBanMember: `{"type":"object","properties":{` +
		`"user":{"type":"string","pattern":"^[0-9]{1,20}$","description":"The user id to ban (a snowflake, digits only)."},` +
		`"reason":{"type":"string","minLength":1,"maxLength":400,"description":"Why; shown to the approver and written to the audit log."},` +
		`"delete_message_days":{"type":"integer","minimum":0,"maximum":7,"description":"Delete the user's messages of the last N days (0 to 7; default 0)."}},` +
		`"required":["user","reason"],"additionalProperties":false}`,
	ToolDeleteMessage: `{"type":"object","properties":{` +
		`"channel":{"type":"string","pattern":"^[0-9]{1,20}$","description":"The id of the channel (or thread) holding the message."},` +
		`"message":{"type":"string","pattern":"^[0-9]{1,20}$","description":"The message id."}},` +
		`"required":["channel","message"],"additionalProperties":false}`,
}

var moderationDescriptions = map[string]string{
	ToolTimeoutMember: "Time out a member of this Discord server: they cannot write, react or speak for the duration. Needs a moderator's approval.",
	ToolKickMember:    "Kick a member from this Discord server (they may join again with an invite). Needs a moderator's approval.",
	ToolBanMember:     "Ban a user from this Discord server, optionally deleting their recent messages. Needs a moderator's approval.",
	ToolDeleteMessage: "Delete one message in a channel of this Discord server. Needs a moderator's approval.",
}

// moderationFields lists each tool's arguments: name -> required.
var moderationFields = map[string]map[string]bool{
	ToolTimeoutMember: {"user": true, "duration": true, "reason": true},
	ToolKickMember:    {"user": true, "reason": true},
	ToolBanMember:     {"user": true, "reason": true, "delete_message_days": false},
	ToolDeleteMessage: {"channel": true, "message": true},
}

// ModerationTools returns the named built-in moderation tools, acting
// through the session's REST client. They need approval (Confirm is
// true), act in the guild of the conversation's channel
// (confirm.RunInfo), and send X-Audit-Log-Reason naming the approver.
// Validation refuses, before any card, a call on a member Discord would
// refuse: one whose highest role is not below the bot's, the owner, a
// non-member (kick, timeout), an administrator (timeout); see reach.go.
// Pass the adapter's session (Adapter.Session): its gateway state tells
// which servers the bot is in and their roles.
func ModerationTools(names []string, s *discordgo.Session) ([]tools.Tool, error) {
	if s == nil {
		return nil, errors.New("discord: moderation tools need a session")
	}
	var out []tools.Tool
	seen := map[string]bool{}
	for _, n := range names {
		if _, ok := moderationSchemas[n]; !ok {
			return nil, fmt.Errorf("discord: %q is not a moderation tool (one of %s)", n, strings.Join(ModerationToolNames, ", "))
		}
		if seen[n] {
			return nil, fmt.Errorf("discord: moderation tool %q named twice", n)
		}
		seen[n] = true
		out = append(out, &moderationTool{name: n, s: s, now: time.Now})
	}
	return out, nil
}

// moderationTool is one built-in moderation tool.
type moderationTool struct {
	name string
	s    *discordgo.Session
	now  func() time.Time
}

var _ tools.Tool = (*moderationTool)(nil)

// modArgs are a moderation tool's validated arguments.
type modArgs struct {
	User     string
	Duration time.Duration
	Reason   string
	Days     int
	Channel  string
	Message  string
}

// Spec implements tools.Tool.
func (t *moderationTool) Spec() model.ToolSpec {
	return model.ToolSpec{Name: t.name, Description: moderationDescriptions[t.name], Parameters: json.RawMessage(moderationSchemas[t.name])}
}

// Confirm implements tools.Tool: moderation needs a person's yes.
func (t *moderationTool) Confirm() bool { return true }

func invalid(format string, a ...any) error {
	return fmt.Errorf("%w: %s", tools.ErrInvalidArgs, fmt.Sprintf(format, a...))
}

var durationRE = regexp.MustCompile(`^([0-9]{1,9}[smhdw])+$`)
var durationPartRE = regexp.MustCompile(`([0-9]+)([smhdw])`)

// parse validates arguments strictly: a JSON object with exactly the
// tool's keys, snowflakes of digits, bounded durations, days and reasons.
func (t *moderationTool) parse(raw json.RawMessage) (modArgs, error) {
	var a modArgs
	if len(bytes.TrimSpace(raw)) == 0 {
		raw = json.RawMessage("{}")
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(raw, &obj); err != nil || obj == nil {
		return a, invalid("must be a JSON object")
	}
	fields := moderationFields[t.name]
	keys := make([]string, 0, len(obj))
	for k := range obj {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if _, ok := fields[k]; !ok {
			return a, invalid("/%s: not allowed", k)
		}
	}
	names := make([]string, 0, len(fields))
	for k := range fields {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		if _, ok := obj[k]; fields[k] && !ok {
			return a, invalid("/%s: required", k)
		}
	}
	str := func(k string) (string, error) {
		var s string
		if err := json.Unmarshal(obj[k], &s); err != nil {
			return "", invalid("/%s: must be a string", k)
		}
		return s, nil
	}
	snowflake := func(k string) (string, error) {
		s, err := str(k)
		if err != nil {
			return "", err
		}
		if !isSnowflake(s) {
			return "", invalid("/%s: must be a Discord id (1 to 20 digits)", k)
		}
		return s, nil
	}
	var err error
	if _, ok := fields["user"]; ok {
		if a.User, err = snowflake("user"); err != nil {
			return a, err
		}
	}
	if _, ok := fields["channel"]; ok {
		if a.Channel, err = snowflake("channel"); err != nil {
			return a, err
		}
		if a.Message, err = snowflake("message"); err != nil {
			return a, err
		}
	}
	if _, ok := fields["reason"]; ok {
		if a.Reason, err = str("reason"); err != nil {
			return a, err
		}
		a.Reason = strings.TrimSpace(a.Reason)
		switch {
		case a.Reason == "":
			return a, invalid("/reason: must not be empty")
		case runes(a.Reason) > MaxModerationReason:
			return a, invalid("/reason: at most %d characters", MaxModerationReason)
		case visible.Contains(a.Reason):
			// It goes to the server's audit log as well as on the card.
			return a, invalid("/reason: must not hold control, bidi or invisible characters")
		}
	}
	if _, ok := fields["duration"]; ok {
		s, err := str("duration")
		if err != nil {
			return a, err
		}
		if a.Duration, err = parseDuration(s); err != nil {
			return a, invalid("/duration: %v", err)
		}
	}
	if v, ok := obj["delete_message_days"]; ok {
		var x any
		d := json.NewDecoder(bytes.NewReader(v))
		d.UseNumber()
		var n json.Number
		isNumber := d.Decode(&x) == nil
		if isNumber {
			n, isNumber = x.(json.Number)
		}
		if !isNumber {
			return a, invalid("/delete_message_days: must be an integer from 0 to 7")
		}
		days, err := strconv.Atoi(n.String())
		if err != nil || days < 0 || days > 7 {
			return a, invalid("/delete_message_days: must be an integer from 0 to 7")
		}
		a.Days = days
	}
	return a, nil
}

// parseDuration reads "10m", "1h30m", "2d", "1w": whole numbers with
// units s, m, h, d (24h), w (7d); at least 1s, at most MaxTimeout.
func parseDuration(s string) (time.Duration, error) {
	if !durationRE.MatchString(s) {
		return 0, fmt.Errorf("%q is not a duration such as 10m, 1h30m or 2d", s)
	}
	units := map[string]time.Duration{"s": time.Second, "m": time.Minute, "h": time.Hour, "d": 24 * time.Hour, "w": 7 * 24 * time.Hour}
	var total time.Duration
	for _, p := range durationPartRE.FindAllStringSubmatch(s, -1) {
		n, err := strconv.ParseInt(p[1], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("%q is too long", s)
		}
		u := units[p[2]]
		if n > int64(MaxTimeout/u) {
			return 0, fmt.Errorf("%q is longer than 28 days, Discord's limit", s)
		}
		total += time.Duration(n) * u
		if total > MaxTimeout {
			return 0, fmt.Errorf("%q is longer than 28 days, Discord's limit", s)
		}
	}
	if total < time.Second {
		return 0, fmt.Errorf("%q is shorter than 1s", s)
	}
	return total, nil
}

// humanDuration writes a duration as "1 day 2 hours 5 minutes".
func humanDuration(d time.Duration) string {
	var parts []string
	for _, u := range []struct {
		d    time.Duration
		name string
	}{{24 * time.Hour, "day"}, {time.Hour, "hour"}, {time.Minute, "minute"}, {time.Second, "second"}} {
		if n := d / u.d; n > 0 {
			name := u.name
			if n > 1 {
				name += "s"
			}
			parts = append(parts, fmt.Sprintf("%d %s", n, name))
			d -= n * u.d
		}
	}
	return strings.Join(parts, " ")
}

func oneLine(s string) string { return card.OneLine(s) }

// Summary implements tools.Tool: the read-back names the member and the
// duration or reason.
func (t *moderationTool) Summary(args json.RawMessage) (string, error) {
	a, err := t.parse(args)
	if err != nil {
		return "", err
	}
	reason := oneLine(a.Reason)
	switch t.name {
	case ToolTimeoutMember:
		return fmt.Sprintf("Time out <@%s> for %s. Reason: %s", a.User, humanDuration(a.Duration), reason), nil
	case ToolKickMember:
		return fmt.Sprintf("Kick <@%s> from the server. Reason: %s", a.User, reason), nil
	case ToolBanMember:
		switch a.Days {
		case 0:
			return fmt.Sprintf("Ban <@%s> from the server; their messages stay. Reason: %s", a.User, reason), nil
		case 1:
			return fmt.Sprintf("Ban <@%s> from the server and delete their messages of the last day. Reason: %s", a.User, reason), nil
		}
		return fmt.Sprintf("Ban <@%s> from the server and delete their messages of the last %d days. Reason: %s", a.User, a.Days, reason), nil
	case ToolDeleteMessage:
		return fmt.Sprintf("Delete message %s in <#%s>", a.Message, a.Channel), nil
	}
	return t.name, nil
}

// auditReason is the X-Audit-Log-Reason value: who approved (for a call
// several people allowed, the last of them: confirm.RunInfo.DecidedBy),
// via Airlock, and the reason, URL-encoded as Discord wants it. A call a
// grant allowed names the grant.
func auditReason(decidedBy, reason string) string {
	who := "Approved by " + decidedBy
	switch {
	case decidedBy == "" || decidedBy == bot.PolicyActor:
		who = "Allowed by policy"
	case strings.HasPrefix(decidedBy, grantActorPrefix):
		who = "Allowed by grant " + strings.TrimPrefix(decidedBy, grantActorPrefix)
	}
	text := who + " via Airlock"
	if r := oneLine(reason); r != "" {
		text += ": " + r
	}
	return url.PathEscape(truncate(text, maxAuditReason))
}

// Run implements tools.Tool: it acts in the guild of the conversation's
// channel, with the audit log reason naming the approver.
func (t *moderationTool) Run(ctx context.Context, args json.RawMessage, _ string) (string, error) {
	a, err := t.parse(args)
	if err != nil {
		return "", err
	}
	info, ok := confirm.RunInfoFrom(ctx)
	if !ok || info.Platform != Platform || info.Channel == "" {
		return "", errors.New("not executed: moderation tools act only in a conversation in a Discord server")
	}
	guild, err := t.guildOf(ctx, info.Channel)
	if err != nil {
		return "", err
	}
	opts := []discordgo.RequestOption{discordgo.WithContext(ctx), discordgo.WithAuditLogReason(auditReason(info.DecidedBy, a.Reason))}
	switch t.name {
	case ToolTimeoutMember:
		until := t.now().Add(a.Duration).UTC().Truncate(time.Second)
		if err := t.s.GuildMemberTimeout(guild, a.User, &until, opts...); err != nil {
			return "", fmt.Errorf("time out <@%s>: %w", a.User, err)
		}
		return fmt.Sprintf("Timed out <@%s> until %s.", a.User, until.Format(time.RFC3339)), nil
	case ToolKickMember:
		if err := t.s.GuildMemberDelete(guild, a.User, opts...); err != nil {
			return "", fmt.Errorf("kick <@%s>: %w", a.User, err)
		}
		return fmt.Sprintf("Kicked <@%s>.", a.User), nil
	case ToolBanMember:
		body := struct {
			DeleteMessageSeconds int `json:"delete_message_seconds"`
		}{a.Days * 24 * 60 * 60}
		if _, err := t.s.RequestWithBucketID("PUT", discordgo.EndpointGuildBan(guild, a.User), body, discordgo.EndpointGuildBan(guild, ""), opts...); err != nil {
			return "", fmt.Errorf("ban <@%s>: %w", a.User, err)
		}
		return fmt.Sprintf("Banned <@%s>.", a.User), nil
	case ToolDeleteMessage:
		where, err := t.guildOf(ctx, a.Channel)
		if err != nil {
			return "", err
		}
		if where != guild {
			return "", fmt.Errorf("not executed: channel %s is not in this server", a.Channel)
		}
		if err := t.s.ChannelMessageDelete(a.Channel, a.Message, opts...); err != nil {
			return "", fmt.Errorf("delete message %s: %w", a.Message, err)
		}
		return fmt.Sprintf("Deleted message %s in <#%s>.", a.Message, a.Channel), nil
	}
	return "", fmt.Errorf("unknown moderation tool %q", t.name)
}

// guildOf returns the guild of a channel (GET /channels/{id}).
func (t *moderationTool) guildOf(ctx context.Context, channel string) (string, error) {
	ch, err := t.s.Channel(channel, discordgo.WithContext(ctx))
	if err != nil {
		return "", fmt.Errorf("look up channel %s: %w", channel, err)
	}
	if ch.GuildID == "" {
		return "", fmt.Errorf("not executed: channel %s is not in a Discord server", channel)
	}
	return ch.GuildID, nil
}

// moderationPermissions are the permissions each tool needs.
var moderationPermissions = map[string]int64{
	ToolTimeoutMember: discordgo.PermissionModerateMembers,
	ToolKickMember:    discordgo.PermissionKickMembers,
	ToolBanMember:     discordgo.PermissionBanMembers,
	ToolDeleteMessage: discordgo.PermissionManageMessages,
}

func knownModerationTool(name string) bool { return slices.Contains(ModerationToolNames, name) }
