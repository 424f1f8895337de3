package bot

import (
	"context"
	"slices"
	"sync"

	"github.com/airlockhq/airlock/confirm"
)

// DMChannel is the channel id of the entry that serves direct messages.
// "*" never covers them: a DM reaches the bot from anyone in the workspace,
// so serving DMs is a separate, explicit choice.
const DMChannel = "dm"

// Channel is one `channels[]` entry: a channel of a platform the bot serves,
// who may ask there, who may approve there, and which tools are offered.
// ID "*" covers every channel of the platform except direct messages; ID
// DMChannel covers direct messages.
type Channel struct {
	Platform string
	ID       string

	Approvers      []string // platform user ids
	ApproverGroups []string // Slack user group ids, resolved with a GroupResolver
	ApproverRoles  []string // Discord role ids, matched against the clicker's roles

	// Requesters, RequesterGroups and RequesterRoles, when any is set,
	// are the only people whose messages are turns (or context) there.
	Requesters      []string
	RequesterGroups []string
	RequesterRoles  []string

	// Tools, when not nil, are the only tools offered to the model there.
	Tools []string
	// Runbooks, when not nil, are the only runbooks offered there.
	Runbooks []string

	// ApprovalsChannel, when set, is where cards of this entry are posted
	// (a new message, not in a thread); the thread gets a pointer to it.
	// The approvers stay this entry's.
	ApprovalsChannel string
	// Notify lists extra places each card goes: NotifyDM sends a copy to
	// each approver's direct messages.
	Notify []string
}

// NotifyDM in Channel.Notify: approvers get a copy of each card in a DM.
const NotifyDM = "dm"

// MaxDMCopies caps the DM copies of one card (users listed plus members of
// approver groups).
const MaxDMCopies = 25

// GroupResolver lists the user ids of a platform's user group.
type GroupResolver func(ctx context.Context, groupID string) ([]string, error)

// Channels answers, per channel, whether the bot serves it, who may ask
// and approve there, and which tools are offered. A channel without an
// entry is not served and has no approvers.
type Channels struct {
	entries []Channel

	mu        sync.Mutex
	resolvers map[string]GroupResolver
}

// NewChannels builds the lookup from config entries.
func NewChannels(entries []Channel) *Channels {
	return &Channels{entries: entries}
}

// SetGroupResolver installs the platform's user group lookup (Slack's
// usergroups.users.list, cached by the adapter).
func (a *Channels) SetGroupResolver(platform string, r GroupResolver) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.resolvers == nil {
		a.resolvers = map[string]GroupResolver{}
	}
	a.resolvers[platform] = r
}

// entry returns the entry for a channel: the exact channel's entry wins
// over the platform's "*" entry; a direct message has only the DMChannel
// entry.
func (a *Channels) entry(platform, channel string, dm bool) (Channel, bool) {
	var wildcard *Channel
	for i, e := range a.entries {
		if e.Platform != platform {
			continue
		}
		if dm {
			if e.ID == DMChannel {
				return e, true
			}
			continue
		}
		if e.ID == channel && e.ID != DMChannel {
			return e, true
		}
		if e.ID == "*" && wildcard == nil {
			wildcard = &a.entries[i]
		}
	}
	if wildcard != nil {
		return *wildcard, true
	}
	return Channel{}, false
}

// Serves reports whether an entry covers the channel.
func (a *Channels) Serves(platform, channel string, dm bool) bool {
	_, ok := a.entry(platform, channel, dm)
	return ok
}

// For returns who may approve in the channel.
func (a *Channels) For(platform, channel string, dm bool) confirm.Approvers {
	e, _ := a.entry(platform, channel, dm)
	return confirm.Approvers{Users: e.Approvers, Groups: e.ApproverGroups, Roles: e.ApproverRoles}
}

// Route returns where the channel's cards go: an approvals channel ("":
// the thread) and whether approvers get DM copies.
func (a *Channels) Route(platform, channel string, dm bool) (approvals string, dmCopies bool) {
	e, _ := a.entry(platform, channel, dm)
	return e.ApprovalsChannel, slices.Contains(e.Notify, NotifyDM)
}

// People lists the user ids of a set: its users, then members of its
// groups (resolved on the platform), without repeats, at most max. Roles
// are not expanded.
func (a *Channels) People(ctx context.Context, platform string, set confirm.Approvers, max int) []string {
	var out []string
	add := func(u string) {
		if u != "" && len(out) < max && !slices.Contains(out, u) {
			out = append(out, u)
		}
	}
	for _, u := range set.Users {
		add(u)
	}
	a.mu.Lock()
	resolve := a.resolvers[platform]
	a.mu.Unlock()
	if resolve == nil {
		return out
	}
	for _, g := range set.Groups {
		if len(out) >= max {
			break
		}
		members, err := resolve(ctx, g)
		if err != nil {
			continue
		}
		for _, u := range members {
			add(u)
		}
	}
	return out
}

// Admits reports whether the user belongs to the set (a listed user, a
// holder of a listed role, a member of a listed group) on the platform.
func (a *Channels) Admits(ctx context.Context, platform, user string, roles []string, set confirm.Approvers) bool {
	return user != "" && a.member(ctx, platform, user, roles, set.Users, set.Groups, set.Roles)
}

// ToolAllowed reports whether the tool is offered in the channel.
func (a *Channels) ToolAllowed(platform, channel string, dm bool, tool string) bool {
	e, ok := a.entry(platform, channel, dm)
	if !ok {
		return false
	}
	return e.Tools == nil || slices.Contains(e.Tools, tool)
}

// MayAsk reports whether the user's messages are turns in the channel:
// the channel is served and either it lists no requesters or the user is
// one (by id, role or group membership).
func (a *Channels) MayAsk(ctx context.Context, platform, channel string, dm bool, user string, roles []string) bool {
	e, ok := a.entry(platform, channel, dm)
	if !ok || user == "" {
		return false
	}
	if len(e.Requesters) == 0 && len(e.RequesterGroups) == 0 && len(e.RequesterRoles) == 0 {
		return true
	}
	return a.member(ctx, platform, user, roles, e.Requesters, e.RequesterGroups, e.RequesterRoles)
}

// CanApprove reports whether the user may decide calls in the channel:
// listed as a user, holding a listed role, or a member of a listed group.
// A group that cannot be resolved grants nothing.
func (a *Channels) CanApprove(ctx context.Context, platform, channel string, dm bool, user string, roles []string) bool {
	if user == "" {
		return false
	}
	e, ok := a.entry(platform, channel, dm)
	if !ok {
		return false
	}
	return a.member(ctx, platform, user, roles, e.Approvers, e.ApproverGroups, e.ApproverRoles)
}

func (a *Channels) member(ctx context.Context, platform, user string, roles, users, groups, listedRoles []string) bool {
	if slices.Contains(users, user) {
		return true
	}
	for _, r := range roles {
		if slices.Contains(listedRoles, r) {
			return true
		}
	}
	if len(groups) == 0 {
		return false
	}
	a.mu.Lock()
	resolve := a.resolvers[platform]
	a.mu.Unlock()
	if resolve == nil {
		return false
	}
	for _, g := range groups {
		members, err := resolve(ctx, g)
		if err == nil && slices.Contains(members, user) {
			return true
		}
	}
	return false
}
