package confirm

import (
	"context"
	"encoding/json"
	"strconv"
	"time"
)

// RoleRunbookStep is the stored role of a runbook step batch's messages:
// the model never sees them (it never made those calls).
const RoleRunbookStep = "runbook_step"

// RunbookStatus is where a runbook run stands.
type RunbookStatus string

const (
	RunbookRunning   RunbookStatus = "running"
	RunbookSucceeded RunbookStatus = "succeeded"
	RunbookFailed    RunbookStatus = "failed"
	RunbookDenied    RunbookStatus = "denied"
	RunbookExpired   RunbookStatus = "expired"
	RunbookStopped   RunbookStatus = "stopped"
	// RunbookHalted: a step's outcome is unknown; a person marks it done,
	// retries it or stops the run.
	RunbookHalted RunbookStatus = "halted"
)

// Final reports whether the run has ended.
func (s RunbookStatus) Final() bool { return s != RunbookRunning && s != RunbookHalted }

// Phases of a runbook's steps.
const (
	PhaseMain      = "main"
	PhaseOnFailure = "on_failure"
)

// StepStatus is where one attempt of a runbook step stands: started (the
// engine owns it and is submitting its call), waiting (its one-call batch
// exists: a card waits, or the call runs), then its outcome.
type StepStatus string

const (
	StepStarted   StepStatus = "started"
	StepWaiting   StepStatus = "waiting"
	StepSucceeded StepStatus = "succeeded"
	StepFailed    StepStatus = "failed"
	StepDenied    StepStatus = "denied"
	StepExpired   StepStatus = "expired"
	StepSkipped   StepStatus = "skipped"
	StepUnknown   StepStatus = "unknown"
)

// Active reports whether the attempt has no outcome yet.
func (s StepStatus) Active() bool { return s == StepStarted || s == StepWaiting }

// ReasonRunbookStep: the runbook step says confirm (or approvals).
const ReasonRunbookStep ReasonKind = "runbook_step"

// Audit kinds of runbook runs (and the webhook event types of the same
// names).
const (
	AuditRunbookStarted  AuditKind = "runbook_started"
	AuditRunbookStep     AuditKind = "runbook_step"
	AuditRunbookFinished AuditKind = "runbook_finished"
)

// RunbookRun is one run of a runbook.
type RunbookRun struct {
	ID             string // opaque, random
	Runbook        string
	Snapshot       json.RawMessage // the definition when the run started
	Params         json.RawMessage // the validated parameters, a JSON object
	RequestedBy    string          // platform user id of who started it
	ConversationID int64
	Status         RunbookStatus
	FailedStep     string // the step the run stopped or halted at
	MessageRef     string // the platform's reference of the run message
	// ParentBatch and ParentKey name the model's runbook__<name> call that
	// started the run ("" when a person did).
	ParentBatch string
	ParentKey   string
	StoppedBy   string
	// ActiveStep is the step being run, "phase/step/attempt" ("" none).
	ActiveStep string
	// DueAt: the run waits until then before its next step (a retry's
	// delay); nil: due now.
	DueAt      *time.Time
	CreatedAt  time.Time
	UpdatedAt  time.Time
	FinishedAt *time.Time
}

// StepKey names one attempt of one step of a run.
type StepKey struct {
	RunID   string
	Phase   string // PhaseMain or PhaseOnFailure
	StepID  string
	Attempt int // from 1
}

// Active is the key as RunbookRun.ActiveStep holds it.
func (k StepKey) Active() string {
	return k.Phase + "/" + k.StepID + "/" + itoa(k.Attempt)
}

// IdempotencyKey is the key the step's tool gets: <run id>/<step id>/<attempt>.
func (k StepKey) IdempotencyKey() string {
	return k.RunID + "/" + k.StepID + "/" + itoa(k.Attempt)
}

func itoa(n int) string { return strconv.Itoa(n) }

