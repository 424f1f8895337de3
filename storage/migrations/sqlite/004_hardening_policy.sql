-- Direct-message conversations; what the policy said of each call (reasons,
-- approvals needed, who may decide, whether a grant may cover it), rule
-- refusals and grants; one vote per approver of a call; grants; and the
-- per-user turn log behind rate limits.
ALTER TABLE conversations ADD COLUMN dm INTEGER NOT NULL DEFAULT 0 CHECK (dm IN (0, 1));

-- SQLite cannot change a CHECK constraint: calls is rebuilt with the new
-- decisions and columns. No table references calls yet.
CREATE TABLE calls_new (
    batch_id        TEXT NOT NULL REFERENCES batches (id),
    key             TEXT NOT NULL,
    position        INTEGER NOT NULL,
    call_id         TEXT NOT NULL DEFAULT '',
    tool            TEXT NOT NULL,
    args            TEXT NOT NULL, -- the model's exact bytes
    summary         TEXT NOT NULL DEFAULT '',
    flagged         INTEGER NOT NULL DEFAULT 0 CHECK (flagged IN (0, 1)),
    decision        TEXT NOT NULL CHECK (decision IN
        ('pending', 'allowed', 'allowed_by_policy', 'allowed_by_grant', 'denied', 'denied_by_rule', 'expired', 'invalid')),
    decided_by      TEXT NOT NULL DEFAULT '',
    decided_at      TEXT,
    deny_message    TEXT NOT NULL DEFAULT '',
    run_status      TEXT NOT NULL CHECK (run_status IN ('not_started', 'running', 'succeeded', 'failed', 'unknown')),
    result          TEXT NOT NULL DEFAULT '',
    idempotency_key TEXT NOT NULL,
    expires_at      TEXT, -- NULL: never expires
    reasons         TEXT NOT NULL DEFAULT '[]', -- JSON array of confirm.Reason
    approvals       INTEGER NOT NULL DEFAULT 0 CHECK (approvals >= 0), -- distinct allows needed; at least 1 when flagged
    restrict_to     TEXT NOT NULL DEFAULT '[]', -- JSON array of confirm.Approvers; a decider must be in every set
    grantable       INTEGER NOT NULL DEFAULT 0 CHECK (grantable IN (0, 1)),
    deny_reason     TEXT NOT NULL DEFAULT '', -- a person's own words with a deny
    grant_id        TEXT NOT NULL DEFAULT '', -- the grant that allowed it (allowed_by_grant)
    PRIMARY KEY (batch_id, key),
    UNIQUE (batch_id, position)
);

INSERT INTO calls_new (batch_id, key, position, call_id, tool, args, summary, flagged, decision, decided_by, decided_at,
        deny_message, run_status, result, idempotency_key, expires_at, approvals)
    SELECT batch_id, key, position, call_id, tool, args, summary, flagged, decision, decided_by, decided_at,
        deny_message, run_status, result, idempotency_key, expires_at, flagged
    FROM calls;

DROP TABLE calls;
ALTER TABLE calls_new RENAME TO calls;

CREATE INDEX calls_pending ON calls (expires_at) WHERE decision = 'pending';
CREATE INDEX calls_running ON calls (batch_id) WHERE run_status = 'running';
CREATE INDEX calls_unknown ON calls (batch_id, position) WHERE run_status = 'unknown';

-- One row per person who allowed a call; the call is allowed at its
-- approvals-th distinct vote.
CREATE TABLE votes (
    id       INTEGER PRIMARY KEY AUTOINCREMENT,
    batch_id TEXT NOT NULL,
    key      TEXT NOT NULL,
    approver TEXT NOT NULL,
    at       TEXT NOT NULL,
    UNIQUE (batch_id, key, approver),
    FOREIGN KEY (batch_id, key) REFERENCES calls (batch_id, key)
);

-- A grant lets later calls of one tool in one conversation run without a
-- card until it expires or is revoked.
CREATE TABLE grants (
    id              TEXT PRIMARY KEY,
    conversation_id INTEGER NOT NULL REFERENCES conversations (id),
    tool            TEXT NOT NULL,
    created_by      TEXT NOT NULL DEFAULT '',
    created_at      TEXT NOT NULL,
    expires_at      TEXT NOT NULL,
    revoked_by      TEXT NOT NULL DEFAULT '',
    revoked_at      TEXT, -- NULL: not revoked
    batch_id        TEXT NOT NULL DEFAULT '', -- the call whose allow created it
    call_key        TEXT NOT NULL DEFAULT '',
    notice_ref      TEXT NOT NULL DEFAULT ''
);

CREATE INDEX grants_conversation_tool ON grants (conversation_id, tool, created_at);

-- One row per turn a user started; rows older than the rate window are
-- pruned as turns are counted.
CREATE TABLE turn_log (
    id       INTEGER PRIMARY KEY AUTOINCREMENT,
    platform TEXT NOT NULL,
    user_id  TEXT NOT NULL,
    at       TEXT NOT NULL
);

CREATE INDEX turn_log_user ON turn_log (platform, user_id, at);
