package storage

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/airlockhq/airlock/internal/jsonobj"

	"github.com/jmoiron/sqlx"

	"github.com/airlockhq/airlock/confirm"
	"github.com/airlockhq/airlock/internal/ids"
	"github.com/airlockhq/airlock/redact"
)

// The confirm.RunbookStore contract: runbook runs and their steps. Every
// transition is one conditional UPDATE (or an INSERT a primary key
// decides) whose affected-row count decides, so with replicas each step
// of a run starts once. Each transition stamps its times from the store's
// clock, read once (db.stamp), as every other transaction does.

var _ confirm.RunbookStore = (*DB)(nil)

const runbookRunColumns = `id, runbook, snapshot, params, requested_by, conversation_id, status, failed_step,
	message_ref, parent_batch, parent_key, stopped_by, active_step, due_at, created_at, updated_at, finished_at`

type runbookRunRow struct {
	ID             string `db:"id"`
	Runbook        string `db:"runbook"`
	Snapshot       string `db:"snapshot"`
	Params         string `db:"params"`
	RequestedBy    string `db:"requested_by"`
	ConversationID int64  `db:"conversation_id"`
	Status         string `db:"status"`
	FailedStep     string `db:"failed_step"`
	MessageRef     string `db:"message_ref"`
	ParentBatch    string `db:"parent_batch"`
	ParentKey      string `db:"parent_key"`
	StoppedBy      string `db:"stopped_by"`
	ActiveStep     string `db:"active_step"`
	DueAt          dbTime `db:"due_at"`
	CreatedAt      dbTime `db:"created_at"`
	UpdatedAt      dbTime `db:"updated_at"`
	FinishedAt     dbTime `db:"finished_at"`
}

func (r runbookRunRow) run() *confirm.RunbookRun {
	return &confirm.RunbookRun{
		ID: r.ID, Runbook: r.Runbook, Snapshot: rawBytes(r.Snapshot), Params: rawBytes(r.Params),
		RequestedBy: r.RequestedBy, ConversationID: r.ConversationID, Status: confirm.RunbookStatus(r.Status),
		FailedStep: r.FailedStep, MessageRef: r.MessageRef, ParentBatch: r.ParentBatch, ParentKey: r.ParentKey,
		StoppedBy: r.StoppedBy, ActiveStep: r.ActiveStep, DueAt: r.DueAt.ptr(), CreatedAt: r.CreatedAt.t,
		UpdatedAt: r.UpdatedAt.t, FinishedAt: r.FinishedAt.ptr(),
	}
}

const runbookStepColumns = `run_id, phase, step_id, attempt, seq, tool, status, batch_id, result, marked_by, created_at, finished_at`

type runbookStepRow struct {
	RunID      string `db:"run_id"`
	Phase      string `db:"phase"`
	StepID     string `db:"step_id"`
	Attempt    int    `db:"attempt"`
	Seq        int    `db:"seq"`
	Tool       string `db:"tool"`
	Status     string `db:"status"`
	BatchID    string `db:"batch_id"`
	Result     string `db:"result"`
	MarkedBy   string `db:"marked_by"`
	CreatedAt  dbTime `db:"created_at"`
	FinishedAt dbTime `db:"finished_at"`
}

func (r runbookStepRow) step() confirm.RunbookStep {
	return confirm.RunbookStep{
		StepKey: confirm.StepKey{RunID: r.RunID, Phase: r.Phase, StepID: r.StepID, Attempt: r.Attempt},
		Seq:     r.Seq, Tool: r.Tool, Status: confirm.StepStatus(r.Status), BatchID: r.BatchID, Result: r.Result,
		MarkedBy: r.MarkedBy, CreatedAt: r.CreatedAt.t, FinishedAt: r.FinishedAt.ptr(),
	}
}

// runbookDetail is a runbook audit detail without the secrets scrub
// removes (WithScrub), in every string of it (parameters a person typed,
// results, names), as a tool_call's arguments are; the run keeps its
// parameters exact.
func (db *DB) runbookDetail(d jsonobj.Object) string {
	return string(redact.JSON([]byte(d.String()), db.scrub))
}

