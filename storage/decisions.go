package storage

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sort"

	"github.com/airlockhq/airlock/confirm"
)

// lockPendingBatch takes the batch row's write lock while it is pending
// (on PostgreSQL the UPDATE's row lock serialises deciders of one batch)
// and returns its conversation. ok is false when the batch is not pending.
func (db *DB) lockPendingBatch(ctx context.Context, tx *txn, batchID string) (convID int64, ok bool, err error) {
	now := tx.now
	err = db.get(ctx, tx, &convID, db.q(`UPDATE batches SET updated_at = ? WHERE id = ? AND status = 'pending' RETURNING conversation_id`),
		db.ts(now), batchID)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("lock batch: %w", err)
	}
	return convID, true, nil
}

// Decide applies one person's decision to a call while the call is pending,
// the store's clock is before its expiry and d.Revision is the call's revision (else
// Stale, and nothing changes), audits it, and takes the batch to decided
// when no call is left pending, all in one transaction. A deny (any status
// but allowed) decides the call at once, storing d.Message and d.Reason. An
// allow is a vote, unique per call and person: a repeat returns
// AlreadyVoted and changes nothing; otherwise the call becomes allowed by
// its Approvals-th distinct vote (DecidedBy is that last voter), and with
// d.Grant that decision also stores the grant (audited grant_created).
// Votes of a call needing more than one approval are audited as approval
// events; the deciding one also as a decision event. Lost races and
// decisions on calls no longer pending (or expired) return Won=false and no
// error; a missing batch or call returns ErrNotFound. A decision that
// decides the batch returns it (DecideResult.Batch).
//
// Deciders of one batch queue: the batch row's conditional UPDATE and then
// the call row's lock (SELECT ... FOR UPDATE on PostgreSQL; SQLite's write
// lock) are taken before the vote is inserted and counted, so each counts
// the votes committed before it and concurrent approvers of a call needing
// two allow it exactly once.
func (db *DB) Decide(ctx context.Context, d confirm.Decide) (confirm.DecideResult, error) {
	if d.Status == "" || d.Status == confirm.DecisionPending {
		return confirm.DecideResult{}, fmt.Errorf("decide: invalid decision status %q", d.Status)
	}
	allow := d.Status == confirm.DecisionAllowed
	if allow && d.Grant != nil && d.Grant.ExpiresAt.IsZero() {
		return confirm.DecideResult{}, errors.New("decide: grant without expiry")
	}
	var (
		res   confirm.DecideResult
		grant *confirm.Grant
	)
	err := db.tx(ctx, func(tx *txn) error {
		res, grant = confirm.DecideResult{}, nil
		info, err := db.lockPendingCall(ctx, tx, d.BatchID, d.Key)
		if err != nil {
			return err
		}
		res.Required = max(info.Approvals, 1)
		if info.Revision != d.Revision {
			res.Stale = true
			return errStale
		}
		event := confirm.AuditEvent{At: tx.now, ConversationID: info.ConversationID, BatchID: d.BatchID, CallKey: d.Key, Tool: info.Tool, Actor: d.By}

		if allow {
			if err := db.castVote(ctx, tx, event, &res, d.Assurance, d.Need, d.Credential); err != nil {
				return err
			}
			if res.Votes < res.Required {
				return nil
			}
		} else if res.Required > 1 { // a pending call needing one has no votes
			if res.Votes, err = db.countVotes(ctx, tx, d.BatchID, d.Key, d.Need); err != nil {
				return err
			}
		}

		if err := db.decideCall(ctx, tx, event, d.Status, d.Message, d.Reason, d.Surface, d.Assurance, d.Credential); err != nil {
			return err
		}
		res.Won, res.Decided = true, true
		if allow && d.Grant != nil {
			g := *d.Grant
			if err := db.insertGrant(ctx, tx, &g, info.ConversationID, d, info.Tool); err != nil {
				return err
			}
			grant = &g
		}
		return db.finishDecidingInto(ctx, tx, d.BatchID, &res)
	})
	if errors.Is(err, errLost) {
		return confirm.DecideResult{}, nil
	}
	if errors.Is(err, errAlreadyVoted) || errors.Is(err, errStale) {
		return res, nil
	}
	if err != nil {
		return confirm.DecideResult{}, fmt.Errorf("decide %s/%s: %w", d.BatchID, d.Key, err)
	}
	if grant != nil {
		*d.Grant = *grant
	}
	return res, nil
}

// errAlreadyVoted rolls back a Decide whose voter had voted before.
var errAlreadyVoted = errors.New("already voted")

