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

-- Row MACs (storage.AuditMAC): with audit.signing_key each row carries a
-- MAC only the key's holder can compute, written with the row, and
-- audit_head the head row's (last_mac), which is never emptied once set:
-- a head whose MAC does not verify was not written by Airlock.
ALTER TABLE audit ADD COLUMN mac TEXT NOT NULL DEFAULT '';
ALTER TABLE audit_head ADD COLUMN last_mac TEXT NOT NULL DEFAULT '';

-- No row is updated any more: the rows before the chain were chained in
-- migration 014's transaction, and a row is written whole.
DROP TRIGGER audit_no_update;
CREATE TRIGGER audit_no_update BEFORE UPDATE ON audit
BEGIN
    SELECT RAISE(ABORT, 'audit is append-only');
END;

CREATE TRIGGER audit_head_keeps_mac BEFORE UPDATE ON audit_head
WHEN OLD.last_mac <> '' AND NEW.last_mac = ''
BEGIN
    SELECT RAISE(ABORT, 'the audit head''s MAC cannot be removed');
END;
CREATE TRIGGER audit_head_no_delete BEFORE DELETE ON audit_head
BEGIN
    SELECT RAISE(ABORT, 'the audit head cannot be deleted');
END;