// errRunbookInput reports bad input to a runbook transition (nothing written).
var errRunbookInput = errors.New("invalid runbook input")

func validStepKey(k confirm.StepKey) error {
	if k.RunID == "" || k.StepID == "" || k.Attempt < 1 || (k.Phase != confirm.PhaseMain && k.Phase != confirm.PhaseOnFailure) {
		return fmt.Errorf("step %+v: %w", k, errRunbookInput)
	}
	return nil
}

// CreateRunbookRun stores a new run, status running, created at the
// store's clock, and audits runbook_started (with the parameters), in one
// transaction.
func (db *DB) CreateRunbookRun(ctx context.Context, r *confirm.RunbookRun) error {
	if r.Runbook == "" || r.ConversationID == 0 || !json.Valid(r.Snapshot) || !json.Valid(r.Params) {
		return fmt.Errorf("create runbook run: runbook, conversation, snapshot and params are required: %w", errRunbookInput)
	}
	if r.ID == "" {
		r.ID = ids.New()
	}
	r.Status, r.FailedStep, r.StoppedBy, r.ActiveStep, r.DueAt, r.FinishedAt = confirm.RunbookRunning, "", "", "", nil, nil
	err := db.tx(ctx, func(tx *txn) error {
		r.CreatedAt, r.UpdatedAt = tx.now, tx.now
		_, err := db.exec(ctx, tx, db.q(`INSERT INTO runbook_runs (`+runbookRunColumns+`)
			VALUES (?, ?, ?, ?, ?, ?, 'running', '', ?, ?, ?, '', '', NULL, ?, ?, NULL)`),
			r.ID, r.Runbook, string(r.Snapshot), string(r.Params), r.RequestedBy, r.ConversationID,
			r.MessageRef, r.ParentBatch, r.ParentKey, db.ts(r.CreatedAt), db.ts(r.UpdatedAt))
		if err != nil {
			return fmt.Errorf("insert run: %w", err)
		}
		var d jsonobj.Object
		d.Add("run_id", r.ID)
		d.Add("runbook", r.Runbook)
		d.AddRaw("params", r.Params) // scrubbed with the rest (runbookDetail)
		if r.ParentBatch != "" {
			d.Add("parent_batch", r.ParentBatch)
			d.Add("parent_key", r.ParentKey)
		}
		return db.insertAudit(ctx, tx, confirm.AuditEvent{
			At: r.CreatedAt, Kind: confirm.AuditRunbookStarted, ConversationID: r.ConversationID,
			Tool: r.Runbook, Actor: r.RequestedBy, Detail: db.runbookDetail(d),
		})
	})
	if err != nil {
		return fmt.Errorf("create runbook run: %w", err)
	}
	return nil
}

// RunbookRun loads a run; ErrNotFound when none.
func (db *DB) RunbookRun(ctx context.Context, id string) (*confirm.RunbookRun, error) {
	return db.runbookRun(ctx, db.reader(), id)
}

func (db *DB) runbookRun(ctx context.Context, q sqlx.QueryerContext, id string) (*confirm.RunbookRun, error) {
	var row runbookRunRow
	if err := db.get(ctx, q, &row, db.q(`SELECT `+runbookRunColumns+` FROM runbook_runs WHERE id = ?`), id); err != nil {
		return nil, fmt.Errorf("load runbook run %s: %w", id, notFound(err))
	}
	return row.run(), nil
}

// RunbookSteps lists a run's step attempts in the order they started.
func (db *DB) RunbookSteps(ctx context.Context, runID string) ([]confirm.RunbookStep, error) {
	var rows []runbookStepRow
	if err := db.sel(ctx, db.reader(), &rows, db.q(`SELECT `+runbookStepColumns+` FROM runbook_steps WHERE run_id = ? ORDER BY seq`), runID); err != nil {
		return nil, fmt.Errorf("load runbook steps %s: %w", runID, err)
	}
	out := make([]confirm.RunbookStep, len(rows))
	for i, r := range rows {
		out[i] = r.step()
	}
	return out, nil
}

