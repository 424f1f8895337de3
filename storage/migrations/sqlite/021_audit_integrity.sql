-- The audit against someone with the database only (issue 34; README
-- "Audit").
--
-- Pruning: the audit's DELETE trigger lets a row go only in the prune's
-- own transaction, and only behind a start checkpoint of the last row it
-- deletes with that row's hash: storage.PruneAudit stores the signed start
-- checkpoint, then puts its bookkeeping row here (n: a random id, so it is
-- the connection's last insert, last_insert_rowid()), deletes and empties
-- the table. A row put here by hand opens nothing from another
-- connection, nor without such a checkpoint; a prune copied by hand in
-- one session needs a start checkpoint it cannot sign, which verify names.
DROP TRIGGER audit_no_delete;
DROP TABLE audit_prune;
CREATE TABLE audit_prune (
    n         INTEGER PRIMARY KEY,
    upto      INTEGER NOT NULL,
    upto_hash TEXT NOT NULL
);
CREATE TRIGGER audit_no_delete BEFORE DELETE ON audit
WHEN NOT EXISTS (SELECT 1 FROM audit_prune p JOIN audit_checkpoints c
        ON c.head_id = p.upto AND c.start = 1 AND c.head_hash = p.upto_hash
    WHERE p.n = last_insert_rowid() AND OLD.id <= p.upto)
BEGIN
    SELECT RAISE(ABORT, 'audit is append-only');
END;
