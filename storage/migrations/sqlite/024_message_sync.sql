-- Card sync for every message Airlock edits, and copies posted once.
--
-- A runbook run's message and a grant's notice are card-sync messages
-- like a batch's card: a row of cards whose kind is 'run' (run_id set)
-- or 'grant' (grant_id set), with the same desired and rendered versions,
-- claims, waits and gone mark. Their subjects count their changes as
-- batches do (card_version). cards is rebuilt because batch_id must be ''
-- for those rows (its foreign key to batches goes; batches are never
-- deleted, and a card message is only ever added for a stored batch).
CREATE TABLE cards_new (
    id            INTEGER PRIMARY KEY AUTOINCREMENT, -- posting order
    batch_id      TEXT NOT NULL DEFAULT '', -- main, dm, pointer: the batch
    run_id        TEXT NOT NULL DEFAULT '', -- run: the runbook run
    grant_id      TEXT NOT NULL DEFAULT '', -- grant: the grant
    kind          TEXT NOT NULL, -- main, dm, pointer, run or grant
    platform      TEXT NOT NULL,
    channel       TEXT NOT NULL,
    thread        TEXT NOT NULL DEFAULT '', -- '': a top-level message
    ref           TEXT NOT NULL, -- the platform's reference of the message(s)
    created_at    TEXT NOT NULL,
    desired       INTEGER NOT NULL DEFAULT 0,
    rendered      INTEGER NOT NULL DEFAULT 0,
    changed_at    TEXT, -- the oldest change not yet rendered; NULL: in sync
    rendered_at   TEXT,
    retry_at      TEXT,
    failures      INTEGER NOT NULL DEFAULT 0,
    gone_at       TEXT,
    claimed_by    TEXT NOT NULL DEFAULT '',
    claimed_until TEXT,
    CHECK ((batch_id <> '') + (run_id <> '') + (grant_id <> '') = 1)
);

INSERT INTO cards_new (id, batch_id, kind, platform, channel, thread, ref, created_at, desired, rendered,
        changed_at, rendered_at, retry_at, failures, gone_at, claimed_by, claimed_until)
    SELECT id, batch_id, kind, platform, channel, thread, ref, created_at, desired, rendered,
        changed_at, rendered_at, retry_at, failures, gone_at, claimed_by, claimed_until
    FROM cards ORDER BY id;

DROP TABLE cards;
ALTER TABLE cards_new RENAME TO cards;

CREATE UNIQUE INDEX cards_ref ON cards (batch_id, run_id, grant_id, ref);
CREATE INDEX cards_batch ON cards (batch_id, created_at, id);
CREATE INDEX cards_run ON cards (run_id) WHERE run_id <> '';
CREATE INDEX cards_grant ON cards (grant_id) WHERE grant_id <> '';
-- The messages behind, oldest change first.
CREATE INDEX cards_behind ON cards (changed_at, id) WHERE rendered < desired AND gone_at IS NULL;

ALTER TABLE runbook_runs ADD COLUMN card_version INTEGER NOT NULL DEFAULT 0;
ALTER TABLE grants ADD COLUMN card_version INTEGER NOT NULL DEFAULT 0;

-- A card recorded whose copies (the thread's pointer, approvers' DM
-- copies) are not all posted yet: set with the card's reference when it
-- will have copies, cleared once they were posted. A process killed in
-- between leaves it set, and recovery posts the missing copies, adopting
-- those posted but not recorded.
ALTER TABLE batches ADD COLUMN copies_pending INTEGER NOT NULL DEFAULT 0;
