-- Callbacks agents outside Airlock asked for (the gateway's callback_url):
-- once its batch is decided, each is queued once in the outbox (queued_at
-- set in the same transaction as the outbox row), which sends it to url.
CREATE TABLE callbacks (
    batch_id        TEXT NOT NULL,
    url             TEXT NOT NULL,
    client          TEXT NOT NULL,
    conversation_id INTEGER NOT NULL,
    created_at      TEXT NOT NULL,
    queued_at       TEXT, -- NULL: not queued yet
    PRIMARY KEY (batch_id, url)
);
CREATE INDEX callbacks_unqueued ON callbacks (created_at) WHERE queued_at IS NULL;

-- A delivery's own URL: a callback's ('' for a webhook's, whose URL is in
-- the config).
ALTER TABLE outbox ADD COLUMN url TEXT NOT NULL DEFAULT '';
