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

// auditRetentionEvery is how often audit-retention prunes.
const auditRetentionEvery = time.Hour

// auditJobs is the audit's background work with audit.signing_key set:
// audit-checkpoint signs and stores the chain's head every
// audit.checkpoint_every (and sends it as the audit_checkpoint event);
// with audit.retention, audit-retention prunes the rows older than it, at
// start and every hour, behind a signed start checkpoint. Without the key
// there is none (config refuses retention without it).
func auditJobs(a config.Audit, db *storage.DB) []jobs.Job {
	key := a.Key()
	if key == nil {
		return nil
	}
	policy := storage.CheckpointPolicy{Rows: a.CheckpointEvery.RowCount(), Interval: a.CheckpointEvery.Every()}
	all := []jobs.Job{{
		Name: JobAuditCheckpoint, Every: auditCheckEvery, Timeout: time.Minute, AtStart: true,
		Run: func(ctx context.Context) error {
			_, err := db.CheckpointAudit(ctx, key, policy)
			return err
		},
	}}
	if keep := a.RetentionPeriod(); keep > 0 {
		all = append(all, jobs.Job{
			Name: JobAuditRetention, Every: auditRetentionEvery, Timeout: 10 * time.Minute, AtStart: true,
			Run: func(ctx context.Context) error {
				_, err := db.PruneAudit(ctx, key, db.Clock()().Add(-keep))
				return err
			},
		})
	}
	return all
}
