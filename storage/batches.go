package storage

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/airlockhq/airlock/internal/jsonobj"

	"github.com/jmoiron/sqlx"

	"github.com/airlockhq/airlock/confirm"
	"github.com/airlockhq/airlock/gateway"
	"github.com/airlockhq/airlock/internal/ids"
	"github.com/airlockhq/airlock/redact"
)

// toolCallDetail renders a tool_call audit detail: a JSON object with the
// call's arguments spliced in as the exact bytes the model sent
// (json.Marshal would compact them and escape <, > and &), but for the
// secrets scrub removes from them and from the read-back (see WithScrub).
func toolCallDetail(c confirm.Call, client, session string, scrub func(string) string) string {
	var o jsonobj.Object
	if c.CallID != "" {
		o.Add("call_id", c.CallID)
	}
	if client != "" { // a gateway client's call (package gateway)
		o.Add("client", client)
		o.Add("session", scrub(session))
	}
	o.AddRaw("args", redact.JSON(c.Args, scrub))
	o.Add("flagged", c.Flagged)
	o.Add("decision", string(c.Decision))
	if c.Summary != "" {
		o.Add("summary", scrub(c.Summary))
	}
	if len(c.Reasons) > 0 {
		o.Add("reasons", c.Reasons)
	}
	if c.Flagged {
		o.Add("approvals", c.Approvals)
	}
	if len(c.Restrict) > 0 {
		o.Add("restrict", c.Restrict)
	}
	return o.String()
}

