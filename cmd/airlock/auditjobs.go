package main

import (
	"context"
	"time"

	"github.com/airlockhq/airlock/config"
	"github.com/airlockhq/airlock/jobs"
	"github.com/airlockhq/airlock/storage"
)

// Names of the audit's jobs (the job label of airlock_job_seconds).
const (
	JobAuditCheckpoint = "audit-checkpoint"
	JobAuditRetention  = "audit-retention"
)

// auditCheckEvery is how often audit-checkpoint asks whether a checkpoint
// is due (a cheap read when none is).
const auditCheckEvery = time.Minute

// auditJobs is the audit's background work with audit.signing_key set:
// audit-checkpoint signs and stores the chain's head every
// audit.checkpoint_every (and sends it as the audit_checkpoint event).
// Without the key there is none.
func auditJobs(a config.Audit, db *storage.DB) []jobs.Job {
	key := a.Key()
	if key == nil {
		return nil
	}
	policy := storage.CheckpointPolicy{Rows: a.CheckpointEvery.RowCount(), Interval: a.CheckpointEvery.Every()}
	return []jobs.Job{{
		Name: JobAuditCheckpoint, Every: auditCheckEvery, Timeout: time.Minute, AtStart: true,
		Run: func(ctx context.Context) error {
			_, err := db.CheckpointAudit(ctx, key, policy)
			return err
		},
	}}
}