// errStale rolls back a decision or edit made at a revision of the call's
// arguments that is no longer its own.
var errStale = errors.New("stale revision")

// pendingCall is what a decision needs of the call it locks.
type pendingCall struct {
	ConversationID int64  `db:"conversation_id"`
	Tool           string `db:"tool"`
	Approvals      int    `db:"approvals"`
	Revision       int    `db:"revision"`
}

// lockPendingCall takes, in tx, the batch's lock and then the call's (see
// Decide) and loads the call while it is pending and now is before its
// expiry; otherwise it returns errLost, or ErrNotFound for a batch or call
// that does not exist. On SQLite the transaction's write lock, taken at
// its start, already holds both: one SELECT checks the batch and loads
// the call.
func (db *DB) lockPendingCall(ctx context.Context, tx *txn, batchID, key string) (pendingCall, error) {
	now := tx.now
	var info pendingCall
	if db.driver == DriverSQLite {
		err := db.get(ctx, tx, &info, `SELECT b.conversation_id, c.tool, c.approvals, c.revision FROM batches b JOIN calls c ON c.batch_id = b.id
			WHERE b.id = ? AND b.status = 'pending' AND c.key = ? AND c.decision = 'pending' AND (c.expires_at IS NULL OR c.expires_at > ?)`,
			batchID, key, db.ts(now))
		if errors.Is(err, sql.ErrNoRows) {
			if err := db.batchLostOrMissing(ctx, tx, batchID); !errors.Is(err, errLost) {
				return info, err
			}
			return info, db.lostOrMissing(ctx, tx, batchID, key)
		}
		if err != nil {
			return info, fmt.Errorf("lock call: %w", err)
		}
		return info, nil
	}
	convID, ok, err := db.lockPendingBatch(ctx, tx, batchID)
	if err != nil {
		return info, err
	}
	if !ok {
		if err := db.batchLostOrMissing(ctx, tx, batchID); !errors.Is(err, errLost) {
			return info, err
		}
		return info, db.lostOrMissing(ctx, tx, batchID, key)
	}
	lock := `SELECT tool, approvals, revision FROM calls
		WHERE batch_id = ? AND key = ? AND decision = 'pending' AND (expires_at IS NULL OR expires_at > ?)`
	if db.driver == DriverPostgres {
		lock += ` FOR UPDATE`
	}
	if err := db.get(ctx, tx, &info, db.q(lock), batchID, key, db.ts(now)); err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return info, db.lostOrMissing(ctx, tx, batchID, key)
		}
		return info, fmt.Errorf("lock call: %w", err)
	}
	info.ConversationID = convID
	return info, nil
}

// castVote records event.Actor's allow of the call event names (pending,
// its row locked; res.Required set), made with assurance (and a
// passkey's credential, for the audit), where a vote
// needs need to count. On a call needing more than one it is a vote row,
// audited as an approval; on a call needing one it decides the call in
// this transaction, which stores who (decided_by), so no row is kept. A
// voter whose earlier vote does not count (made with less than need, before
// step_up changed) votes again: the row takes this vote's assurance. It
// sets res.Votes (the votes that count) and res.Won, or res.AlreadyVoted
// with errAlreadyVoted when that person's counting vote was there before.
func (db *DB) castVote(ctx context.Context, tx *txn, event confirm.AuditEvent, res *confirm.DecideResult, assurance, need confirm.Assurance, credential string) error {
	now := tx.now
	if !assurance.Counts(need) {
		return fmt.Errorf("a vote made with %q where %q is needed", assurance, need)
	}
	if res.Required == 1 {
		res.Votes, res.Won = 1, true
		return nil
	}
	counted, in := countedBy(need)
	n, err := db.execCount(ctx, tx, db.q(`INSERT INTO votes (batch_id, key, approver, at, assurance) VALUES (?, ?, ?, ?, ?)
		ON CONFLICT (batch_id, key, approver) DO UPDATE SET at = excluded.at, assurance = excluded.assurance
		WHERE votes.assurance NOT IN (`+in+`)`), append([]any{event.BatchID, event.CallKey, event.Actor, db.ts(now), string(assurance)}, counted...)...)
	if err != nil {
		return fmt.Errorf("insert vote: %w", err)
	}
	if res.Votes, err = db.countVotes(ctx, tx, event.BatchID, event.CallKey, need); err != nil {
		return err
	}
	if n == 0 {
		res.AlreadyVoted = true
		return errAlreadyVoted
	}
	res.Won = true
	e := event
	e.Kind = confirm.AuditApproval
	e.Detail = jsonDetail(struct {
		Votes      int    `json:"votes"`
		Required   int    `json:"required"`
		Assurance  string `json:"assurance,omitempty"`
		Credential string `json:"credential,omitempty"`
	}{res.Votes, res.Required, string(assurance), credential})
	return db.insertAudit(ctx, tx, e)
}