// StartRunbookStep starts attempt k: one conditional UPDATE of the run
// (running, due, no active step) decides, then the step row is inserted
// in the same transaction. A skipped step is stored with its outcome and
// leaves the run without an active step.
func (db *DB) StartRunbookStep(ctx context.Context, k confirm.StepKey, tool string, skipped bool) (bool, error) {
	if err := validStepKey(k); err != nil {
		return false, fmt.Errorf("start runbook step: %w", err)
	}
	active, status := k.Active(), confirm.StepStarted
	if skipped {
		active, status = "", confirm.StepSkipped
	}
	won, err := db.transition(ctx, func(tx *txn) error {
		now := tx.now
		var finished any
		if skipped {
			finished = db.ts(now)
		}
		n, err := db.execCount(ctx, tx, db.q(`UPDATE runbook_runs SET active_step = ?, due_at = NULL, updated_at = ?
			WHERE id = ? AND status = 'running' AND active_step = '' AND (due_at IS NULL OR due_at <= ?)`),
			active, db.ts(now), k.RunID, db.ts(now))
		if err != nil {
			return fmt.Errorf("update run: %w", err)
		}
		if n == 0 {
			return errLost
		}
		var seq int
		if err := db.get(ctx, tx, &seq, db.q(`SELECT COALESCE(MAX(seq), 0) + 1 FROM runbook_steps WHERE run_id = ?`), k.RunID); err != nil {
			return fmt.Errorf("next seq: %w", err)
		}
		n, err = db.execCount(ctx, tx, db.q(`INSERT INTO runbook_steps (`+runbookStepColumns+`)
			VALUES (?, ?, ?, ?, ?, ?, ?, '', '', '', ?, ?) ON CONFLICT DO NOTHING`),
			k.RunID, k.Phase, k.StepID, k.Attempt, seq, tool, string(status), db.ts(now), finished)
		if err != nil {
			return fmt.Errorf("insert step: %w", err)
		}
		if n == 0 {
			return errLost // this attempt ran before: roll the run's update back
		}
		if skipped {
			return db.auditRunbookStep(ctx, tx, k, tool, status, "", "")
		}
		return nil
	})
	if err != nil {
		return false, fmt.Errorf("start runbook step %s: %w", k.Active(), err)
	}
	return won, nil
}

// SetRunbookStepBatch links a started step to its batch (started to waiting).
func (db *DB) SetRunbookStepBatch(ctx context.Context, k confirm.StepKey, batchID string) (bool, error) {
	if err := validStepKey(k); err != nil || batchID == "" {
		return false, fmt.Errorf("set runbook step batch: %w", errors.Join(err, errRunbookInput))
	}
	n, err := db.execCount(ctx, db.x, db.q(`UPDATE runbook_steps SET status = 'waiting', batch_id = ?
		WHERE run_id = ? AND phase = ? AND step_id = ? AND attempt = ? AND status = 'started'`),
		batchID, k.RunID, k.Phase, k.StepID, k.Attempt)
	if err != nil {
		return false, fmt.Errorf("set runbook step batch %s: %w", k.Active(), err)
	}
	return n == 1, nil
}

// RunbookStepByBatch returns the step whose batch it is.
func (db *DB) RunbookStepByBatch(ctx context.Context, batchID string) (*confirm.RunbookStep, error) {
	if batchID == "" {
		return nil, fmt.Errorf("runbook step of batch: %w", confirm.ErrNotFound)
	}
	var row runbookStepRow
	if err := db.get(ctx, db.reader(), &row, db.q(`SELECT `+runbookStepColumns+` FROM runbook_steps WHERE batch_id = ?`), batchID); err != nil {
		return nil, fmt.Errorf("runbook step of batch %s: %w", batchID, notFound(err))
	}
	s := row.step()
	return &s, nil
}

