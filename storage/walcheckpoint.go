package storage

import (
	"context"
	"fmt"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/airlockhq/airlock/jobs"
)

// SQLite's WAL checkpoints, off the writer's path.
//
// SQLite copies the WAL back into the database file (a checkpoint) in the
// connection that commits once the WAL passes wal_autocheckpoint pages,
// and the copy ends with an fsync of the file: on a disk, several
// milliseconds in which that commit, and every write queued behind the one
// writer, waits. At the approval API's 200 requests a second that was a
// checkpoint every 0.4 s and the slowest 1% of answers (issue 36's floor:
// p99 at most 5 ms above a bare handler; BENCHMARKS.md, nineteenth round).
// So a job (JobWALCheckpoint) checkpoints PASSIVE every
// WALCheckpointEvery on a connection of its own, beside the writer (a
// passive checkpoint never waits for a writer, nor makes one wait), and
// the writer's own threshold is raised to writerAutocheckpoint: it still
// checkpoints, rarely and with little left to copy, which also starts the
// WAL over (a passive checkpoint beside a stream of writes never does),
// so the WAL stays under about writerAutocheckpoint pages.

// JobWALCheckpoint names the job (the job label of airlock_job_seconds).
const JobWALCheckpoint = "wal-checkpoint"

// WALCheckpointEvery is the interval of the checkpoint job.
const WALCheckpointEvery = 250 * time.Millisecond

// writerAutocheckpoint is the writer connection's wal_autocheckpoint, in
// pages (SQLite's default is 1000).
const writerAutocheckpoint = 3500

// openCheckpointer opens the checkpoint job's connection and raises the
// writer's threshold (a setting of its one connection, kept while it
// lives; a replaced connection checkpoints at SQLite's default, which is
// slower, never wrong).
func (db *DB) openCheckpointer(ctx context.Context, name, dsn string) error {
	if _, err := db.x.ExecContext(ctx, fmt.Sprintf(`PRAGMA wal_autocheckpoint = %d`, writerAutocheckpoint)); err != nil {
		return fmt.Errorf("wal_autocheckpoint: %w", err)
	}
	ck, err := sqlx.Open(name, sqlitePoolDSN(dsn, "-64", map[string]string{"_txlock": "deferred"}))
	if err != nil {
		return err
	}
	ck.SetMaxOpenConns(1)
	ck.SetMaxIdleConns(1)
	db.ck = ck
	return nil
}

// Jobs is storage's background work for a jobs.Runner: on a SQLite
// file, the WAL checkpoints (JobWALCheckpoint); none otherwise.
func (db *DB) Jobs() []jobs.Job {
	if db.ck == nil {
		return nil
	}
	return []jobs.Job{{Name: JobWALCheckpoint, Every: WALCheckpointEvery, Timeout: time.Minute, Run: db.CheckpointWAL}}
}

// CheckpointWAL copies what the WAL holds into the database file without
// waiting for, or holding up, the writer (SQLite's PASSIVE checkpoint).
// A no-op but on a SQLite file.
func (db *DB) CheckpointWAL(ctx context.Context) error {
	if db.ck == nil {
		return nil
	}
	if _, err := db.ck.ExecContext(ctx, `PRAGMA wal_checkpoint(PASSIVE)`); err != nil {
		return fmt.Errorf("wal checkpoint: %w", err)
	}
	return nil
}
