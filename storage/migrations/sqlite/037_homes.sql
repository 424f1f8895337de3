-- Home views (Slack's Home tab) kept current by card sync.
--
-- A person who opened their home view has a row of homes (its id
-- '<platform>:<user id>', its card_version counting the changes it shows)
-- and one card-sync message of kind 'home' (home_id set, channel '~home',
-- ref its id too), rendered again after each change of a request it
-- lists. cards is rebuilt for its one-subject check.
CREATE TABLE homes (
    id           TEXT PRIMARY KEY,
    platform     TEXT NOT NULL,
    user_id      TEXT NOT NULL,
    card_version INTEGER NOT NULL DEFAULT 0,
    opened_at    TEXT NOT NULL
);
CREATE INDEX homes_platform ON homes (platform, user_id);

CREATE TABLE cards_new (
    id            INTEGER PRIMARY KEY AUTOINCREMENT, -- posting order
    batch_id      TEXT NOT NULL DEFAULT '', -- main, dm, pointer: the batch
    run_id        TEXT NOT NULL DEFAULT '', -- run: the runbook run
    grant_id      TEXT NOT NULL DEFAULT '', -- grant: the grant
    home_id       TEXT NOT NULL DEFAULT '', -- home: the home view
    kind          TEXT NOT NULL, -- main, dm, pointer, run, grant or home
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
    CHECK ((batch_id <> '') + (run_id <> '') + (grant_id <> '') + (home_id <> '') = 1)
);

INSERT INTO cards_new (id, batch_id, run_id, grant_id, kind, platform, channel, thread, ref, created_at, desired, rendered,
        changed_at, rendered_at, retry_at, failures, gone_at, claimed_by, claimed_until)
    SELECT id, batch_id, run_id, grant_id, kind, platform, channel, thread, ref, created_at, desired, rendered,
        changed_at, rendered_at, retry_at, failures, gone_at, claimed_by, claimed_until
    FROM cards ORDER BY id;

DROP TABLE cards;
ALTER TABLE cards_new RENAME TO cards;

-- cards_ref as before: a home's ref is its id, so unique there too.
CREATE UNIQUE INDEX cards_ref ON cards (batch_id, run_id, grant_id, ref);
CREATE INDEX cards_batch ON cards (batch_id, created_at, id);
CREATE INDEX cards_run ON cards (run_id) WHERE run_id <> '';
CREATE INDEX cards_grant ON cards (grant_id) WHERE grant_id <> '';
CREATE INDEX cards_home ON cards (home_id) WHERE home_id <> '';
-- The messages behind, oldest change first.
CREATE INDEX cards_behind ON cards (changed_at, id) WHERE rendered < desired AND gone_at IS NULL;
