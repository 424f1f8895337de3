-- Fewer pages written per decision (BENCHMARKS.md, sixth round).
--
-- calls_running only duplicated the primary key: every query that reads
-- running calls names its batch. It cost a page written when a run
-- started and another when it ended.
DROP INDEX calls_running;

-- audit without AUTOINCREMENT: an append-only table never reuses an id
-- anyway (its greatest row is never deleted), and AUTOINCREMENT wrote the
-- sqlite_sequence page in every transaction that audits. The ids are kept.
CREATE TABLE audit_new (
    id              INTEGER PRIMARY KEY,
    at              TEXT NOT NULL,
    kind            TEXT NOT NULL,
    conversation_id INTEGER NOT NULL DEFAULT 0,
    batch_id        TEXT NOT NULL DEFAULT '',
    call_key        TEXT NOT NULL DEFAULT '',
    tool            TEXT NOT NULL DEFAULT '',
    actor           TEXT NOT NULL DEFAULT '',
    detail          TEXT NOT NULL DEFAULT ''
);
INSERT INTO audit_new (id, at, kind, conversation_id, batch_id, call_key, tool, actor, detail)
    SELECT id, at, kind, conversation_id, batch_id, call_key, tool, actor, detail FROM audit;
DROP TABLE audit;
ALTER TABLE audit_new RENAME TO audit;

CREATE INDEX audit_conversation ON audit (conversation_id, id);

CREATE TRIGGER audit_no_update BEFORE UPDATE ON audit
BEGIN
    SELECT RAISE(ABORT, 'audit is append-only');
END;

CREATE TRIGGER audit_no_delete BEFORE DELETE ON audit
BEGIN
    SELECT RAISE(ABORT, 'audit is append-only');
END;
