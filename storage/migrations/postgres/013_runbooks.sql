-- Runbook runs and their steps. A run's definition is snapshotted when it
-- starts (the runbook as configured, JSON): editing the config does not
-- change a run in progress. Every transition is one conditional UPDATE
-- (or an INSERT a primary key decides), so with replicas each step runs
-- once.
CREATE TABLE runbook_runs (
    id              TEXT PRIMARY KEY,
    runbook         TEXT NOT NULL,
    snapshot        TEXT NOT NULL,
    params          TEXT NOT NULL,
    requested_by    TEXT NOT NULL DEFAULT '',
    conversation_id BIGINT NOT NULL REFERENCES conversations (id),
    status          TEXT NOT NULL CHECK (status IN ('running', 'succeeded', 'failed', 'denied', 'expired', 'stopped', 'halted')),
    failed_step     TEXT NOT NULL DEFAULT '',
    message_ref     TEXT NOT NULL DEFAULT '',
    -- The model's call that started the run (runbook__<name>), if any.
    parent_batch    TEXT NOT NULL DEFAULT '',
    parent_key      TEXT NOT NULL DEFAULT '',
    stopped_by      TEXT NOT NULL DEFAULT '',
    -- The step being run ("phase/step/attempt"), set by the one UPDATE that
    -- starts it and cleared when it ends: one step of a run at a time.
    active_step     TEXT NOT NULL DEFAULT '',
    due_at          TIMESTAMPTZ, -- NULL: due now; else the next attempt waits until then
    created_at      TIMESTAMPTZ NOT NULL,
    updated_at      TIMESTAMPTZ NOT NULL,
    finished_at     TIMESTAMPTZ
);

CREATE INDEX runbook_runs_status ON runbook_runs (status, due_at);
CREATE INDEX runbook_runs_conversation ON runbook_runs (conversation_id, created_at);
CREATE INDEX runbook_runs_parent ON runbook_runs (parent_batch, parent_key) WHERE parent_batch <> '';

CREATE TABLE runbook_steps (
    run_id      TEXT NOT NULL REFERENCES runbook_runs (id),
    phase       TEXT NOT NULL CHECK (phase IN ('main', 'on_failure')),
    step_id     TEXT NOT NULL,
    attempt     INTEGER NOT NULL CHECK (attempt > 0),
    seq         INTEGER NOT NULL,
    tool        TEXT NOT NULL DEFAULT '',
    status      TEXT NOT NULL CHECK (status IN ('started', 'waiting', 'succeeded', 'failed', 'denied', 'expired', 'skipped', 'unknown')),
    batch_id    TEXT NOT NULL DEFAULT '',
    result      TEXT NOT NULL DEFAULT '',
    marked_by   TEXT NOT NULL DEFAULT '',
    created_at  TIMESTAMPTZ NOT NULL,
    finished_at TIMESTAMPTZ,
    PRIMARY KEY (run_id, phase, step_id, attempt),
    UNIQUE (run_id, seq)
);

CREATE UNIQUE INDEX runbook_steps_batch ON runbook_steps (batch_id) WHERE batch_id <> '';
