// Package cardref is the reference of a card posted as several messages
// (a card with more calls than one message holds): the references of its
// messages, comma-separated, in the order they were posted. Slack and
// Discord post and update a card through it.
package cardref

import "strings"

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
