package confirm

import (
	"context"
	"time"
)

// InboxItem is one interaction or message a platform delivered, as the
// inbox recorded it before it was acknowledged: its platform, the
// platform's id of it (Key: a retried delivery has the same), what the
// adapter says it is (Kind) and its payload as received.
type InboxItem struct {
	Platform   string
	Key        string
	Kind       string
	Payload    []byte
	ReceivedAt time.Time
	// Attempts counts the inbox job's claims of it (0: only its receiver
	// worked on it).
	Attempts int
}

// InboxStore is the inbox: every interaction and mention is recorded in
// it before it is acknowledged, so a process killed between the
// acknowledgement and the work loses nothing. The receiver holds what it
// recorded (a claim it renews while it works) and marks it done; one
// left unfinished is claimed, once its claim lapsed, by exactly one
// replica's inbox job and worked again.
type InboxStore interface {
	// RecordInbox stores it, claimed by worker for ttl from the store's
	// clock (ReceivedAt is the store's clock too); false, and nothing
	// written, when the platform's key is recorded already (a retried
	// delivery).
	RecordInbox(ctx context.Context, it InboxItem, worker string, ttl time.Duration) (bool, error)
	// FinishInbox marks a delivery done and drops its payload; done
	// already is no error.
	FinishInbox(ctx context.Context, platform, key string) error
	// RenewInbox extends worker's claims on the deliveries it has not
	// finished to ttl from now; how many.
	RenewInbox(ctx context.Context, worker string, ttl time.Duration) (int64, error)
	// ClaimInbox claims for worker, for ttl, up to limit deliveries of the
	// platforms not finished whose claim lapsed (or was cleared) and is
	// not worker's own (a live worker is working on what it holds), oldest
	// first, each by one conditional UPDATE (one caller wins each), and
	// counts an attempt on each.
	ClaimInbox(ctx context.Context, worker string, platforms []string, ttl time.Duration, limit int) ([]InboxItem, error)
	// ReleaseInbox gives worker's claim on a delivery up, so the next
	// claim takes it at once; the claim's attempt is not counted.
	ReleaseInbox(ctx context.Context, platform, key, worker string) error
	// AppendInboxMessage appends a turn's message (as AppendMessages) and
	// records it as the delivery's message, in one transaction.
	AppendInboxMessage(ctx context.Context, conversationID int64, platform, key string, m Message) error
	// InboxMessage is the message AppendInboxMessage recorded for a
	// delivery; ok false when none was.
	InboxMessage(ctx context.Context, platform, key string) (conversationID int64, seq int, ok bool, err error)
	// PruneInbox forgets deliveries received before the time.
	PruneInbox(ctx context.Context, before time.Time) (int64, error)
}
