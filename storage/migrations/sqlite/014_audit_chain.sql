-- The audit as a hash chain (issue 28; README "Audit" gives the encoding).
-- Each row carries the hash of the row before it and its own hash;
-- audit_head holds the last chained row, and every audit insert updates
-- it in its own transaction, so the chain is one chain. Rows written
-- before this migration are chained by Airlock right after migrating
-- (storage.chainAudit, in id order): SQL here cannot hash.
ALTER TABLE audit ADD COLUMN prev_hash TEXT NOT NULL DEFAULT '';
ALTER TABLE audit ADD COLUMN hash TEXT NOT NULL DEFAULT '';

CREATE TABLE audit_head (
    one       INTEGER PRIMARY KEY CHECK (one = 1),
    last_id   INTEGER NOT NULL,
    last_hash TEXT NOT NULL
);
INSERT INTO audit_head (one, last_id, last_hash)
    VALUES (1, 0, '0000000000000000000000000000000000000000000000000000000000000000');

-- Still append-only: the one update allowed sets the hashes of a row not
-- yet chained, and nothing else.
DROP TRIGGER audit_no_update;
CREATE TRIGGER audit_no_update BEFORE UPDATE ON audit
WHEN OLD.hash <> '' OR NEW.hash = ''
    OR NEW.id IS NOT OLD.id OR NEW.at IS NOT OLD.at OR NEW.kind IS NOT OLD.kind
    OR NEW.conversation_id IS NOT OLD.conversation_id OR NEW.batch_id IS NOT OLD.batch_id
    OR NEW.call_key IS NOT OLD.call_key OR NEW.tool IS NOT OLD.tool
    OR NEW.actor IS NOT OLD.actor OR NEW.detail IS NOT OLD.detail
BEGIN
    SELECT RAISE(ABORT, 'audit is append-only');
END;
