package discord

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/bwmarrin/discordgo"

	"github.com/airlockhq/airlock/confirm"
)

// Discord refuses to kick, ban or time out a member unless the bot's
// highest role is above the member's highest role, and nobody acts on the
// server's owner; nobody can time out an administrator, and only members
// can be kicked or timed out. A moderation call Discord would refuse is
// invalid when it is validated, before any card: the model gets the
// reason, and no approver is asked for something that cannot run.
//
// Which server: a tool's Validate gets only the arguments, not the
// conversation. It therefore asks, for every server the bot is in (from
// the gateway: READY, GUILD_CREATE), whether Discord would refuse the call
// there, and refuses it only when every one of them would, so it never
// refuses a call that could run in the conversation's server. With the
// bot in one server, as most are, that is exactly the conversation's
// server. ValidateContext, given a context carrying confirm.RunInfo,
// checks the conversation's server alone.
//
// Where the facts come from: the server's roles and owner from discordgo's
// state, which the gateway keeps current (GUILD_CREATE, GUILD_UPDATE,
// GUILD_ROLE_CREATE/UPDATE/DELETE), else GET /guilds/{id}; the two members
// (the bot and the target) always from GET /guilds/{id}/members/{user},
// because without the privileged Server Members intent the gateway does
// not report members' role changes. What cannot be learnt (a REST error, a
// timeout) lets the call through to its card, as before; Discord still
// refuses it at run time.

// reachTimeout bounds the lookups of one validation.
const reachTimeout = 5 * time.Second

// maxReachGuilds is the most servers a validation without a conversation
// looks at; a bot in more servers is not checked there.
const maxReachGuilds = 10

// actsOnMember reports whether a tool acts on a member (the hierarchy
// applies).
func actsOnMember(tool string) bool {
	return tool == ToolTimeoutMember || tool == ToolKickMember || tool == ToolBanMember
}

// verbs say what a tool does to a member, for messages.
var verbs = map[string]string{ToolTimeoutMember: "time out", ToolKickMember: "kick", ToolBanMember: "ban"}

// Validate implements tools.Tool: the arguments (strictly, see parse),
// then, for a tool acting on a member, whether Discord would let the bot
// act on them (see above).
func (t *moderationTool) Validate(args json.RawMessage) error {
	a, err := t.parse(args)
	if err != nil {
		return err
	}
	return t.reachAny(context.Background(), a)
}

// ValidateContext is Validate for a caller that knows the conversation:
// with confirm.RunInfo in ctx (Platform and Channel are used) it checks
// the arguments and, in the conversation's server only, whether Discord
// would let the bot act on the member; a conversation outside a Discord
// server cannot run the tool at all. Without RunInfo it is Validate.
func (t *moderationTool) ValidateContext(ctx context.Context, args json.RawMessage) error {
	a, err := t.parse(args)
	if err != nil {
		return err
	}
	info, ok := confirm.RunInfoFrom(ctx)
	if !ok {
		return t.reachAny(ctx, a)
	}
	if info.Platform != Platform || info.Channel == "" {
		return invalid("moderation tools act only in a conversation in a Discord server")
	}
	if t.s == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, reachTimeout)
	defer cancel()
	ch, err := t.s.Channel(info.Channel, discordgo.WithContext(ctx))
	if err != nil {
		return nil // unknown: Run reports what Discord says
	}
	if ch.GuildID == "" {
		return invalid("moderation tools act only in a conversation in a Discord server, not in a direct message")
	}
	if !actsOnMember(t.name) {
		return nil
	}
	return t.blocker(ctx, ch.GuildID, a)
}

// reachAny refuses a call on a member when, in every server the bot is in
// (at most maxReachGuilds), Discord would refuse it; the first server's
// reason is the message.
func (t *moderationTool) reachAny(ctx context.Context, a modArgs) error {
	if t.s == nil || t.s.State == nil || !actsOnMember(t.name) {
		return nil
	}
	guilds := t.guilds()
	if len(guilds) == 0 || len(guilds) > maxReachGuilds {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, reachTimeout)
	defer cancel()
	var first error
	for _, g := range guilds {
		why := t.blocker(ctx, g, a)
		if why == nil {
			return nil // it may run there
		}
		if first == nil {
			first = why
		}
	}
	return first
}

// guilds are the ids of the servers the bot is in, from the gateway.
func (t *moderationTool) guilds() []string {
	st := t.s.State
	st.RLock()
	defer st.RUnlock()
	var out []string
	for _, g := range st.Guilds {
		if g != nil && g.ID != "" {
			out = append(out, g.ID)
		}
	}
	return out
}

// selfID is the bot's user id: from READY, else the token's first
// segment (which is the bot user's id).
func (t *moderationTool) selfID() string {
	st := t.s.State
	st.RLock()
	u := st.User
	st.RUnlock()
	if u != nil && u.ID != "" {
		return u.ID
	}
	id, _ := ApplicationID(t.s.Token)
	return id
}

