-- The webhook outbox: one row per event per webhook whose filter takes it,
-- written in the transaction of the event's audit row; the deliverer sends
-- each at least once, in order per conversation per webhook.
CREATE TABLE outbox (
    id               INTEGER PRIMARY KEY AUTOINCREMENT, -- delivery order
    event_id         TEXT NOT NULL, -- the event's id, shared by its deliveries to every webhook
    target           TEXT NOT NULL, -- the webhook's id, derived from its URL
    type             TEXT NOT NULL,
    conversation_id  INTEGER NOT NULL DEFAULT 0,
    audit_id         INTEGER NOT NULL, -- the audit row the event was written with
    body             TEXT NOT NULL, -- the exact JSON sent, stable across attempts
    status           TEXT NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'delivered', 'dead')),
    attempts         INTEGER NOT NULL DEFAULT 0 CHECK (attempts >= 0),
    created_at       TEXT NOT NULL,
    next_attempt_at  TEXT NOT NULL,
    first_attempt_at TEXT, -- NULL: never attempted; retries stop 24 h after it
    last_attempt_at  TEXT,
    last_error       TEXT NOT NULL DEFAULT '',
    claimed_by       TEXT NOT NULL DEFAULT '', -- the replica sending it now
    claim_expires_at TEXT,
    delivered_at     TEXT,
    dead_at          TEXT,
    UNIQUE (event_id, target)
);

-- Each webhook's queue per conversation: its head is the oldest row not delivered.
CREATE INDEX outbox_queue ON outbox (target, conversation_id, id) WHERE status <> 'delivered';
CREATE INDEX outbox_delivered ON outbox (delivered_at) WHERE status = 'delivered';
