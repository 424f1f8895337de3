-- The webhook outbox: one row per event per webhook whose filter takes it,
-- written in the transaction of the event's audit row; the deliverer sends
-- each at least once, in order per conversation per webhook.
CREATE TABLE outbox (
    id               BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY, -- delivery order
    event_id         TEXT NOT NULL, -- the event's id, shared by its deliveries to every webhook
    target           TEXT NOT NULL, -- the webhook's id, derived from its URL
    type             TEXT NOT NULL,
    conversation_id  BIGINT NOT NULL DEFAULT 0,
    audit_id         BIGINT NOT NULL, -- the audit row the event was written with
    body             TEXT NOT NULL, -- the exact JSON sent, stable across attempts; not jsonb, which would rewrite it
    status           TEXT NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'delivered', 'dead')),
    attempts         INTEGER NOT NULL DEFAULT 0 CHECK (attempts >= 0),
    created_at       TIMESTAMPTZ NOT NULL,
    next_attempt_at  TIMESTAMPTZ NOT NULL,
    first_attempt_at TIMESTAMPTZ, -- NULL: never attempted; retries stop 24 h after it
    last_attempt_at  TIMESTAMPTZ,
    last_error       TEXT NOT NULL DEFAULT '',
    claimed_by       TEXT NOT NULL DEFAULT '', -- the replica sending it now
    claim_expires_at TIMESTAMPTZ,
    delivered_at     TIMESTAMPTZ,
    dead_at          TIMESTAMPTZ,
    UNIQUE (event_id, target)
);

-- Each webhook's queue per conversation: its head is the oldest row not delivered.
CREATE INDEX outbox_queue ON outbox (target, conversation_id, id) WHERE status <> 'delivered';
CREATE INDEX outbox_delivered ON outbox (delivered_at) WHERE status = 'delivered';
