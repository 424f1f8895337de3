-- Direct-message conversations, why a call was flagged, and the per-user
-- turn log behind rate limits (shared by replicas).
ALTER TABLE conversations ADD COLUMN dm BOOLEAN NOT NULL DEFAULT FALSE;

ALTER TABLE calls ADD COLUMN flag_reason TEXT NOT NULL DEFAULT '';

CREATE INDEX calls_unknown ON calls (batch_id, position) WHERE run_status = 'unknown';

-- One row per turn a user started; rows older than the rate window are
-- pruned as turns are counted.
CREATE TABLE turn_log (
    id       BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    platform TEXT NOT NULL,
    user_id  TEXT NOT NULL,
    at       TIMESTAMPTZ NOT NULL
);

CREATE INDEX turn_log_user ON turn_log (platform, user_id, at);
