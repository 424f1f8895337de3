// Package cardref is the reference of a card posted as several messages
// (a card with more calls than one message holds): the references of its
// messages, comma-separated, in the order they were posted. Slack and
// Discord post and update a card through it, with one answer to a
// message of it gone or rate limited.
package cardref

import (
	"errors"
	"strings"

	"github.com/airlockhq/airlock/bot"
)

// Post posts msgs in order, each with post, and returns the card's
// reference. A post that fails part way returns the reference of the
// messages posted so far with its error.
func Post[M any](msgs []M, post func(M) (string, error)) (string, error) {
	var refs []string
	for _, m := range msgs {
		ref, err := post(m)
		if err != nil {
			return strings.Join(refs, ","), err
		}
		refs = append(refs, ref)
	}
	return strings.Join(refs, ","), nil
}

// Split returns the references of a card's messages, in order.
func Split(ref string) []string { return strings.Split(ref, ",") }

// Update updates a card's messages, refs in order, each with update(i,
// ref). It is card sync's, so its answer is a card's:
//   - a rate limit (an error wrapping *bot.RateLimitedError) stops it at
//     once and is returned: card sync sends every message again after it;
//   - a message deleted on the platform (bot.ErrMessageGone) is skipped,
//     and only when every message is gone is the card gone: the gone
//     errors, joined, are returned; else they are given to gone (to log);
//   - other failures are returned together, after every message was
//     tried.
func Update(refs []string, update func(i int, ref string) error, gone func(error)) error {
	var lost, failed []error
	for i, r := range refs {
		err := update(i, r)
		var rl *bot.RateLimitedError
		switch {
		case err == nil:
		case errors.As(err, &rl):
			return err
		case errors.Is(err, bot.ErrMessageGone):
			lost = append(lost, err)
		default:
			failed = append(failed, err)
		}
	}
	if len(failed) > 0 {
		return errors.Join(failed...)
	}
	if len(lost) == len(refs) {
		return errors.Join(lost...)
	}
	for _, err := range lost {
		gone(err)
	}
	return nil
}
