package confirm

import (
	"errors"
	"strconv"
	"strings"
)

// refSep separates the batch id from the call position in a reference.
const refSep = "."

// Ref is the opaque reference a button carries: the batch and the call's
// position. The server owns the request; the reference names it only. It
// is the reference at revision 0 of the call's arguments (see RefAt).
func Ref(batchID string, position int) string {
	return batchID + refSep + strconv.Itoa(position)
}

// RefAt is the reference of a call's buttons, forms and views while its
// arguments are at revision (0 before any edit; each edit adds one): a
// click carrying an older revision was made on what its giver saw before
// an edit, and changes nothing. Revision 0 is written as Ref writes it, so
// buttons posted before revisions existed name revision 0.
func RefAt(batchID string, position, revision int) string {
	if revision == 0 {
		return Ref(batchID, position)
	}
	return Ref(batchID, position) + refSep + strconv.Itoa(revision)
}

// ErrBadRef: the reference is not one Airlock issued.
var ErrBadRef = errors.New("unknown or malformed button reference")

// CallRef is a call reference, parsed.
type CallRef struct {
	Batch    string
	Position int
	Revision int // the revision of the arguments the button, form or view showed
}

// ParseRef splits a reference made by Ref or RefAt, dropping the revision.
func ParseRef(ref string) (batchID string, position int, err error) {
	r, err := ParseCallRef(ref)
	return r.Batch, r.Position, err
}

// ParseCallRef splits a reference made by RefAt.
func ParseCallRef(ref string) (CallRef, error) {
	if len(ref) > 100 {
		return CallRef{}, ErrBadRef
	}
	id, rest, ok := strings.Cut(ref, refSep)
	if !ok || !isID(id) || rest == "" {
		return CallRef{}, ErrBadRef
	}
	pos, rev, hasRev := strings.Cut(rest, refSep)
	n, ok := refNumber(pos)
	if !ok {
		return CallRef{}, ErrBadRef
	}
	out := CallRef{Batch: id, Position: n}
	if hasRev {
		// Revision 0 is never written out: ".0" is not a reference Airlock issued.
		if out.Revision, ok = refNumber(rev); !ok || out.Revision == 0 {
			return CallRef{}, ErrBadRef
		}
	}
	return out, nil
}

// refNumber parses a position or revision: decimal, no sign or leading
// zero, at most 10000.
func refNumber(s string) (int, bool) {
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 || n > 10000 || strconv.Itoa(n) != s {
		return 0, false
	}
	return n, true
}

// grantRefPrefix starts a grant's reference (its notice's Revoke button).
const grantRefPrefix = "grant-"

// GrantRef is the opaque reference of a grant's Revoke button.
func GrantRef(grantID string) string { return grantRefPrefix + grantID }

// ParseGrantRef returns the grant id of a reference made by GrantRef.
func ParseGrantRef(ref string) (string, error) { return prefixedID(ref, grantRefPrefix) }

// prefixedID is the id after prefix in a reference of at most 100 bytes:
// lower-case letters and digits, as Airlock's ids are.
func prefixedID(ref, prefix string) (string, error) {
	id, ok := strings.CutPrefix(ref, prefix)
	if !ok || !isID(id) || len(ref) > 100 {
		return "", ErrBadRef
	}
	return id, nil
}

// isID reports whether s is a non-empty run of lower-case letters and digits.
func isID(s string) bool {
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9') {
			return false
		}
	}
	return s != ""
}

// allRefPrefix starts the reference of a card's Allow all / Deny all.
const allRefPrefix = "all-"

// AllRef is the opaque reference of a card's Allow all and Deny all
// buttons: the batch, and the sum of its calls' revisions as the card
// showed them (an edit of any call since changes the sum, and the click
// changes nothing).
func AllRef(batchID string, revisions int) string {
	return allRefPrefix + batchID + refSep + strconv.Itoa(revisions)
}

// Revisions is the sum of the batch's calls' revisions (see AllRef).
func (b *Batch) Revisions() int {
	n := 0
	for _, c := range b.Calls {
		n += c.Revision
	}
	return n
}

// ParseAllRef splits a reference made by AllRef.
func ParseAllRef(ref string) (batchID string, revisions int, err error) {
	rest, ok := strings.CutPrefix(ref, allRefPrefix)
	id, rev, cut := strings.Cut(rest, refSep)
	if !ok || !cut || !isID(id) || len(ref) > 100 {
		return "", 0, ErrBadRef
	}
	n, ok := refNumber(rev)
	if !ok {
		return "", 0, ErrBadRef
	}
	return id, n, nil
}
