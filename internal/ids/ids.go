// Package ids makes Airlock's random identifiers: of batches, grants,
// runbook runs, webhook events and inbox deliveries, and the unique part
// of a process's worker name.
package ids

import (
	"crypto/rand"
	"encoding/base32"
)

// encoding is base32 with a lowercase alphabet and no padding.
var encoding = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)

// New returns a random opaque id: 16 bytes from crypto/rand, in base32
// lowercase without padding (26 characters of a-z and 2-7).
func New() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // never fails: crypto/rand crashes the program rather than return an error
	return encoding.EncodeToString(b[:])
}
