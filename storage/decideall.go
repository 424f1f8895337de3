package storage

import (
	"context"
	"errors"
	"fmt"

	"github.com/airlockhq/airlock/confirm"
)

// DecideAll takes the decisions of an Allow all or Deny all in one
// transaction: ds are decisions of calls of one batch by one person, each
// deciding its call alone (a deny, or an allow of a call needing one
// approval). Each call still pending at the revision its decider saw is
// decided; one decided or expired meanwhile is left (Won false), one
// edited since is Stale. The batch is decided in the same transaction when
// no call of it waits any more. Results are in the order of ds.
func (db *DB) DecideAll(ctx context.Context, ds []confirm.Decide) (confirm.DecideAllResult, error) {
	var out confirm.DecideAllResult
	if len(ds) == 0 {
		return out, errors.New("decide all: no decisions")
	}
	for _, d := range ds {
		switch {
		case d.BatchID != ds[0].BatchID:
			return out, errors.New("decide all: decisions of several batches")
		case d.Status != confirm.DecisionAllowed && d.Status != confirm.DecisionDenied:
			return out, fmt.Errorf("decide all: invalid decision status %q", d.Status)
		case d.Grant != nil:
			return out, errors.New("decide all: no grants")
		}
	}
	err := db.tx(ctx, func(tx *txn) error {
		now := tx.now
		out = confirm.DecideAllResult{Calls: make([]confirm.DecideResult, len(ds))}
		for i, d := range ds {
			res := &out.Calls[i]
			info, err := db.lockPendingCall(ctx, tx, d.BatchID, d.Key)
			if errors.Is(err, errLost) {
				continue // decided or expired meanwhile
			}
			if err != nil {
				return err
			}
			res.Required = max(info.Approvals, 1)
			if info.Revision != d.Revision {
				res.Stale = true
				continue
			}
			if d.Status == confirm.DecisionAllowed && !d.Assurance.Counts(d.Need) {
				return fmt.Errorf("decide all: call %s: an allow made with %q where %q is needed", d.Key, d.Assurance, d.Need)
			}
			if d.Status == confirm.DecisionAllowed && res.Required > 1 {
				return fmt.Errorf("decide all: call %s needs %d approvals; one allow does not decide it", d.Key, res.Required)
			}
			event := confirm.AuditEvent{At: now, ConversationID: info.ConversationID, BatchID: d.BatchID, CallKey: d.Key, Tool: info.Tool, Actor: d.By}
			if err := db.decideCall(ctx, tx, event, d.Status, d.Message, d.Reason, d.Surface, d.Assurance, d.Credential); err != nil {
				return err
			}
			res.Won, res.Decided = true, true
			if d.Status == confirm.DecisionAllowed {
				res.Votes = 1
			}
		}
		var agg confirm.DecideResult
		if err := db.finishDecidingInto(ctx, tx, ds[0].BatchID, &agg); err != nil {
			return err
		}
		out.BatchDecided, out.Batch = agg.BatchDecided, agg.Batch
		return nil
	})
	if err != nil {
		return confirm.DecideAllResult{}, fmt.Errorf("decide all %s: %w", ds[0].BatchID, err)
	}
	return out, nil
}
