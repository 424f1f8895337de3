-- Home views (Slack's Home tab) kept current by card sync.
--
-- A person who opened their home view has a row of homes (its id
-- '<platform>:<user id>', its card_version counting the changes it shows)
-- and one card-sync message of kind 'home' (home_id set, channel '~home',
-- ref its id too), rendered again after each change of a request it
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
-- cards_ref (batch_id, run_id, grant_id, ref) stays as it is: a home's
-- ref is its id, so it is unique there too, and a replica of the release
-- before, whose ON CONFLICT names that index, goes on working beside
-- this one.
CREATE INDEX cards_home ON cards (home_id) WHERE home_id <> '';