// countedBy is confirm.CountedBy(need) as query arguments and their
// placeholders.
func countedBy(need confirm.Assurance) (args []any, in string) {
	for i, a := range confirm.CountedBy(need) {
		if i > 0 {
			in += ", "
		}
		in += "?"
		args = append(args, string(a))
	}
	return args, in
}

// decideCall takes the call event names (pending, its row locked) to
// status by event.Actor and audits the decision.
// surface is where the decision came from (confirm.Surface*), "" unknown.
func (db *DB) decideCall(ctx context.Context, tx *txn, event confirm.AuditEvent, status confirm.DecisionStatus, message, reason, surface string, assurance confirm.Assurance, credential string) error {
	now := tx.now
	n, err := db.execCount(ctx, tx, db.q(`UPDATE calls SET decision = ?, decided_by = ?, decided_at = ?, deny_message = ?, deny_reason = ?, decided_via = ?
		WHERE batch_id = ? AND key = ? AND decision = 'pending' AND (expires_at IS NULL OR expires_at > ?)`),
		string(status), event.Actor, db.ts(now), message, reason, string(assurance), event.BatchID, event.CallKey, db.ts(now))
	if err != nil {
		return fmt.Errorf("update call: %w", err)
	}
	if n == 0 { // cannot happen under the row lock; lose rather than count twice
		return errLost
	}
	e := event
	e.Kind = confirm.AuditDecision
	e.Detail = decisionDetailWith(status, message, reason, surface, assurance, credential, false)
	return db.insertAudit(ctx, tx, e)
}

// countVotes counts a call's votes that count where need is needed.
func (db *DB) countVotes(ctx context.Context, tx *txn, batchID, key string, need confirm.Assurance) (int, error) {
	var n int
	counted, in := countedBy(need)
	if err := db.get(ctx, tx, &n, db.q(`SELECT COUNT(*) FROM votes WHERE batch_id = ? AND key = ? AND assurance IN (`+in+`)`),
		append([]any{batchID, key}, counted...)...); err != nil {
		return 0, fmt.Errorf("count votes: %w", err)
	}
	return n, nil
}

// finishDeciding takes the batch from pending to decided when none of its
// calls is pending any more (one statement).
func (db *DB) finishDeciding(ctx context.Context, tx *txn, batchID string) (bool, error) {
	n, err := db.execCount(ctx, tx, db.q(`UPDATE batches SET status = 'decided', claimed_by = '', updated_at = ? WHERE id = ? AND status = 'pending'
		AND NOT EXISTS (SELECT 1 FROM calls WHERE batch_id = ? AND decision = 'pending')`), db.ts(tx.now), batchID, batchID)
	if err != nil {
		return false, fmt.Errorf("mark batch decided: %w", err)
	}
	return n == 1, nil
}

// finishDecidingInto is finishDeciding for a decision: it sets
// res.BatchDecided and, when the batch was decided, res.Batch as it now
// stands, read in the same transaction.
func (db *DB) finishDecidingInto(ctx context.Context, tx *txn, batchID string, res *confirm.DecideResult) error {
	decided, err := db.finishDeciding(ctx, tx, batchID)
	if err != nil || !decided {
		return err
	}
	res.BatchDecided = true
	if res.Batch, err = db.loadBatch(ctx, tx, `b.id = ?`, batchID); err != nil {
		return fmt.Errorf("load decided batch: %w", err)
	}
	return nil
}

func decisionDetail(status confirm.DecisionStatus, message, reason string, abandoned bool) string {
	return decisionDetailFrom(status, message, reason, "", abandoned)
}

// decisionDetailFrom is decisionDetail naming the decision's surface.
func decisionDetailFrom(status confirm.DecisionStatus, message, reason, surface string, abandoned bool) string {
	return decisionDetailWith(status, message, reason, surface, "", "", abandoned)
}

// decisionDetailWith is decisionDetailFrom naming how the decider proved
// who they are, where known.
func decisionDetailWith(status confirm.DecisionStatus, message, reason, surface string, assurance confirm.Assurance, credential string, abandoned bool) string {
	return jsonDetail(struct {
		Status     string `json:"status"`
		Message    string `json:"message"`
		Reason     string `json:"reason,omitempty"`
		Abandoned  bool   `json:"abandoned,omitempty"`
		Surface    string `json:"surface,omitempty"`
		Assurance  string `json:"assurance,omitempty"`
		Credential string `json:"credential,omitempty"`
	}{string(status), message, reason, abandoned, surface, string(assurance), credential})
}

