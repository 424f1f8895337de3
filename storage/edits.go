package storage

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/airlockhq/airlock/internal/jsonobj"

	"github.com/airlockhq/airlock/confirm"
	"github.com/airlockhq/airlock/redact"
)

// EditCall stores an approver's arguments beside the model's and records
// the editor's allow, in one transaction and only while the call is
// pending, the store's clock is before its expiry and e.Revision is the call's
// revision (else Stale, and nothing changes): it makes the next revision,
// sets edited_args (args, the
// model's bytes, are never touched), edited_by, edited_at, the new
// read-back and the policy's new verdict (restrict, reasons), never lower
// than what the call needed before (issue 34): approvals the most of e's,
// the stored and 1; risk the higher tier (a critical call is held, as with
// Hold); grantable only when both were and one approval is needed. It
// deletes the call's earlier votes (they approved
// other arguments), audits call_edited (detail: before, the model's
// arguments; previous_edit, an earlier edit's or null; after; voided, the
// approvers whose votes were deleted), then casts the editor's vote as
// Decide does an allow: with one approval needed the call is allowed by
// the editor (audited decision) and the batch goes to decided when no call
// is left pending; with more, it is an approval (Votes 1). Deciders of the
// batch queue as in Decide. With Hold the edit is stored and audited
// but no vote is cast: the call waits (Won, Votes 0). A call no longer pending or expired returns
// Won=false and no error; a missing batch or call returns ErrNotFound.
func (db *DB) EditCall(ctx context.Context, e confirm.EditCall) (confirm.DecideResult, error) {
	switch {
	case e.By == "":
		return confirm.DecideResult{}, errors.New("edit call: empty editor")
	case len(e.Args) == 0 || !json.Valid(e.Args):
		return confirm.DecideResult{}, errors.New("edit call: arguments are not valid JSON")
	case e.Approvals < 0:
		return confirm.DecideResult{}, fmt.Errorf("edit call: negative approvals %d", e.Approvals)
	}
	reasons, err := marshalList(e.Reasons)
	if err != nil {
		return confirm.DecideResult{}, fmt.Errorf("edit call: reasons: %w", err)
	}
	restrict, err := marshalList(e.Restrict)
	if err != nil {
		return confirm.DecideResult{}, fmt.Errorf("edit call: restrict: %w", err)
	}
	var res confirm.DecideResult
	err = db.tx(ctx, func(tx *txn) error {
		now := tx.now
		res = confirm.DecideResult{}
		info, err := db.lockPendingCall(ctx, tx, e.BatchID, e.Key)
		if err != nil {
			return err
		}
		if info.Revision != e.Revision {
			res.Stale = true
			return errStale
		}
		var args struct {
			Model     string `db:"args"`
			Edited    string `db:"edited_args"`
			Approvals int    `db:"approvals"`
			Risk      string `db:"risk"`
			Grantable bool   `db:"grantable"`
		}
		if err := db.get(ctx, tx, &args, db.q(`SELECT args, edited_args, approvals, risk, grantable FROM calls WHERE batch_id = ? AND key = ?`), e.BatchID, e.Key); err != nil {
			return fmt.Errorf("load arguments: %w", err)
		}
		// An edit never lowers what the call needs: its quorum, its risk
		// tier (a critical call's Allow needs its phrase, so the edit is
		// held), nor a grant's exclusion.
		res.Required = max(e.Approvals, args.Approvals, 1)
		risk := confirm.Risk(args.Risk).Max(e.Risk)
		hold := e.Hold || risk == confirm.RiskCritical
		grantable := e.Grantable && args.Grantable && res.Required == 1 && !risk.NoGrant()

		voided := []string{}
		if err := db.sel(ctx, tx, &voided, db.q(`SELECT approver FROM votes WHERE batch_id = ? AND key = ? ORDER BY at, id`),
			e.BatchID, e.Key); err != nil {
			return fmt.Errorf("load votes: %w", err)
		}
		n, err := db.execCount(ctx, tx, db.q(`UPDATE calls SET edited_args = ?, edited_by = ?, edited_at = ?, summary = ?,
				approvals = ?, restrict_to = ?, reasons = ?, grantable = ?, risk = ?, revision = revision + 1
			WHERE batch_id = ? AND key = ? AND decision = 'pending' AND revision = ?`),
			string(e.Args), e.By, db.ts(now), e.Summary, res.Required, restrict, reasons, grantable, string(risk), e.BatchID, e.Key, e.Revision)
		if err != nil {
			return fmt.Errorf("update call: %w", err)
		}
		if n == 0 { // cannot happen under the row lock
			return errLost
		}
		if len(voided) > 0 {
			if _, err := db.exec(ctx, tx, db.q(`DELETE FROM votes WHERE batch_id = ? AND key = ?`), e.BatchID, e.Key); err != nil {
				return fmt.Errorf("void votes: %w", err)
			}
		}
		event := confirm.AuditEvent{At: now, ConversationID: info.ConversationID, BatchID: e.BatchID, CallKey: e.Key, Tool: info.Tool, Actor: e.By}
		edited := event
		edited.Kind = confirm.AuditEdited
		edited.Detail = editDetail(args.Model, args.Edited, e, res.Required, voided, db.scrub)
		if err := db.insertAudit(ctx, tx, edited); err != nil {
			return err
		}
		if hold {
			res.Won = true // stored; no vote: the call waits
			return nil
		}

		if err := db.castVote(ctx, tx, event, &res, e.Assurance, e.Need, e.Credential); err != nil {
			return err // errAlreadyVoted cannot happen: the votes are gone
		}
		if res.Votes < res.Required {
			return nil
		}
		if err := db.decideCall(ctx, tx, event, confirm.DecisionAllowed, "", "", confirm.SurfaceEdit, e.Assurance, e.Credential); err != nil {
			return err
		}
		res.Decided = true
		return db.finishDecidingInto(ctx, tx, e.BatchID, &res)
	})
	if errors.Is(err, errLost) || errors.Is(err, errAlreadyVoted) {
		return confirm.DecideResult{}, nil
	}
	if errors.Is(err, errStale) {
		return confirm.DecideResult{Stale: true}, nil
	}
	if err != nil {
		return confirm.DecideResult{}, fmt.Errorf("edit call %s/%s: %w", e.BatchID, e.Key, err)
	}
	return res, nil
}

// editDetail renders a call_edited audit detail, the arguments spliced in
// as their exact bytes: before (the model's), previous_edit (an earlier
// edit's, or null), after, the new read-back and approvals needed, and
// voided (the approvers whose votes the edit deleted, oldest first). The
// arguments and read-back are without the secrets scrub removes (see
// WithScrub); the call keeps them exact.
func editDetail(model, previous string, e confirm.EditCall, approvals int, voided []string, scrub func(string) string) string {
	var o jsonobj.Object
	o.AddRaw("before", redact.JSON([]byte(model), scrub))
	if previous == "" {
		o.AddRaw("previous_edit", []byte("null")) // valid JSON: written as it is
	} else {
		o.AddRaw("previous_edit", redact.JSON([]byte(previous), scrub))
	}
	o.AddRaw("after", redact.JSON(e.Args, scrub))
	o.Add("summary", scrub(e.Summary))
	o.Add("approvals", approvals)
	o.Add("voided", voided)
	return o.String()
}
