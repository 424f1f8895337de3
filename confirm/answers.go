package confirm

import (
	"context"
	"time"
)

// Answer is a message of a conversation's history stored to be posted in
// its thread (the model's answer, or the notice that ends a turn) and not
// posted yet: the message at Seq, held by Holder ("" nobody) while a post
// of it is under way. Attempts counts the posts tried: its storer's, then
// one per claim.
type Answer struct {
	ID             int64
	ConversationID int64
	Seq            int
	CreatedAt      time.Time
	Attempts       int
	Holder         string
}

// AnswerStore keeps the answers not yet posted, so that an answer stored
// is posted even when the process that stored it dies before its post, or
// the platform refuses the post: whoever holds an answer posts it and
// forgets it; one whose claim lapsed (its holder died) or that was given
// back (its post failed, and its retry is due) is claimed by exactly one
// process and posted. The text is never kept here: it is the message's.
type AnswerStore interface {
	// AppendAnswer appends msgs (as AppendMessages, setting their Seq) and
	// marks the last of them an answer to post, held by holder for ttl
	// from the store's clock, in one transaction. earlier reports whether
	// the conversation holds older answers not yet posted (they go first).
	AppendAnswer(ctx context.Context, conversationID int64, holder string, ttl time.Duration, msgs ...Message) (a Answer, earlier bool, err error)
	// Answers lists the conversation's answers not yet posted, oldest
	// (lowest Seq) first.
	Answers(ctx context.Context, conversationID int64) ([]Answer, error)
	// DueAnswers lists up to limit conversations of the platforms whose
	// oldest answer not yet posted may be claimed now (nobody holds it or
	// its claim lapsed, and its retry is due), oldest answer first.
	DueAnswers(ctx context.Context, platforms []string, limit int) ([]int64, error)
	// ClaimAnswer claims an answer for holder for ttl when it may be
	// claimed now (as DueAnswers), by one conditional UPDATE (one caller
	// wins), counting an attempt; false when it may not (or is gone).
	ClaimAnswer(ctx context.Context, id int64, holder string, ttl time.Duration) (Answer, bool, error)
	// RenewAnswer extends holder's claim on an answer to ttl from now;
	// false when holder no longer holds it.
	RenewAnswer(ctx context.Context, id int64, holder string, ttl time.Duration) (bool, error)
	// RetryAnswer gives holder's claim on an answer whose post failed
	// back: it may be claimed again once after has passed.
	RetryAnswer(ctx context.Context, id int64, holder string, after time.Duration) error
	// ReleaseAnswer gives holder's claim on an answer back untried (an
	// older answer of its conversation must go first): it may be claimed
	// at once, and the claim's attempt is not counted.
	ReleaseAnswer(ctx context.Context, id int64, holder string) error
	// AnswerPosted forgets an answer: posted (or given up), whoever holds
	// it. Forgotten already is no error.
	AnswerPosted(ctx context.Context, id int64) error
}
