-- Direct-message conversations; what the policy said of each call (reasons,
-- approvals needed, who may decide, whether a grant may cover it), rule
-- refusals and grants; one vote per approver of a call; grants; and the
-- per-user turn log behind rate limits (shared by replicas).
ALTER TABLE conversations ADD COLUMN dm BOOLEAN NOT NULL DEFAULT FALSE;

ALTER TABLE calls DROP CONSTRAINT calls_decision_check;
ALTER TABLE calls ADD CONSTRAINT calls_decision_check CHECK (decision IN
    ('pending', 'allowed', 'allowed_by_policy', 'allowed_by_grant', 'denied', 'denied_by_rule', 'expired', 'invalid'));

ALTER TABLE calls
    ADD COLUMN reasons     TEXT NOT NULL DEFAULT '[]', -- JSON array of confirm.Reason
    ADD COLUMN approvals   INTEGER NOT NULL DEFAULT 0 CHECK (approvals >= 0), -- distinct allows needed; at least 1 when flagged
    ADD COLUMN restrict_to TEXT NOT NULL DEFAULT '[]', -- JSON array of confirm.Approvers; a decider must be in every set
    ADD COLUMN grantable   BOOLEAN NOT NULL DEFAULT FALSE,
    ADD COLUMN deny_reason TEXT NOT NULL DEFAULT '', -- a person's own words with a deny
    ADD COLUMN grant_id    TEXT NOT NULL DEFAULT ''; -- the grant that allowed it (allowed_by_grant)

UPDATE calls SET approvals = 1 WHERE flagged;

CREATE INDEX calls_unknown ON calls (batch_id, position) WHERE run_status = 'unknown';

-- One row per person who allowed a call; the call is allowed at its
-- approvals-th distinct vote.
CREATE TABLE votes (
    id       BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    batch_id TEXT NOT NULL,
    key      TEXT NOT NULL,
    approver TEXT NOT NULL,
    at       TIMESTAMPTZ NOT NULL,
    UNIQUE (batch_id, key, approver),
    FOREIGN KEY (batch_id, key) REFERENCES calls (batch_id, key)
);

-- A grant lets later calls of one tool in one conversation run without a
-- card until it expires or is revoked.
CREATE TABLE grants (
    id              TEXT PRIMARY KEY,
    conversation_id BIGINT NOT NULL REFERENCES conversations (id),
    tool            TEXT NOT NULL,
    created_by      TEXT NOT NULL DEFAULT '',
    created_at      TIMESTAMPTZ NOT NULL,
    expires_at      TIMESTAMPTZ NOT NULL,
    revoked_by      TEXT NOT NULL DEFAULT '',
    revoked_at      TIMESTAMPTZ, -- NULL: not revoked
    batch_id        TEXT NOT NULL DEFAULT '', -- the call whose allow created it
    call_key        TEXT NOT NULL DEFAULT '',
    notice_ref      TEXT NOT NULL DEFAULT ''
);

CREATE INDEX grants_conversation_tool ON grants (conversation_id, tool, created_at);

-- One row per turn a user started; rows older than the rate window are
-- pruned as turns are counted.
CREATE TABLE turn_log (
    id       BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    platform TEXT NOT NULL,
    user_id  TEXT NOT NULL,
    at       TIMESTAMPTZ NOT NULL
);

CREATE INDEX turn_log_user ON turn_log (platform, user_id, at);
