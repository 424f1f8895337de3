package confirm

import (
	"context"
	"strings"
)

// A run whose outcome is unknown gates its tool: until a person marks it
// checked ("I checked — go on"), every later call of that tool in the
// conversation needs a person's yes, and no grant covers it.

// AuditUnknownChecked records that a person marked a run whose outcome is
// unknown as checked: later calls of its tool are judged by the policy
// again.
const AuditUnknownChecked AuditKind = "unknown_checked"

// checkedRefPrefix starts the reference of an "I checked — go on" button.
const checkedRefPrefix = "checked-"

// CheckedRef is the opaque reference of the "I checked — go on" button of
// the call at position in the batch.
func CheckedRef(batchID string, position int) string {
	return checkedRefPrefix + Ref(batchID, position)
}

// ParseCheckedRef splits a reference made by CheckedRef; ErrBadRef for
// anything else (a call's reference without the prefix too).
func ParseCheckedRef(ref string) (batchID string, position int, err error) {
	rest, ok := strings.CutPrefix(ref, checkedRefPrefix)
	if !ok || len(ref) > 100 {
		return "", 0, ErrBadRef
	}
	r, err := ParseCallRef(rest)
	if err != nil || r.Revision != 0 { // CheckedRef writes no revision
		return "", 0, ErrBadRef
	}
	return r.Batch, r.Position, nil
}

// CheckStore is what the bot needs to mark unknown runs checked.
type CheckStore interface {
	// MarkChecked records that by checked the call's unknown outcome at
	// the store's clock, by one conditional UPDATE (the run is unknown and not checked
	// yet), audited unknown_checked in the same transaction; false, and
	// nothing written, when the run is not unknown, was checked already,
	// or the call does not exist.
	MarkChecked(ctx context.Context, batchID, key, by string) (bool, error)
	// SetUnknownNoticeRef records where the thread line announcing the
	// call's unknown outcome (with its "I checked — go on" button) was
	// posted; ErrNotFound when the call does not exist.
	SetUnknownNoticeRef(ctx context.Context, batchID, key, ref string) error
}
