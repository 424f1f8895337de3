package bot

import (
	"context"
	"slices"
	"sync"
)

// ChannelApprovers says who may approve in one channel of a platform
// (config `channels[]`). ID "*" covers every channel of the platform.
type ChannelApprovers struct {
	Platform string
	ID       string
	Users    []string // platform user ids
	Groups   []string // Slack user group ids, resolved with a GroupResolver
	Roles    []string // Discord role ids, matched against the clicker's roles
}

// ApproverSet is who may approve in a channel, for display on a card.
type ApproverSet struct {
	Users  []string
	Groups []string
	Roles  []string
}

// Empty reports whether nobody may approve.
func (s ApproverSet) Empty() bool {
	return len(s.Users) == 0 && len(s.Groups) == 0 && len(s.Roles) == 0
}

// GroupResolver lists the user ids of a platform's user group.
type GroupResolver func(ctx context.Context, groupID string) ([]string, error)

// Approvers answers whether a user may decide calls in a channel.
type Approvers struct {
	entries []ChannelApprovers

	mu        sync.Mutex
	resolvers map[string]GroupResolver
}

// NewApprovers builds the lookup from config entries.
func NewApprovers(entries []ChannelApprovers) *Approvers {
	return &Approvers{entries: entries}
}

// SetGroupResolver installs the platform's user group lookup (Slack's
// usergroups.users.list, cached by the adapter).
func (a *Approvers) SetGroupResolver(platform string, r GroupResolver) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.resolvers == nil {
		a.resolvers = map[string]GroupResolver{}
	}
	a.resolvers[platform] = r
}

func (a *Approvers) entry(platform, channel string) (ChannelApprovers, bool) {
	var wildcard *ChannelApprovers
	for i, e := range a.entries {
		if e.Platform != platform {
			continue
		}
		if e.ID == channel {
			return e, true
		}
		if e.ID == "*" && wildcard == nil {
			wildcard = &a.entries[i]
		}
	}
	if wildcard != nil {
		return *wildcard, true
	}
	return ChannelApprovers{}, false
}

// For returns who may approve in the channel: an entry for the exact
// channel wins over the platform's "*" entry.
func (a *Approvers) For(platform, channel string) ApproverSet {
	e, _ := a.entry(platform, channel)
	return ApproverSet{Users: e.Users, Groups: e.Groups, Roles: e.Roles}
}

// CanApprove reports whether the clicker may decide calls in the click's
// channel: listed as a user, holding a listed role, or a member of a
// listed group. A group that cannot be resolved grants nothing.
func (a *Approvers) CanApprove(ctx context.Context, c Click) bool {
	if c.User == "" || c.IsBot {
		return false
	}
	e, ok := a.entry(c.Platform, c.Channel)
	if !ok {
		return false
	}
	if slices.Contains(e.Users, c.User) {
		return true
	}
	for _, r := range c.Roles {
		if slices.Contains(e.Roles, r) {
			return true
		}
	}
	a.mu.Lock()
	resolve := a.resolvers[c.Platform]
	a.mu.Unlock()
	if resolve == nil {
		return false
	}
	for _, g := range e.Groups {
		members, err := resolve(ctx, g)
		if err == nil && slices.Contains(members, c.User) {
			return true
		}
	}
	return false
}
