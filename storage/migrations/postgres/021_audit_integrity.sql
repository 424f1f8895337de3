-- The audit against someone with the database only (issue 34; README
-- "Audit").
--
-- Pruning: the audit's DELETE trigger lets a row go only in the prune's
-- own transaction, and only behind a start checkpoint of the last row it
-- deletes with that row's hash: storage.PruneAudit stores the signed start
-- checkpoint, then puts its bookkeeping row here under its transaction's
-- id (txid_current()), deletes and empties the table. A row put here by
-- hand opens nothing in another transaction, nor without such a
-- checkpoint; a prune copied by hand in one transaction needs a start
-- checkpoint it cannot sign, which verify names.
DROP TABLE audit_prune;
CREATE TABLE audit_prune (
    txid      BIGINT PRIMARY KEY,
    upto      BIGINT NOT NULL,
    upto_hash TEXT NOT NULL
);
CREATE OR REPLACE FUNCTION audit_delete_pruned_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM audit_prune p JOIN audit_checkpoints c
            ON c.head_id = p.upto AND c.start AND c.head_hash = p.upto_hash
        WHERE p.txid = txid_current() AND OLD.id <= p.upto) THEN
        RAISE EXCEPTION 'audit is append-only';
    END IF;
    RETURN OLD;
END;
$$;
