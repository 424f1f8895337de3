-- Audit retention (audit.retention; README "Audit"): the one DELETE the
-- audit allows is storage.PruneAudit's, which in one transaction writes a
-- signed start checkpoint at the last row it prunes, sets audit_prune to
-- that row's id, deletes the rows up to it in id order and empties
-- audit_prune again. Any other DELETE is refused as before; one done by
-- hand with the trigger dropped still breaks the chain (verify names it).
CREATE TABLE audit_prune (
    one  INTEGER PRIMARY KEY CHECK (one = 1),
    upto INTEGER NOT NULL
);

DROP TRIGGER audit_no_delete;
CREATE TRIGGER audit_no_delete BEFORE DELETE ON audit
WHEN NOT EXISTS (SELECT 1 FROM audit_prune WHERE one = 1 AND OLD.id <= upto)
BEGIN
    SELECT RAISE(ABORT, 'audit is append-only');
END;