// finalStep reports whether status is an outcome an active step may end
// with.
func finalStep(s confirm.StepStatus) bool {
	switch s {
	case confirm.StepSucceeded, confirm.StepFailed, confirm.StepDenied, confirm.StepExpired, confirm.StepUnknown:
		return true
	}
	return false
}

// FinishRunbookStep records an active step's outcome: the step's
// conditional UPDATE (started or waiting) decides; the run's active step
// is cleared (only when it is this step) and its due time set, and
// runbook_step is audited, in one transaction.
func (db *DB) FinishRunbookStep(ctx context.Context, k confirm.StepKey, status confirm.StepStatus, result string, due *time.Time) (bool, error) {
	if err := validStepKey(k); err != nil || !finalStep(status) {
		return false, fmt.Errorf("finish runbook step: status %q: %w", status, errors.Join(err, errRunbookInput))
	}
	var dueAt any
	if due != nil {
		dueAt = db.ts(*due)
	}
	won, err := db.transition(ctx, func(tx *txn) error {
		now := tx.now
		var s struct {
			Tool    string `db:"tool"`
			BatchID string `db:"batch_id"`
		}
		err := db.updateReturning(ctx, tx, &s,
			`UPDATE runbook_steps SET status = ?, result = ?, finished_at = ?
			WHERE run_id = ? AND phase = ? AND step_id = ? AND attempt = ? AND status IN ('started', 'waiting')`,
			[]any{string(status), result, db.ts(now), k.RunID, k.Phase, k.StepID, k.Attempt},
			`tool, batch_id`,
			`SELECT tool, batch_id FROM runbook_steps WHERE run_id = ? AND phase = ? AND step_id = ? AND attempt = ?`,
			k.RunID, k.Phase, k.StepID, k.Attempt)
		if err := lostIfNoRows(err, "update step"); err != nil {
			return err
		}
		if _, err := db.exec(ctx, tx, db.q(`UPDATE runbook_runs SET active_step = '', due_at = ?, updated_at = ?
			WHERE id = ? AND active_step = ?`), dueAt, db.ts(now), k.RunID, k.Active()); err != nil {
			return fmt.Errorf("update run: %w", err)
		}
		return db.auditRunbookStep(ctx, tx, k, s.Tool, status, s.BatchID, result)
	})
	if err != nil {
		return false, fmt.Errorf("finish runbook step %s: %w", k.Active(), err)
	}
	return won, nil
}

// auditRunbookStep writes runbook_step for a step's outcome (the result
// scrubbed and cut as tool results are; the step's arguments are its
// call's, which the webhook event carries from the batch).
func (db *DB) auditRunbookStep(ctx context.Context, tx *txn, k confirm.StepKey, tool string, status confirm.StepStatus, batchID, result string) error {
	return db.auditRunbookStepBy(ctx, tx, k, tool, status, batchID, result, auditSystemActor)
}

func (db *DB) auditRunbookStepBy(ctx context.Context, tx *txn, k confirm.StepKey, tool string, status confirm.StepStatus, batchID, result, actor string) error {
	now := tx.now
	var run struct {
		ConversationID int64  `db:"conversation_id"`
		Runbook        string `db:"runbook"`
	}
	if err := db.get(ctx, tx, &run, db.q(`SELECT conversation_id, runbook FROM runbook_runs WHERE id = ?`), k.RunID); err != nil {
		return fmt.Errorf("run of step: %w", notFound(err))
	}
	convID := run.ConversationID
	var d jsonobj.Object
	d.Add("run_id", k.RunID)
	d.Add("runbook", run.Runbook)
	d.Add("step", k.StepID)
	d.Add("phase", k.Phase)
	d.Add("attempt", k.Attempt)
	d.Add("outcome", string(status))
	if result != "" {
		text, cut := excerpt(db.scrub(result), resultExcerptLen)
		d.Add("result", text)
		if cut {
			d.Add("result_truncated", true)
		}
	}
	key := ""
	if batchID != "" {
		key = "#0"
		var k0 string
		if err := db.get(ctx, tx, &k0, db.q(`SELECT key FROM calls WHERE batch_id = ? ORDER BY position LIMIT 1`), batchID); err == nil {
			key = k0
		}
	}
	return db.insertAudit(ctx, tx, confirm.AuditEvent{
		At: now, Kind: confirm.AuditRunbookStep, ConversationID: convID, BatchID: batchID, CallKey: key,
		Tool: tool, Actor: actor, Detail: db.runbookDetail(d),
	})
}

