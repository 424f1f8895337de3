-- The inbox: every interaction and mention a platform delivered, recorded
-- as received before it is acknowledged, so a process killed between the
-- acknowledgement and the work loses nothing. The process that received
-- it works it and marks it done (its payload dropped then); one left
-- unfinished is claimed by the inbox job of one replica once the
-- receiver's claim lapses (claimed_by until claimed_until, renewed while
-- it works) and worked again through the same path. (platform, key) is the
-- platform's id of the delivery: a retried delivery is recorded once.
-- conversation_id and message_seq name the message a turn stored for it,
-- so a turn worked again never asks the model twice.
CREATE TABLE inbox (
    id              BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    platform        TEXT NOT NULL,
    key             TEXT NOT NULL,
    kind            TEXT NOT NULL,
    payload         TEXT NOT NULL,
    received_at     TIMESTAMPTZ NOT NULL,
    done_at         TIMESTAMPTZ, -- NULL: not finished
    attempts        INTEGER NOT NULL DEFAULT 0, -- claims by the inbox job
    claimed_by      TEXT NOT NULL DEFAULT '',
    claimed_until   TIMESTAMPTZ,
    conversation_id BIGINT NOT NULL DEFAULT 0,
    message_seq     INTEGER NOT NULL DEFAULT 0,
    UNIQUE (platform, key)
);

-- The deliveries not finished, by holder: renewed and claimed from here.
CREATE INDEX inbox_open ON inbox (claimed_by, claimed_until) WHERE done_at IS NULL;
