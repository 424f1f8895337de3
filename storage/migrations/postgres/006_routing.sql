-- Where cards go, escalation, extend and allow-with-edit.

-- Every message Airlock posted for a batch: the card with buttons (in the
-- thread or an approvals channel), its copies in approvers' DMs, and the
-- thread's pointer to a card posted elsewhere. A click counts only on a
-- card message of the button's batch.
CREATE TABLE cards (
    id         BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY, -- posting order
    batch_id   TEXT NOT NULL REFERENCES batches (id),
    kind       TEXT NOT NULL, -- main, dm or pointer
    platform   TEXT NOT NULL,
    channel    TEXT NOT NULL,
    thread     TEXT NOT NULL DEFAULT '', -- '': a top-level message
    ref        TEXT NOT NULL, -- the platform's reference of the message(s)
    created_at TIMESTAMPTZ NOT NULL,
    UNIQUE (batch_id, ref)
);

CREATE INDEX cards_batch ON cards (batch_id, created_at, id);

-- Cards posted before this upgrade were remembered as the batch's card_ref,
-- always in the conversation's thread: they keep accepting clicks.
INSERT INTO cards (batch_id, kind, platform, channel, thread, ref, created_at)
    SELECT b.id, 'main', c.platform, c.channel, c.thread, b.card_ref, b.created_at
    FROM batches b JOIN conversations c ON c.id = b.conversation_id
    WHERE b.card_ref <> ''
    ORDER BY b.created_at, b.id;

-- The card's one Extend: who pushed the deadline (expires_at is then the
-- new one), and when; '' and NULL: not extended.
ALTER TABLE batches
    ADD COLUMN extended_by TEXT NOT NULL DEFAULT '',
    ADD COLUMN extended_at TIMESTAMPTZ;

-- One row per escalation step that fired for a batch; the primary key makes
-- a step fire once across replicas.
CREATE TABLE batch_escalations (
    batch_id TEXT NOT NULL REFERENCES batches (id),
    step     INTEGER NOT NULL CHECK (step >= 0),
    fired_at TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (batch_id, step)
);

-- An approver's arguments beside the model's (args is never changed; not
-- jsonb, which would rewrite them); '' and NULL: not edited.
ALTER TABLE calls
    ADD COLUMN edited_args TEXT NOT NULL DEFAULT '',
    ADD COLUMN edited_by   TEXT NOT NULL DEFAULT '',
    ADD COLUMN edited_at   TIMESTAMPTZ;
