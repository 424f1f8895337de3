-- Direct-message conversations, why a call was flagged, and the per-user
-- turn log behind rate limits.
ALTER TABLE conversations ADD COLUMN dm INTEGER NOT NULL DEFAULT 0 CHECK (dm IN (0, 1));

ALTER TABLE calls ADD COLUMN flag_reason TEXT NOT NULL DEFAULT '';

CREATE INDEX calls_unknown ON calls (batch_id, position) WHERE run_status = 'unknown';

-- One row per turn a user started; rows older than the rate window are
-- pruned as turns are counted.
CREATE TABLE turn_log (
    id       INTEGER PRIMARY KEY AUTOINCREMENT,
    platform TEXT NOT NULL,
    user_id  TEXT NOT NULL,
    at       TEXT NOT NULL
);

CREATE INDEX turn_log_user ON turn_log (platform, user_id, at);
