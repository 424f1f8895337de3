package confirm

import (
	"errors"
	"strconv"
	"strings"
)

// refSep separates the batch id from the call position in a reference.
const refSep = "."

// Ref is the opaque reference a button carries: the batch and the call's
// position. The server owns the request; the reference names it only.
func Ref(batchID string, position int) string {
	return batchID + refSep + strconv.Itoa(position)
}

// ErrBadRef: the reference is not one Airlock issued.
var ErrBadRef = errors.New("unknown or malformed button reference")

// ParseRef splits a reference made by Ref.
func ParseRef(ref string) (batchID string, position int, err error) {
	if len(ref) > 100 {
		return "", 0, ErrBadRef
	}
	id, pos, ok := strings.Cut(ref, refSep)
	if !ok || id == "" || pos == "" {
		return "", 0, ErrBadRef
	}
	for _, r := range id {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9') {
			return "", 0, ErrBadRef
		}
	}
	n, err := strconv.Atoi(pos)
	if err != nil || n < 0 || n > 10000 || strconv.Itoa(n) != pos {
		return "", 0, ErrBadRef
	}
	return id, n, nil
}

// grantRefPrefix starts a grant's reference (its notice's Revoke button).
const grantRefPrefix = "grant-"

// GrantRef is the opaque reference of a grant's Revoke button.
func GrantRef(grantID string) string { return grantRefPrefix + grantID }

// ParseGrantRef returns the grant id of a reference made by GrantRef.
func ParseGrantRef(ref string) (string, error) {
	id, ok := strings.CutPrefix(ref, grantRefPrefix)
	if !ok || id == "" || len(ref) > 100 {
		return "", ErrBadRef
	}
	for _, r := range id {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9') {
			return "", ErrBadRef
		}
	}
	return id, nil
}