// CreateBatch stores the assistant message, the batch and its calls, and
// the audit events in one transaction: tool_call per call, approval_request
// when the batch is pending, decision for each call a rule refused
// (denied_by_rule) and grant_used for each call a grant allowed
// (allowed_by_grant); the grant of each such call is checked active in the
// same transaction (ErrGrantInactive when not, and nothing is stored). It
// fills in b: ID (random when empty), MessageSeq,
// Status (pending when empty), CreatedAt (now when zero), and per call
// BatchID, Decision (pending when empty), Run (not_started when empty),
// IdempotencyKey (<batch id>/<key> when empty), ExpiresAt (the batch's when
// zero) and Approvals (at least 1 for a flagged call). A zero expiry is
// stored as NULL: the call never expires.
func (db *DB) CreateBatch(ctx context.Context, b *confirm.Batch, assistant confirm.Message) error {
	if b == nil {
		return errors.New("create batch: nil batch")
	}
	if len(b.Calls) == 0 {
		return errors.New("create batch: no calls")
	}
	nb := *b
	nb.Calls = append([]confirm.Call(nil), b.Calls...)
	if nb.ID == "" {
		nb.ID = ids.New()
	}
	if nb.Status == "" {
		nb.Status = confirm.BatchPending
	}
	if !nb.ExpiresAt.IsZero() {
		nb.ExpiresAt = utc(nb.ExpiresAt)
	}
	for i := range nb.Calls {
		c := &nb.Calls[i]
		c.BatchID = nb.ID
		if c.Decision == "" {
			c.Decision = confirm.DecisionPending
		}
		if c.Run == "" {
			c.Run = confirm.RunNotStarted
		}
		if c.IdempotencyKey == "" {
			c.IdempotencyKey = nb.ID + "/" + c.Key
		}
		if c.ExpiresAt.IsZero() {
			c.ExpiresAt = nb.ExpiresAt
		} else {
			c.ExpiresAt = utc(c.ExpiresAt)
		}
		if c.Approvals < 0 {
			return fmt.Errorf("create batch: call %q: negative approvals %d", c.Key, c.Approvals)
		}
		if c.Flagged && c.Approvals < 1 {
			c.Approvals = 1
		}
		if len(c.EditedArgs) > 0 || c.EditedBy != "" || c.EditedAt != nil {
			return fmt.Errorf("create batch: call %q: edited before it was stored (edits go through EditCall)", c.Key)
		}
		if st := c.Preview.State; (st != confirm.PreviewNone && st != confirm.PreviewRunning) || c.Preview.Output != "" || c.Preview.Hash != "" || c.Preview.Size != 0 || c.Preview.Recheck != "" {
			return fmt.Errorf("create batch: call %q: a preview is stored running and finished through FinishPreview", c.Key)
		}
	}
	msgs := []confirm.Message{assistant}
	err := db.tx(ctx, func(tx *txn) error {
		now := tx.now
		nb.CreatedAt = now
		if err := db.checkGrantsActive(ctx, tx, nb.Calls); err != nil {
			return err
		}
		if err := db.appendMessages(ctx, tx, nb.ConversationID, msgs); err != nil {
			return fmt.Errorf("append assistant message: %w", err)
		}
		nb.MessageSeq = msgs[0].Seq
		_, err := db.exec(ctx, tx, db.q(`INSERT INTO batches (id, conversation_id, message_seq, requested_by, status, card_ref, claimed_by, created_at, expires_at, updated_at, intro)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`),
			nb.ID, nb.ConversationID, nb.MessageSeq, nb.RequestedBy, string(nb.Status), nb.CardRef, nb.ClaimedBy,
			db.ts(nb.CreatedAt), db.nts(nb.ExpiresAt), db.ts(now), nb.Intro)
		if err != nil {
			return fmt.Errorf("insert batch: %w", err)
		}
		insert := db.q(`INSERT INTO calls (` + callColumns + `) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, '', '', NULL, 0, '', NULL, '', ?, ?, '', '', '', '', 0, '')`)
		for _, c := range nb.Calls {
			var decidedAt any
			if c.DecidedAt != nil {
				decidedAt = db.ts(*c.DecidedAt)
			}
			reasons, err := marshalList(c.Reasons)
			if err != nil {
				return fmt.Errorf("call %q reasons: %w", c.Key, err)
			}
			restrict, err := marshalList(c.Restrict)
			if err != nil {
				return fmt.Errorf("call %q restrict: %w", c.Key, err)
			}
			_, err = db.exec(ctx, tx, insert, c.BatchID, c.Key, c.Position, c.CallID, c.Tool, string(c.Args), c.Summary, c.Flagged,
				string(c.Decision), c.DecidedBy, decidedAt, c.DenyMessage, string(c.Run), c.Result, c.IdempotencyKey, db.nts(c.ExpiresAt),
				reasons, c.Approvals, restrict, c.Grantable, c.DenyReason, c.GrantID, string(c.Risk), string(c.Preview.State))
			if err != nil {
				return fmt.Errorf("insert call %q: %w", c.Key, err)
			}
		}
		// A gateway client's session names the client and the session in
		// each call's tool_call row (chained with it).
		var thread string
		if err := db.get(ctx, tx, &thread, db.q(`SELECT thread FROM conversations WHERE id = ?`), nb.ConversationID); err != nil && !errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("load conversation: %w", err)
		}
		client, session, _ := gateway.SessionOf(thread)
		for _, c := range nb.Calls {
			err := db.insertAudit(ctx, tx, confirm.AuditEvent{
				At: now, Kind: confirm.AuditToolCall, ConversationID: nb.ConversationID, BatchID: nb.ID,
				CallKey: c.Key, Tool: c.Tool, Actor: nb.RequestedBy,
				Detail: toolCallDetail(c, client, session, db.scrub),
			})
			if err != nil {
				return err
			}
		}
		for _, c := range nb.Calls {
			if err := db.auditPauseDecision(ctx, tx, &nb, c); err != nil {
				return err
			}
		}
		var pending []string
		for _, c := range nb.Calls {
			if c.Decision == confirm.DecisionPending {
				pending = append(pending, c.Key)
			}
		}
		var expires *time.Time
		if !nb.ExpiresAt.IsZero() {
			expires = &nb.ExpiresAt
		}
		if nb.Status != confirm.BatchPending {
			return nil // nothing gated: no person is asked
		}
		return db.insertAudit(ctx, tx, confirm.AuditEvent{
			At: now, Kind: confirm.AuditApprovalRequest, ConversationID: nb.ConversationID, BatchID: nb.ID,
			Actor: nb.RequestedBy,
			Detail: jsonDetail(struct {
				MessageSeq int        `json:"message_seq"`
				Calls      int        `json:"calls"`
				Pending    []string   `json:"pending"`
				ExpiresAt  *time.Time `json:"expires_at,omitempty"`
			}{nb.MessageSeq, len(nb.Calls), pending, expires}),
		})
	})
	if err != nil {
		return fmt.Errorf("create batch: %w", err)
	}
	*b = nb
	return nil
}

