-- The audit as a hash chain (issue 28; README "Audit" gives the encoding).
-- Each row carries the hash of the row before it and its own hash;
-- audit_head holds the last chained row, and every audit insert locks and
-- updates it in its own transaction, so replicas write one chain: one
-- statement takes the next id and hashes the row there (storage.auditInsertPostgres),
-- prev_hash keeping the hash it chained to. Rows written before this
-- migration are chained by Airlock right after migrating
-- (storage.chainAudit, in id order).
ALTER TABLE audit ADD COLUMN prev_hash TEXT NOT NULL DEFAULT '';
ALTER TABLE audit ADD COLUMN hash TEXT NOT NULL DEFAULT '';

CREATE TABLE audit_head (
    one       INTEGER PRIMARY KEY CHECK (one = 1),
    last_id   BIGINT NOT NULL,
    last_hash TEXT NOT NULL,
    prev_hash TEXT NOT NULL DEFAULT ''
);
INSERT INTO audit_head (one, last_id, last_hash)
    VALUES (1, 0, '0000000000000000000000000000000000000000000000000000000000000000');

-- Still append-only: the one update allowed sets the hashes of a row not
-- yet chained, and nothing else.
DROP TRIGGER audit_append_only ON audit;
CREATE TRIGGER audit_append_only BEFORE DELETE OR TRUNCATE ON audit
    FOR EACH STATEMENT EXECUTE FUNCTION audit_append_only();
CREATE TRIGGER audit_no_update BEFORE UPDATE ON audit FOR EACH ROW
    WHEN (OLD.hash <> '' OR NEW.hash = ''
        OR (NEW.id, NEW.at, NEW.kind, NEW.conversation_id, NEW.batch_id, NEW.call_key, NEW.tool, NEW.actor, NEW.detail)
           IS DISTINCT FROM (OLD.id, OLD.at, OLD.kind, OLD.conversation_id, OLD.batch_id, OLD.call_key, OLD.tool, OLD.actor, OLD.detail))
    EXECUTE FUNCTION audit_append_only();
