-- Home views (Slack's Home tab) kept current by card sync.
--
-- A person who opened their home view has a row of homes (its id
-- '<platform>:<user id>', its card_version counting the changes it shows)
-- and one card-sync message of kind 'home' (home_id set, channel '~home',
-- ref the user id), rendered again after each change of a request it
-- lists.
CREATE TABLE homes (
    id           TEXT PRIMARY KEY,
    platform     TEXT NOT NULL,
    user_id      TEXT NOT NULL,
    card_version BIGINT NOT NULL DEFAULT 0,
    opened_at    TIMESTAMPTZ NOT NULL
);
CREATE INDEX homes_platform ON homes (platform, user_id);

ALTER TABLE cards ADD COLUMN home_id TEXT NOT NULL DEFAULT '';
ALTER TABLE cards DROP CONSTRAINT cards_one_subject;
ALTER TABLE cards ADD CONSTRAINT cards_one_subject
    CHECK ((batch_id <> '')::int + (run_id <> '')::int + (grant_id <> '')::int + (home_id <> '')::int = 1);
DROP INDEX cards_ref;
CREATE UNIQUE INDEX cards_ref ON cards (batch_id, run_id, grant_id, home_id, ref);
CREATE INDEX cards_home ON cards (home_id) WHERE home_id <> '';
