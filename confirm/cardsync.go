package confirm

import (
	"context"
	"time"
)

// CardSync is one card message claimed to be rendered again: the
// message, and Version, the version of its batch's state it should show,
// read when it was claimed. The renderer loads the batch after the claim
// (so the state it renders is at least that version), renders it, and
// records Version as rendered.
type CardSync struct {
	ID        int64  // the message's row
	Holder    string // who claimed it (CardRendered, CardRetry and CardGone name it)
	Message   CardMessage
	Version   int64
	ChangedAt time.Time // the oldest change not yet rendered
	Failures  int       // failed attempts since it last rendered
}

// CardClaim asks for a change of a batch's card with its claims
// (CardSyncStore.ChangeAndClaimCards): up to Limit of the batch's
// messages behind are claimed for Holder until TTL.
type CardClaim struct {
	Holder string
	TTL    time.Duration
	Limit  int
}

// CardSyncStore keeps every card message's desired and rendered version
// (see the card-sync job). Each transition is one conditional write.
type CardSyncStore interface {
	// ChangeCard records a change of a batch's state that its card
	// messages show: the batch's card version goes up by one, and with it
	// every message's desired version (not a gone one's). No error for a
	// batch without messages.
	ChangeCard(ctx context.Context, batchID string) error
	// ChangeAndClaimCards is ChangeCard and, in the same transaction,
	// ClaimCard for holder of up to limit of the batch's messages then
	// behind that may be claimed, lowest id first, for the change's own
	// render. listed reports whether the batch has messages at all (gone
	// ones included).
	ChangeAndClaimCards(ctx context.Context, batchID, holder string, ttl time.Duration, limit int) (claimed []CardSync, listed bool, err error)
	// CardVersion is a batch's card version (0 for an unknown batch).
	// Read before loading the batch to post a message, it is the
	// message's rendered version (CardMessage.Version).
	CardVersion(ctx context.Context, batchID string) (int64, error)
	// BehindCards lists up to limit messages behind their batch (desired
	// above rendered), not gone, not waiting (retry at, by the store's
	// clock) and not claimed by a live claim, oldest change first;
	// platform and batchID filter ("" any).
	BehindCards(ctx context.Context, platform, batchID string, limit int) ([]int64, error)
	// ClaimCard claims a message behind for holder until ttl from the
	// store's clock; ok is false (and nothing changed) when it is not
	// behind, gone, waiting, or claimed by another live holder. The
	// affected-row count decides across replicas.
	ClaimCard(ctx context.Context, id int64, holder string, ttl time.Duration) (c CardSync, ok bool, err error)
	// CardRendered records that holder rendered version (rendered never
	// goes down), clears the failures and the wait, and ends the claim;
	// false when holder no longer held it. The message is in sync when
	// no change came since.
	CardRendered(ctx context.Context, id int64, holder string, version int64) (bool, error)
	// CardRetry ends holder's claim and keeps the message behind, not
	// retried before after has passed by the store's clock; failed counts
	// one more failure (a rate limit is not one).
	CardRetry(ctx context.Context, id int64, holder string, after time.Duration, failed bool) error
	// CardGone marks a message the platform no longer has: it is never
	// rendered again.
	CardGone(ctx context.Context, id int64, holder string) error
	// CardsBehind counts the messages behind (gone ones aside).
	CardsBehind(ctx context.Context) (int, error)

	// ChangeAndClaim is ChangeAndClaimCards of any subject: a batch, a
	// runbook run (its run message) or a grant (its notice). listed is
	// false, and nothing claimed, for a subject without messages or
	// unknown.
	ChangeAndClaim(ctx context.Context, s Subject, claim CardClaim) (claimed []CardSync, listed bool, err error)
	// SubjectVersion is CardVersion of any subject.
	SubjectVersion(ctx context.Context, s Subject) (int64, error)
}