// MarkRunbookStepDone takes an unknown step of a halted run to succeeded
// and the run back to running, audited, in one transaction.
func (db *DB) MarkRunbookStepDone(ctx context.Context, k confirm.StepKey, by string) (bool, error) {
	if err := validStepKey(k); err != nil {
		return false, fmt.Errorf("mark runbook step done: %w", err)
	}
	won, err := db.transition(ctx, func(tx *txn) error {
		now := tx.now
		n, err := db.execCount(ctx, tx, db.q(`UPDATE runbook_runs SET status = 'running', failed_step = '', updated_at = ?
			WHERE id = ? AND status = 'halted' AND active_step = ''`), db.ts(now), k.RunID)
		if err != nil {
			return fmt.Errorf("update run: %w", err)
		}
		if n == 0 {
			return errLost
		}
		var s struct {
			Tool    string `db:"tool"`
			BatchID string `db:"batch_id"`
			Result  string `db:"result"`
		}
		err = db.updateReturning(ctx, tx, &s,
			`UPDATE runbook_steps SET status = 'succeeded', marked_by = ?
			WHERE run_id = ? AND phase = ? AND step_id = ? AND attempt = ? AND status = 'unknown'`,
			[]any{by, k.RunID, k.Phase, k.StepID, k.Attempt},
			`tool, batch_id, result`,
			`SELECT tool, batch_id, result FROM runbook_steps WHERE run_id = ? AND phase = ? AND step_id = ? AND attempt = ?`,
			k.RunID, k.Phase, k.StepID, k.Attempt)
		if err := lostIfNoRows(err, "update step"); err != nil {
			return err // errLost: the run's update rolls back
		}
		return db.auditRunbookStepBy(ctx, tx, k, s.Tool, confirm.StepSucceeded, s.BatchID, s.Result, by)
	})
	if err != nil {
		return false, fmt.Errorf("mark runbook step done %s: %w", k.Active(), err)
	}
	return won, nil
}

func (db *DB) runTransition(ctx context.Context, what, query string, args ...any) (bool, error) {
	n, err := db.execCount(ctx, db.x, db.q(query), args...)
	if err != nil {
		return false, fmt.Errorf("%s: %w", what, err)
	}
	return n == 1, nil
}

// HaltRunbookRun takes a running run with no active step to halted at step.
func (db *DB) HaltRunbookRun(ctx context.Context, runID, step string) (bool, error) {
	return db.runTransition(ctx, "halt runbook run", `UPDATE runbook_runs SET status = 'halted', failed_step = ?, updated_at = ?
		WHERE id = ? AND status = 'running' AND active_step = ''`, step, db.ts(db.stamp()), runID)
}

// ResumeRunbookRun takes a halted run back to running.
func (db *DB) ResumeRunbookRun(ctx context.Context, runID string) (bool, error) {
	return db.runTransition(ctx, "resume runbook run", `UPDATE runbook_runs SET status = 'running', failed_step = '', due_at = NULL, updated_at = ?
		WHERE id = ? AND status = 'halted'`, db.ts(db.stamp()), runID)
}