// guildFacts are what the hierarchy needs of a server.
type guildFacts struct {
	owner string
	roles map[string]discordgo.Role // by id; @everyone has the guild's id
}

// facts returns the server's owner and roles: from the gateway's state
// when it has them, else from GET /guilds/{id}.
func (t *moderationTool) facts(ctx context.Context, guild string) (guildFacts, bool) {
	st := t.s.State
	st.RLock()
	var f guildFacts
	for _, g := range st.Guilds {
		if g == nil || g.ID != guild || g.Unavailable || g.OwnerID == "" || len(g.Roles) == 0 {
			continue
		}
		f = guildFacts{owner: g.OwnerID, roles: rolesByID(g.Roles)}
	}
	st.RUnlock()
	if f.owner != "" {
		return f, true
	}
	g, err := t.s.Guild(guild, discordgo.WithContext(ctx))
	if err != nil || g == nil || g.OwnerID == "" {
		return guildFacts{}, false
	}
	return guildFacts{owner: g.OwnerID, roles: rolesByID(g.Roles)}, true
}

func rolesByID(rs []*discordgo.Role) map[string]discordgo.Role {
	m := make(map[string]discordgo.Role, len(rs))
	for _, r := range rs {
		if r != nil {
			m[r.ID] = *r
		}
	}
	return m
}

// member returns a member's role ids (GET /guilds/{id}/members/{user});
// found is false when Discord says they are not a member; ok is false
// when it could not be learnt.
func (t *moderationTool) member(ctx context.Context, guild, user string) (roles []string, found, ok bool) {
	m, err := t.s.GuildMember(guild, user, discordgo.WithContext(ctx))
	if err != nil {
		var rest *discordgo.RESTError
		if errors.As(err, &rest) && rest.Response != nil && rest.Response.StatusCode == http.StatusNotFound {
			return nil, false, true
		}
		return nil, false, false
	}
	return m.Roles, true, true
}

// blocker is why Discord would refuse the call in the server, or nil when
// it would not or that cannot be learnt.
func (t *moderationTool) blocker(ctx context.Context, guild string, a modArgs) error {
	verb := verbs[t.name]
	f, ok := t.facts(ctx, guild)
	if !ok {
		return nil
	}
	if a.User == f.owner {
		return invalid("<@%s> owns this server, and Discord lets nobody %s the owner", a.User, verb)
	}
	target, isMember, ok := t.member(ctx, guild, a.User)
	switch {
	case !ok:
		return nil
	case !isMember && t.name == ToolBanMember:
		return nil // anyone can be banned by id
	case !isMember:
		return invalid("<@%s> is not a member of this server, so there is nobody to %s", a.User, verb)
	}
	self := t.selfID()
	if self == "" || self == f.owner {
		return nil
	}
	mine, isMember, ok := t.member(ctx, guild, self)
	if !ok || !isMember {
		return nil
	}
	botTop, theirTop := topRole(f, guild, mine), topRole(f, guild, target)
	switch {
	case !above(botTop, theirTop) && theirTop.ID == botTop.ID:
		return invalid("Airlock's role is not above <@%s>'s highest role (they hold the same role), so it cannot %s them; move Airlock's role above theirs in Server Settings → Roles", a.User, verb)
	case !above(botTop, theirTop):
		return invalid("Airlock's role is below <@%s>'s highest role, so it cannot %s them; move Airlock's role above theirs in Server Settings → Roles", a.User, verb)
	}
	if t.name == ToolTimeoutMember && permissions(f, guild, target)&discordgo.PermissionAdministrator != 0 {
		return invalid("<@%s> has the Administrator permission, and Discord lets nobody time out an administrator", a.User)
	}
	return nil
}

// topRole is a member's highest role: @everyone (the guild's id,
// position 0) when they hold none the server lists.
func topRole(f guildFacts, guild string, roles []string) discordgo.Role {
	top, ok := f.roles[guild]
	if !ok {
		top = discordgo.Role{ID: guild}
	}
	for _, id := range roles {
		if r, ok := f.roles[id]; ok && above(r, top) {
			top = r
		}
	}
	return top
}

// above reports whether role a is higher than role b: a higher position,
// or, at the same position, the older role (the smaller id), as Discord
// orders them.
func above(a, b discordgo.Role) bool {
	if a.Position != b.Position {
		return a.Position > b.Position
	}
	x, errx := strconv.ParseUint(a.ID, 10, 64)
	y, erry := strconv.ParseUint(b.ID, 10, 64)
	return errx == nil && erry == nil && x < y
}

// permissions are a member's server-wide permissions: @everyone's and
// their roles'.
func permissions(f guildFacts, guild string, roles []string) int64 {
	p := f.roles[guild].Permissions
	for _, id := range roles {
		p |= f.roles[id].Permissions
	}
	return p
}
