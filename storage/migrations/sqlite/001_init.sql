-- Airlock schema, SQLite dialect. Times are UTC RFC 3339 text with a fixed
-- nine-digit fraction ("2006-01-02T15:04:05.000000000Z"), so they compare
-- correctly as text.

CREATE TABLE conversations (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    platform   TEXT NOT NULL,
    channel    TEXT NOT NULL,
    thread     TEXT NOT NULL DEFAULT '',
    created_at TEXT NOT NULL,
    UNIQUE (platform, channel, thread)
);

CREATE TABLE messages (
    conversation_id INTEGER NOT NULL REFERENCES conversations (id),
    seq             INTEGER NOT NULL CHECK (seq > 0),
    role            TEXT NOT NULL,
    body            TEXT NOT NULL,
    created_at      TEXT NOT NULL,
    PRIMARY KEY (conversation_id, seq)
);

CREATE TABLE batches (
    id              TEXT PRIMARY KEY,
    conversation_id INTEGER NOT NULL REFERENCES conversations (id),
    message_seq     INTEGER NOT NULL,
    requested_by    TEXT NOT NULL DEFAULT '',
    status          TEXT NOT NULL CHECK (status IN ('pending', 'decided', 'running', 'done')),
    card_ref        TEXT NOT NULL DEFAULT '',
    claimed_by      TEXT NOT NULL DEFAULT '',
    created_at      TEXT NOT NULL,
    expires_at      TEXT,
    updated_at      TEXT NOT NULL,
    FOREIGN KEY (conversation_id, message_seq) REFERENCES messages (conversation_id, seq)
);

CREATE INDEX batches_conversation_status ON batches (conversation_id, status, created_at);
CREATE INDEX batches_status ON batches (status, created_at);

CREATE TABLE calls (
    batch_id        TEXT NOT NULL REFERENCES batches (id),
    key             TEXT NOT NULL,
    position        INTEGER NOT NULL,
    call_id         TEXT NOT NULL DEFAULT '',
    tool            TEXT NOT NULL,
    args            TEXT NOT NULL, -- the model's exact bytes
    summary         TEXT NOT NULL DEFAULT '',
    flagged         INTEGER NOT NULL DEFAULT 0 CHECK (flagged IN (0, 1)),
    decision        TEXT NOT NULL CHECK (decision IN ('pending', 'allowed', 'allowed_by_policy', 'denied', 'expired', 'invalid')),
    decided_by      TEXT NOT NULL DEFAULT '',
    decided_at      TEXT,
    deny_message    TEXT NOT NULL DEFAULT '',
    run_status      TEXT NOT NULL CHECK (run_status IN ('not_started', 'running', 'succeeded', 'failed', 'unknown')),
    result          TEXT NOT NULL DEFAULT '',
    idempotency_key TEXT NOT NULL,
    expires_at      TEXT, -- NULL: never expires
    PRIMARY KEY (batch_id, key),
    UNIQUE (batch_id, position)
);

CREATE INDEX calls_pending ON calls (expires_at) WHERE decision = 'pending';
CREATE INDEX calls_running ON calls (batch_id) WHERE run_status = 'running';

-- Append-only: nothing updates or deletes an audit row.
CREATE TABLE audit (
    id              INTEGER PRIMARY KEY AUTOINCREMENT,
    at              TEXT NOT NULL,
    kind            TEXT NOT NULL,
    conversation_id INTEGER NOT NULL DEFAULT 0,
    batch_id        TEXT NOT NULL DEFAULT '',
    call_key        TEXT NOT NULL DEFAULT '',
    tool            TEXT NOT NULL DEFAULT '',
    actor           TEXT NOT NULL DEFAULT '',
    detail          TEXT NOT NULL DEFAULT ''
);

CREATE INDEX audit_conversation ON audit (conversation_id, id);

CREATE TRIGGER audit_no_update BEFORE UPDATE ON audit
BEGIN
    SELECT RAISE(ABORT, 'audit is append-only');
END;

CREATE TRIGGER audit_no_delete BEFORE DELETE ON audit
BEGIN
    SELECT RAISE(ABORT, 'audit is append-only');
END;