// auditPauseDecision audits a call decided at pause time by a rule (a
// decision event naming the rule) or by a grant (grant_used); other calls
// need nothing beyond their tool_call event.
func (db *DB) auditPauseDecision(ctx context.Context, tx *txn, b *confirm.Batch, c confirm.Call) error {
	actor := c.DecidedBy
	if actor == "" {
		actor = auditSystemActor
	}
	e := confirm.AuditEvent{At: tx.now, ConversationID: b.ConversationID, BatchID: b.ID, CallKey: c.Key, Tool: c.Tool, Actor: actor}
	switch c.Decision {
	case confirm.DecisionDeniedByRule:
		e.Kind = confirm.AuditDecision
		e.Detail = jsonDetail(struct {
			Status  string `json:"status"`
			Message string `json:"message"`
			Rule    string `json:"rule,omitempty"`
		}{string(c.Decision), c.DenyMessage, confirm.RuleOf(c.Reasons)})
	case confirm.DecisionAllowedByGrant:
		e.Kind = confirm.AuditGrantUsed
		e.Detail = jsonDetail(struct {
			GrantID string `json:"grant_id"`
		}{c.GrantID})
	default:
		return nil
	}
	return db.insertAudit(ctx, tx, e)
}

// Batch loads a batch with its calls in position order; ErrNotFound when none.
func (db *DB) Batch(ctx context.Context, id string) (*confirm.Batch, error) {
	b, err := db.loadBatch(ctx, db.reader(), `b.id = ?`, id)
	if err != nil {
		return nil, fmt.Errorf("load batch %s: %w", id, err)
	}
	return b, nil
}

// PendingBatch returns the conversation's newest batch in status pending;
// ErrNotFound when none.
func (db *DB) PendingBatch(ctx context.Context, conversationID int64) (*confirm.Batch, error) {
	b, err := db.loadBatch(ctx, db.reader(), `b.id = (SELECT id FROM batches
		WHERE conversation_id = ? AND status = 'pending' AND status <> 'done' ORDER BY created_at DESC, id DESC LIMIT 1)`, conversationID)
	if err != nil {
		return nil, fmt.Errorf("load pending batch: %w", err)
	}
	return b, nil
}

// PendingBatches lists the ids of the conversation's batches in status
// pending, oldest first (a model's pause and runbook steps' cards may
// wait in one thread together).
func (db *DB) PendingBatches(ctx context.Context, conversationID int64) ([]string, error) {
	var ids []string
	if err := db.sel(ctx, db.reader(), &ids, db.q(`SELECT id FROM batches
		WHERE conversation_id = ? AND status = 'pending' AND status <> 'done' ORDER BY created_at, id`), conversationID); err != nil {
		return nil, fmt.Errorf("pending batches: %w", err)
	}
	return ids, nil
}

// batchQuery is loadBatch's statement for a condition, built once per
// condition (the conditions are a few constants).
func (db *DB) batchQuery(where string) string {
	if q, ok := db.batchQueries.Load(where); ok {
		return q.(string)
	}
	votes := `CASE WHEN c.approvals > 1 THEN (SELECT json_group_array(json_array(v.approver, v.at, v.assurance) ORDER BY v.at, v.id) FROM votes v
		WHERE v.batch_id = c.batch_id AND v.key = c.key) END`
	steps := `(SELECT json_group_array(e.step ORDER BY e.step) FROM batch_escalations e WHERE e.batch_id = b.id)`
	if db.driver == DriverPostgres {
		votes = `CASE WHEN c.approvals > 1 THEN (SELECT json_agg(json_build_array(v.approver, v.at, v.assurance) ORDER BY v.at, v.id) FROM votes v
		WHERE v.batch_id = c.batch_id AND v.key = c.key) END`
		steps = `(SELECT json_agg(e.step ORDER BY e.step) FROM batch_escalations e WHERE e.batch_id = b.id)`
	}
	query := db.q(`SELECT ` + prefixed("b.", batchColumns) + `, ` + prefixed("c.", callColumns) + `, ` + votes + `, ` + steps + `
		FROM batches b JOIN calls c ON c.batch_id = b.id WHERE ` + where + ` ORDER BY c.position`)
	db.batchQueries.Store(where, query)
	return query
}

