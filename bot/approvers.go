package bot

import (
	"context"
	"slices"
)

// ChannelApprovers says who may approve in one channel of a platform
// (config `channels[]`). ID "*" covers every channel of the platform.
type ChannelApprovers struct {
	Platform string
	ID       string
	Users    []string
}

// Approvers answers whether a user may decide calls in a channel.
type Approvers struct {
	entries []ChannelApprovers
}

// NewApprovers builds the lookup from config entries.
func NewApprovers(entries []ChannelApprovers) *Approvers {
	return &Approvers{entries: entries}
}

// For returns the approver user ids of a channel: an entry for the exact
// channel wins over the platform's "*" entry.
func (a *Approvers) For(platform, channel string) []string {
	var wildcard []string
	for _, e := range a.entries {
		if e.Platform != platform {
			continue
		}
		if e.ID == channel {
			return e.Users
		}
		if e.ID == "*" {
			wildcard = e.Users
		}
	}
	return wildcard
}

// CanApprove reports whether user may decide calls in the channel.
func (a *Approvers) CanApprove(_ context.Context, platform, channel, user string) bool {
	return user != "" && slices.Contains(a.For(platform, channel), user)
}