// RunbookStep is one attempt of one step of a run, in the order they
// started (Seq).
type RunbookStep struct {
	StepKey
	Seq        int
	Tool       string
	Status     StepStatus
	BatchID    string // the step's one-call batch ("" before it exists, or skipped)
	Result     string // the tool's result, or why the step ended without one
	MarkedBy   string // who marked an unknown outcome done
	CreatedAt  time.Time
	FinishedAt *time.Time
}

// RunbookStore is what runbook runs need from storage. Every transition
// is one conditional UPDATE (or an INSERT a key decides) whose
// affected-row count decides: false means another caller (a replica, a
// second click) won, or the run or step was not in the state required,
// and nothing was written. Each transition stamps its times (and decides
// whether a run is due) from the store's clock, read once per
// transaction; no caller passes a time in.
type RunbookStore interface {
	// CreateRunbookRun stores a new run, status running (ID set when
	// empty, times the database clock's), and audits runbook_started with
	// its parameters, in one transaction.
	CreateRunbookRun(ctx context.Context, r *RunbookRun) error
	// RunbookRun loads a run; ErrNotFound when none.
	RunbookRun(ctx context.Context, id string) (*RunbookRun, error)
	// RunbookSteps lists a run's step attempts in the order they started.
	RunbookSteps(ctx context.Context, runID string) ([]RunbookStep, error)
	// StartRunbookStep starts the attempt k of tool: only while the run is
	// running, due (DueAt passed or nil) and has no active step; the run's
	// ActiveStep becomes k and the step is stored started. With outcome
	// skipped, the step is stored skipped at once and the run keeps no
	// active step.
	StartRunbookStep(ctx context.Context, k StepKey, tool string, skipped bool) (bool, error)
	// SetRunbookStepBatch links a started step to its one-call batch:
	// started to waiting.
	SetRunbookStepBatch(ctx context.Context, k StepKey, batchID string) (bool, error)
	// RunbookStepByBatch returns the step whose batch it is; ErrNotFound
	// when the batch is no step's.
	RunbookStepByBatch(ctx context.Context, batchID string) (*RunbookStep, error)
	// FinishRunbookStep records an active step's outcome and result,
	// clears the run's active step, sets the run's DueAt (nil: due now),
	// and audits runbook_step, in one transaction.
	FinishRunbookStep(ctx context.Context, k StepKey, status StepStatus, result string, due *time.Time) (bool, error)
	// MarkRunbookStepDone takes an unknown step of a halted run to
	// succeeded (marked by by) and the run back to running, audited.
	MarkRunbookStepDone(ctx context.Context, k StepKey, by string) (bool, error)
	// HaltRunbookRun takes a running run to halted at step.
	HaltRunbookRun(ctx context.Context, runID, step string) (bool, error)
	// ResumeRunbookRun takes a halted run back to running (a Retry).
	ResumeRunbookRun(ctx context.Context, runID string) (bool, error)
	// FinishRunbookRun ends a running or halted run with status (final),
	// failedStep and stoppedBy, and audits runbook_finished.
	FinishRunbookRun(ctx context.Context, runID string, status RunbookStatus, failedStep, stoppedBy string) (bool, error)
	// SetRunbookMessageRef records where the run message was posted.
	SetRunbookMessageRef(ctx context.Context, runID, ref string) error
	// DueRunbookRuns lists running runs with no active step whose DueAt
	// has passed (or is nil), oldest first.
	DueRunbookRuns(ctx context.Context, now time.Time) ([]string, error)
	// LiveRunbookRuns lists the runs not ended (running or halted),
	// oldest first.
	LiveRunbookRuns(ctx context.Context) ([]RunbookRun, error)
	// RunbookRunByParent returns the run a model's call started;
	// ErrNotFound when none.
	RunbookRunByParent(ctx context.Context, batchID, key string) (*RunbookRun, error)
}

// runRefPrefix starts a run's reference (the buttons of its run message).
const runRefPrefix = "run-"

// RunRef is the opaque reference the buttons of a run's message carry:
// the run's id only (the server owns the run; the click names it).
func RunRef(runID string) string { return runRefPrefix + runID }

// ParseRunRef returns the run id of a reference made by RunRef.
func ParseRunRef(ref string) (string, error) { return prefixedID(ref, runRefPrefix) }