// loadBatch loads the batch where selects (a condition on batches b) with
// its calls, their votes and the batch's fired escalation steps in one
// statement: a row per call, in position order, its votes as a JSON array
// of [approver, at, assurance] triples, oldest first, and the steps as a JSON array in
// ascending order (the first row's is used; the primary key lookup per
// row is cheaper than a second round trip). Votes are looked up only for
// a call needing more than one approval (a call needing one keeps none,
// and nothing shows votes for it): on a reader, whose page cache every
// commit empties, the lookup skipped was about 3% more decisions a
// second. ErrNotFound when there is no such batch (a batch has at least
// one call).
func (db *DB) loadBatch(ctx context.Context, q sqlx.QueryerContext, where string, args ...any) (*confirm.Batch, error) {
	rows, err := db.query(ctx, q, db.batchQuery(where), args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var (
		b  *confirm.Batch
		br batchRow
		cr callRow
		vs sql.NullString
		es sql.NullString
	)
	dest := append(append(br.fields(), cr.fields()...), &vs, &es)
	for rows.Next() {
		if err := rows.Scan(dest...); err != nil {
			return nil, err
		}
		if b == nil {
			b = br.batch()
			if b.Escalated, err = parseSteps(es.String); err != nil {
				return nil, fmt.Errorf("batch %s escalations: %w", b.ID, err)
			}
		}
		c, err := cr.call()
		if err != nil {
			return nil, err
		}
		if c.Votes, err = parseVotes(vs.String); err != nil {
			return nil, fmt.Errorf("call %s/%s votes: %w", c.BatchID, c.Key, err)
		}
		b.Calls = append(b.Calls, c)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	if b == nil {
		return nil, confirm.ErrNotFound
	}
	return b, nil
}

// parseVotes reads loadBatch's votes column; "", "[]" and NULL are none.
func parseVotes(s string) ([]confirm.Vote, error) {
	if s == "" || s == "[]" {
		return nil, nil
	}
	var votes [][3]string // approver, at, assurance
	if err := json.Unmarshal([]byte(s), &votes); err != nil {
		return nil, err
	}
	out := make([]confirm.Vote, len(votes))
	for i, v := range votes {
		var at dbTime
		if err := at.parse(v[1]); err != nil {
			return nil, err
		}
		out[i] = confirm.Vote{By: v[0], At: at.t, Via: confirm.Assurance(v[2])}
	}
	return out, nil
}

// parseSteps reads loadBatch's escalation steps column; "", "[]" and NULL
// are none.
func parseSteps(s string) ([]int, error) {
	if s == "" || s == "[]" {
		return nil, nil
	}
	var steps []int
	if err := json.Unmarshal([]byte(s), &steps); err != nil {
		return nil, err
	}
	return steps, nil
}

// SetCardRef stores the platform's reference of the batch's card.
func (db *DB) SetCardRef(ctx context.Context, batchID, ref string) error {
	return db.updateRow(ctx, "set card ref", "batch "+batchID,
		`UPDATE batches SET card_ref = ?, updated_at = ? WHERE id = ?`, ref, db.ts(db.now()), batchID)
}

// SetCardRefWithCopies implements confirm.Store: SetCardRef and, in the
// same statement, the mark that the card's copies are still to be posted.
func (db *DB) SetCardRefWithCopies(ctx context.Context, batchID, ref string) error {
	return db.updateRow(ctx, "set card ref", "batch "+batchID,
		`UPDATE batches SET card_ref = ?, copies_pending = ?, updated_at = ? WHERE id = ?`, ref, true, db.ts(db.now()), batchID)
}

// CopiesPosted implements confirm.Store.
func (db *DB) CopiesPosted(ctx context.Context, batchID string) error {
	return db.updateRow(ctx, "copies posted", "batch "+batchID,
		`UPDATE batches SET copies_pending = ?, updated_at = ? WHERE id = ?`, false, db.ts(db.now()), batchID)
}

// batchLostOrMissing explains a conditional UPDATE on a batch that
// changed no row: ErrNotFound when the batch does not exist, errLost
// otherwise.
func (db *DB) batchLostOrMissing(ctx context.Context, ex sqlx.QueryerContext, batchID string) error {
	var n int
	if err := db.get(ctx, ex, &n, db.q(`SELECT COUNT(*) FROM batches WHERE id = ?`), batchID); err != nil {
		return err
	}
	if n == 0 {
		return fmt.Errorf("batch %s: %w", batchID, confirm.ErrNotFound)
	}
	return errLost
}

// callExists reports whether the call exists.
func (db *DB) callExists(ctx context.Context, ex sqlx.QueryerContext, batchID, key string) (bool, error) {
	var n int
	if err := db.get(ctx, ex, &n, db.q(`SELECT COUNT(*) FROM calls WHERE batch_id = ? AND key = ?`), batchID, key); err != nil {
		return false, err
	}
	return n > 0, nil
}

// lostOrMissing explains a conditional UPDATE on a call that changed no
// row: ErrNotFound when the call does not exist, errLost otherwise.
func (db *DB) lostOrMissing(ctx context.Context, ex sqlx.QueryerContext, batchID, key string) error {
	ok, err := db.callExists(ctx, ex, batchID, key)
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("call %s/%s: %w", batchID, key, confirm.ErrNotFound)
	}
	return errLost
}

// PendingInChannel counts the pending batches of the conversations in a
// channel of a platform, whatever their thread.
func (db *DB) PendingInChannel(ctx context.Context, platform, channel string) (int, error) {
	var n int
	if err := db.get(ctx, db.reader(), &n, db.q(`SELECT COUNT(*) FROM batches b JOIN conversations c ON c.id = b.conversation_id
		WHERE c.platform = ? AND c.channel = ? AND b.status = 'pending' AND b.status <> 'done'`), platform, channel); err != nil {
		return 0, fmt.Errorf("pending in channel: %w", err)
	}
	return n, nil
}

// PendingInThreads counts the pending batches of the channel's
// conversations whose thread begins with prefix (compared exactly: no
// character of prefix is a pattern).
func (db *DB) PendingInThreads(ctx context.Context, platform, channel, prefix string) (int, error) {
	var n int
	if err := db.get(ctx, db.reader(), &n, db.q(`SELECT COUNT(*) FROM batches b JOIN conversations c ON c.id = b.conversation_id
		WHERE c.platform = ? AND c.channel = ? AND substr(c.thread, 1, length(CAST(? AS TEXT))) = CAST(? AS TEXT) AND b.status = 'pending'`), platform, channel, prefix, prefix); err != nil {
		return 0, fmt.Errorf("pending in threads: %w", err)
	}
	return n, nil
}

// UnknownCalls lists the conversation's calls whose run outcome is unknown
// and that nobody marked checked yet (see MarkChecked), oldest first (by
// batch creation, then position).
func (db *DB) UnknownCalls(ctx context.Context, conversationID int64) ([]confirm.Call, error) {
	var rows []callRow
	if err := db.sel(ctx, db.reader(), &rows, db.q(`SELECT `+prefixed("c.", callColumns)+` FROM calls c JOIN batches b ON b.id = c.batch_id
		WHERE b.conversation_id = ? AND c.run_status = 'unknown' AND c.checked_at IS NULL
		ORDER BY b.created_at, b.id, c.position`), conversationID); err != nil {
		return nil, fmt.Errorf("unknown calls: %w", err)
	}
	out, err := calls(rows)
	if err != nil {
		return nil, fmt.Errorf("unknown calls: %w", err)
	}
	if err := db.attachVotes(ctx, out, `SELECT v.batch_id, v.key, v.approver, v.at, v.assurance FROM votes v
		JOIN calls c ON c.batch_id = v.batch_id AND c.key = v.key JOIN batches b ON b.id = v.batch_id
		WHERE b.conversation_id = ? AND c.run_status = 'unknown' AND c.checked_at IS NULL ORDER BY v.at, v.id`, conversationID); err != nil {
		return nil, fmt.Errorf("unknown calls: votes: %w", err)
	}
	return out, nil
}

// BatchesIn lists ids of batches in the status, oldest first. Done
// batches are listed by reading every batch (the status index holds open
// batches only); the others through the index.
func (db *DB) BatchesIn(ctx context.Context, status confirm.BatchStatus) ([]string, error) {
	query := `SELECT id FROM batches WHERE status = ? AND status <> 'done' ORDER BY created_at, id`
	if status == confirm.BatchDone {
		query = `SELECT id FROM batches WHERE status = ? ORDER BY created_at, id`
	}
	var ids []string
	if err := db.sel(ctx, db.reader(), &ids, db.q(query), string(status)); err != nil {
		return nil, fmt.Errorf("batches in %s: %w", status, err)
	}
	return ids, nil
}

// UncardedBatches lists pending batches whose card was never recorded,
// and batches of any status whose copies are still pending, oldest first.
func (db *DB) UncardedBatches(ctx context.Context) ([]string, error) {
	var ids []string
	if err := db.sel(ctx, db.reader(), &ids, `SELECT id FROM batches WHERE (status = 'pending' AND card_ref = '') OR copies_pending
		ORDER BY created_at, id`); err != nil {
		return nil, fmt.Errorf("batches without a card: %w", err)
	}
	return ids, nil
}

// OpenBatches lists ids of the conversation's batches that are decided or
// running (decided but not yet done), oldest first. It is not part of
// confirm.Store.
func (db *DB) OpenBatches(ctx context.Context, conversationID int64) ([]string, error) {
	var ids []string
	if err := db.sel(ctx, db.reader(), &ids, db.q(`SELECT id FROM batches
		WHERE conversation_id = ? AND status IN ('decided', 'running') AND status <> 'done' ORDER BY created_at, id`), conversationID); err != nil {
		return nil, fmt.Errorf("open batches: %w", err)
	}
	return ids, nil
}

// BindableBatch is the newest batch of the conversation whose one call is
// of tool with exactly args and still live: pending, or allowed by people
// (or a grant) and not yet started; "" when none. A call the policy
// allowed (no list or rule asks) is never bound: its retry is allowed
// again. The live calls have their own index (calls_bindable), so the
// query reads them alone, whatever else the conversation holds.
func (db *DB) BindableBatch(ctx context.Context, conversationID int64, tool string, args []byte) (string, error) {
	var ids []string
	if err := db.sel(ctx, db.reader(), &ids, db.q(`SELECT b.id FROM calls c JOIN batches b ON b.id = c.batch_id
		WHERE c.tool = ? AND (c.decision = 'pending' OR c.decision IN ('allowed', 'allowed_by_grant') AND c.run_status = 'not_started')
		AND b.conversation_id = ? AND c.args = ?
		AND NOT EXISTS (SELECT 1 FROM calls o WHERE o.batch_id = c.batch_id AND o.key <> c.key)
		ORDER BY b.created_at DESC, b.id DESC LIMIT 1`), tool, conversationID, string(args)); err != nil {
		return "", fmt.Errorf("bindable batch: %w", err)
	}
	if len(ids) == 0 {
		return "", nil
	}
	return ids[0], nil
}

// MarkClientLeft records that the MCP client stopped waiting for the
// pending batch: false when it was recorded already, or the batch is no
// longer pending.
func (db *DB) MarkClientLeft(ctx context.Context, batchID string) (bool, error) {
	n, err := db.execCount(ctx, db.x, db.q(`UPDATE batches SET client_left_at = ?, updated_at = ? WHERE id = ? AND status = 'pending' AND client_left_at IS NULL`),
		db.ts(db.now()), db.ts(db.now()), batchID)
	if err != nil {
		return false, fmt.Errorf("mark client left %s: %w", batchID, err)
	}
	return n == 1, nil
}

// AskedBatch is the newest batch of the conversation whose one call is of
// tool with exactly args and was put to a person (flagged), whatever its
// decision and run since; "" when none (an MCP call's retry).
func (db *DB) AskedBatch(ctx context.Context, conversationID int64, tool string, args []byte) (string, error) {
	var ids []string
	if err := db.sel(ctx, db.reader(), &ids, db.q(`SELECT b.id FROM calls c JOIN batches b ON b.id = c.batch_id
		WHERE c.tool = ? AND c.flagged AND b.conversation_id = ? AND c.args = ?
		AND NOT EXISTS (SELECT 1 FROM calls o WHERE o.batch_id = c.batch_id AND o.key <> c.key)
		ORDER BY b.created_at DESC, b.id DESC LIMIT 1`), tool, conversationID, string(args)); err != nil {
		return "", fmt.Errorf("asked batch: %w", err)
	}
	if len(ids) == 0 {
		return "", nil
	}
	return ids[0], nil
}

// attachVotes loads the votes query selects (batch_id, key, approver, at, assurance;
// oldest first) and sets each call's Votes.
func (db *DB) attachVotes(ctx context.Context, cs []confirm.Call, query string, args ...any) error {
	var rows []voteRow
	if err := db.sel(ctx, db.reader(), &rows, db.q(query), args...); err != nil {
		return err
	}
	if len(rows) == 0 {
		return nil
	}
	type callKey struct{ batch, key string }
	at := make(map[callKey]int, len(cs))
	for i, c := range cs {
		at[callKey{c.BatchID, c.Key}] = i
	}
	for _, v := range rows {
		if i, ok := at[callKey{v.BatchID, v.Key}]; ok {
			cs[i].Votes = append(cs[i].Votes, confirm.Vote{By: v.Approver, At: v.At.t, Via: confirm.Assurance(v.Assurance)})
		}
	}
	return nil
}

// PendingApprovals counts the calls waiting for a person's decision, across
// all conversations (airlock_pending_approvals).
func (db *DB) PendingApprovals(ctx context.Context) (int, error) {
	var n int
	err := db.get(ctx, db.reader(), &n, `SELECT COUNT(*) FROM calls c JOIN batches b ON b.id = c.batch_id
		WHERE b.status = 'pending' AND b.status <> 'done' AND c.decision = 'pending'`)
	if err != nil {
		return 0, fmt.Errorf("count pending approvals: %w", err)
	}
	return n, nil
}

// ConsoleBatches lists the ids of the batches the web console's inbox may
// show, newest first, at most limit of each kind: those pending (waiting
// for someone; who may decide is the bot's to say), and the recent ones
// (of the last week) that one of requesters asked for.
func (db *DB) ConsoleBatches(ctx context.Context, requesters []string, limit int) (pending, asked []string, err error) {
	if err := db.sel(ctx, db.reader(), &pending, db.q(`SELECT id FROM batches
		WHERE status = 'pending' AND status <> 'done' ORDER BY created_at DESC, id DESC LIMIT ?`), limit); err != nil {
		return nil, nil, fmt.Errorf("console batches: %w", err)
	}
	if len(requesters) == 0 {
		return pending, nil, nil
	}
	q, args, err := sqlx.In(`SELECT id FROM batches WHERE requested_by IN (?) AND created_at > ? ORDER BY created_at DESC, id DESC LIMIT ?`,
		requesters, db.ts(db.stamp().Add(-7*24*time.Hour)), limit)
	if err != nil {
		return nil, nil, fmt.Errorf("console batches: %w", err)
	}
	if err := db.sel(ctx, db.reader(), &asked, db.q(q), args...); err != nil {
		return nil, nil, fmt.Errorf("console batches: %w", err)
	}
	return pending, asked, nil
}
