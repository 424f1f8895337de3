-- Cards converge (card-sync). A batch's card_version counts the changes of
-- its state its card messages show; each message keeps the version it
-- should show (desired, the batch's, copied by every change) and the one
-- it last showed on the platform (rendered). A message behind is
-- rendered again by the card-sync job, from storage, by one replica at a
-- time (claimed_by until claimed_until), not before retry_at (a platform's
-- rate limit, a backoff after failures); one the platform no longer has is
-- gone (never retried).
ALTER TABLE batches ADD COLUMN card_version INTEGER NOT NULL DEFAULT 0;

ALTER TABLE cards ADD COLUMN desired INTEGER NOT NULL DEFAULT 0;
ALTER TABLE cards ADD COLUMN rendered INTEGER NOT NULL DEFAULT 0;
ALTER TABLE cards ADD COLUMN changed_at TEXT; -- the oldest change not yet rendered; NULL: in sync
ALTER TABLE cards ADD COLUMN rendered_at TEXT;
ALTER TABLE cards ADD COLUMN retry_at TEXT;
ALTER TABLE cards ADD COLUMN failures INTEGER NOT NULL DEFAULT 0;
ALTER TABLE cards ADD COLUMN gone_at TEXT;
ALTER TABLE cards ADD COLUMN claimed_by TEXT NOT NULL DEFAULT '';
ALTER TABLE cards ADD COLUMN claimed_until TEXT;

-- Cards posted in their own thread were remembered only as the batch's
-- card_ref: they are listed now, so every message is synced alike.
INSERT INTO cards (batch_id, kind, platform, channel, thread, ref, created_at)
    SELECT b.id, 'main', c.platform, c.channel, c.thread, b.card_ref, b.created_at
    FROM batches b JOIN conversations c ON c.id = b.conversation_id
    WHERE b.card_ref <> '' AND NOT EXISTS (SELECT 1 FROM cards x WHERE x.batch_id = b.id AND x.kind = 'main')
    ORDER BY b.created_at, b.id
    ON CONFLICT (batch_id, ref) DO NOTHING;

-- The messages behind, oldest change first.
CREATE INDEX cards_behind ON cards (changed_at, id) WHERE rendered < desired AND gone_at IS NULL;
