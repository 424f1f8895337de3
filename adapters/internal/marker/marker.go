// Package marker writes and finds the mention markers the chat adapters
// hand the bot for a reminder: private-use characters around
// "<nonce>:<id>", the nonce a secret of the adapter, so that the same
// characters written by a model are never taken for a mention.
package marker

import (
	"regexp"
	"strings"
)

// The private-use characters a marker starts and ends with.
const (
	Open  = "\uE000"
	Close = "\uE001"
)

// Set collects the markers of one set of approvers.
type Set struct {
	Nonce string
	out   []string
}

// Add adds a marker of prefix+id for each of ids valid accepts; the
// others are left out.
func (m *Set) Add(prefix string, ids []string, valid func(string) bool) {
	for _, id := range ids {
		if valid(id) {
			m.out = append(m.out, Open+m.Nonce+":"+prefix+id+Close)
		}
	}
}

// String is the markers, joined with ", ".
func (m *Set) String() string { return strings.Join(m.out, ", ") }

// Pattern matches a marker whose part after "<nonce>:" matches id (a
// regular expression with its own groups); the first group is the nonce.
func Pattern(id string) *regexp.Regexp {
	return regexp.MustCompile(Open + "([A-Z0-9]+):" + id + Close)
}