// ExpirePending decides every still-pending call of a pending batch
// expired with message, whatever the expiry (the sweeper calls it once the
// deadline passed); see resolvePending.
func (db *DB) ExpirePending(ctx context.Context, batchID, by, message string) (int, error) {
	return db.resolvePending(ctx, batchID, confirm.DecisionExpired, by, message, false)
}

// AbandonPending denies every still-pending call of a pending batch with
// message, and also the calls allowed earlier that have not started: an
// abandoned reply runs nothing; see resolvePending.
func (db *DB) AbandonPending(ctx context.Context, batchID, by, message string) (int, error) {
	return db.resolvePending(ctx, batchID, confirm.DecisionDenied, by, message, true)
}

// resolvePending decides every still-pending call of a pending batch with
// status and message whatever the expiry, and with abandon also denies calls
// allowed earlier that have not started; it audits each changed call and
// takes the batch to decided, in one transaction. It returns how many calls
// it changed; zero when the batch was not pending.
func (db *DB) resolvePending(ctx context.Context, batchID string, status confirm.DecisionStatus, by, message string, abandon bool) (int, error) {
	if status == "" || status == confirm.DecisionPending {
		return 0, fmt.Errorf("resolve pending: invalid decision status %q", status)
	}
	var changed int
	err := db.tx(ctx, func(tx *txn) error {
		now := tx.now
		changed = 0
		convID, ok, err := db.lockPendingBatch(ctx, tx, batchID)
		if err != nil {
			return err
		}
		if !ok {
			return errLost
		}
		var calls []changedCall
		if err := db.sel(ctx, tx, &calls, db.q(`UPDATE calls SET decision = ?, decided_by = ?, decided_at = ?, deny_message = ?
			WHERE batch_id = ? AND decision = 'pending' RETURNING batch_id, key, tool, position`),
			string(status), by, db.ts(now), message, batchID); err != nil {
			return fmt.Errorf("decide pending calls: %w", err)
		}
		var allowed []changedCall
		if abandon {
			if err := db.sel(ctx, tx, &allowed, db.q(`UPDATE calls SET decision = 'denied', decided_by = ?, decided_at = ?, deny_message = ?
				WHERE batch_id = ? AND decision IN ('allowed', 'allowed_by_policy', 'allowed_by_grant') AND run_status = 'not_started'
				RETURNING batch_id, key, tool, position`),
				by, db.ts(now), message, batchID); err != nil {
				return fmt.Errorf("deny allowed calls: %w", err)
			}
		}
		type change struct {
			changedCall
			status confirm.DecisionStatus
		}
		all := make([]change, 0, len(calls)+len(allowed))
		for _, c := range calls {
			all = append(all, change{c, status})
		}
		for _, c := range allowed {
			all = append(all, change{c, confirm.DecisionDenied})
		}
		sort.Slice(all, func(i, j int) bool { return all[i].Position < all[j].Position })
		if len(all) > 0 {
			for _, c := range all {
				if err := db.insertAudit(ctx, tx, confirm.AuditEvent{
					At: now, Kind: confirm.AuditDecision, ConversationID: convID, BatchID: batchID,
					CallKey: c.Key, Tool: c.Tool, Actor: by,
					Detail: decisionDetail(c.status, message, "", abandon),
				}); err != nil {
					return err
				}
			}
		}
		if _, err := db.finishDeciding(ctx, tx, batchID); err != nil {
			return err
		}
		changed = len(all)
		return nil
	})
	if errors.Is(err, errLost) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("resolve pending %s: %w", batchID, err)
	}
	return changed, nil
}

// ExpiredBatches lists pending batches with a pending call whose expiry is
// at or before the store's clock, oldest first.
func (db *DB) ExpiredBatches(ctx context.Context) ([]string, error) {
	var ids []string
	err := db.sel(ctx, db.reader(), &ids, db.q(`SELECT b.id FROM batches b WHERE b.status = 'pending' AND b.status <> 'done' AND EXISTS (
			SELECT 1 FROM calls c WHERE c.batch_id = b.id AND c.decision = 'pending' AND c.expires_at <= ?)
		ORDER BY b.created_at, b.id`), db.ts(db.stamp()))
	if err != nil {
		return nil, fmt.Errorf("expired batches: %w", err)
	}
	return ids, nil
}
