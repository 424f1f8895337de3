-- Card sync for every message Airlock edits, and copies posted once.
--
-- A runbook run's message and a grant's notice are card-sync messages
-- like a batch's card: a row of cards whose kind is 'run' (run_id set)
-- or 'grant' (grant_id set), with the same desired and rendered versions,
-- claims, waits and gone mark. Their subjects count their changes as
-- batches do (card_version). batch_id is '' for those rows, so its
-- foreign key to batches goes (batches are never deleted, and a card
-- message is only ever added for a stored batch).
ALTER TABLE cards DROP CONSTRAINT IF EXISTS cards_batch_id_fkey;
ALTER TABLE cards DROP CONSTRAINT IF EXISTS cards_batch_id_ref_key;
ALTER TABLE cards ALTER COLUMN batch_id SET DEFAULT '';
ALTER TABLE cards ADD COLUMN run_id TEXT NOT NULL DEFAULT '';
ALTER TABLE cards ADD COLUMN grant_id TEXT NOT NULL DEFAULT '';
ALTER TABLE cards ADD CONSTRAINT cards_one_subject
    CHECK ((batch_id <> '')::int + (run_id <> '')::int + (grant_id <> '')::int = 1);

CREATE UNIQUE INDEX cards_ref ON cards (batch_id, run_id, grant_id, ref);
CREATE INDEX cards_run ON cards (run_id) WHERE run_id <> '';
CREATE INDEX cards_grant ON cards (grant_id) WHERE grant_id <> '';

ALTER TABLE runbook_runs ADD COLUMN card_version BIGINT NOT NULL DEFAULT 0;
ALTER TABLE grants ADD COLUMN card_version BIGINT NOT NULL DEFAULT 0;

-- A card recorded whose copies (the thread's pointer, approvers' DM
-- copies) are not all posted yet: set with the card's reference when it
-- will have copies, cleared once they were posted. A process killed in
-- between leaves it set, and recovery posts the missing copies, adopting
-- those posted but not recorded.
ALTER TABLE batches ADD COLUMN copies_pending BOOLEAN NOT NULL DEFAULT FALSE;