// FinishRunbookRun ends a running or halted run and audits
// runbook_finished, in one transaction. A run with an active step ends
// only as stopped (the step's outcome then finds the run ended).
func (db *DB) FinishRunbookRun(ctx context.Context, runID string, status confirm.RunbookStatus, failedStep, stoppedBy string) (bool, error) {
	if !status.Final() {
		return false, fmt.Errorf("finish runbook run: status %q is not final: %w", status, errRunbookInput)
	}
	cond := ` AND active_step = ''`
	if status == confirm.RunbookStopped {
		cond = ``
	}
	won, err := db.transition(ctx, func(tx *txn) error {
		now := tx.now
		var r struct {
			ConversationID int64  `db:"conversation_id"`
			Runbook        string `db:"runbook"`
		}
		err := db.updateReturning(ctx, tx, &r,
			`UPDATE runbook_runs SET status = ?, failed_step = ?, stopped_by = ?, updated_at = ?, finished_at = ?
			WHERE id = ? AND status IN ('running', 'halted')`+cond,
			[]any{string(status), failedStep, stoppedBy, db.ts(now), db.ts(now), runID},
			`conversation_id, runbook`,
			`SELECT conversation_id, runbook FROM runbook_runs WHERE id = ?`, runID)
		if err := lostIfNoRows(err, "update run"); err != nil {
			return err
		}
		var d jsonobj.Object
		d.Add("run_id", runID)
		d.Add("outcome", string(status))
		if failedStep != "" {
			d.Add("failed_step", failedStep)
		}
		actor := auditSystemActor
		if stoppedBy != "" {
			actor = stoppedBy
		}
		return db.insertAudit(ctx, tx, confirm.AuditEvent{
			At: now, Kind: confirm.AuditRunbookFinished, ConversationID: r.ConversationID,
			Tool: r.Runbook, Actor: actor, Detail: db.runbookDetail(d),
		})
	})
	if err != nil {
		return false, fmt.Errorf("finish runbook run %s: %w", runID, err)
	}
	return won, nil
}

// SetRunbookMessageRef records where the run message was posted.
func (db *DB) SetRunbookMessageRef(ctx context.Context, runID, ref string) error {
	return db.updateRow(ctx, "set runbook message ref", "run "+runID, `UPDATE runbook_runs SET message_ref = ? WHERE id = ?`, ref, runID)
}

// DueRunbookRuns lists running runs with no active step that are due.
func (db *DB) DueRunbookRuns(ctx context.Context, now time.Time) ([]string, error) {
	var ids []string
	err := db.sel(ctx, db.reader(), &ids, db.q(`SELECT id FROM runbook_runs
		WHERE status = 'running' AND active_step = '' AND (due_at IS NULL OR due_at <= ?)
		ORDER BY created_at, id`), db.ts(db.nowOr(now)))
	if err != nil {
		return nil, fmt.Errorf("due runbook runs: %w", err)
	}
	return ids, nil
}

// LiveRunbookRuns lists the runs running or halted, oldest first.
func (db *DB) LiveRunbookRuns(ctx context.Context) ([]confirm.RunbookRun, error) {
	var rows []runbookRunRow
	err := db.sel(ctx, db.reader(), &rows, db.q(`SELECT `+runbookRunColumns+` FROM runbook_runs
		WHERE status IN ('running', 'halted') ORDER BY created_at, id`))
	if err != nil {
		return nil, fmt.Errorf("live runbook runs: %w", err)
	}
	out := make([]confirm.RunbookRun, len(rows))
	for i, r := range rows {
		out[i] = *r.run()
	}
	return out, nil
}

// RunbookRunByParent returns the run a model's call started.
func (db *DB) RunbookRunByParent(ctx context.Context, batchID, key string) (*confirm.RunbookRun, error) {
	if batchID == "" {
		return nil, fmt.Errorf("runbook run of call: %w", confirm.ErrNotFound)
	}
	var row runbookRunRow
	err := db.get(ctx, db.reader(), &row, db.q(`SELECT `+runbookRunColumns+` FROM runbook_runs
		WHERE parent_batch = ? AND parent_key = ? ORDER BY created_at LIMIT 1`), batchID, key)
	if err != nil {
		return nil, fmt.Errorf("runbook run of call %s/%s: %w", batchID, key, notFound(err))
	}
	return row.run(), nil
}
