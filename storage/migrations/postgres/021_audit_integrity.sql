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

-- Row MACs (storage.AuditMAC): with audit.signing_key each row carries a
-- MAC only the key's holder can compute, written with the row, and
-- audit_head the head row's (last_mac), which is never emptied once set:
-- a head whose MAC does not verify was not written by Airlock. prev_id and
-- prev_mac, like prev_hash, return the head a writer took under its lock
-- (storage.takeHead).
ALTER TABLE audit ADD COLUMN mac TEXT NOT NULL DEFAULT '';
ALTER TABLE audit_head ADD COLUMN last_mac TEXT NOT NULL DEFAULT '';
ALTER TABLE audit_head ADD COLUMN prev_id BIGINT NOT NULL DEFAULT 0;
ALTER TABLE audit_head ADD COLUMN prev_mac TEXT NOT NULL DEFAULT '';

-- No row is updated any more: the rows before the chain were chained in
-- migration 014's transaction, and a row is written whole.
DROP TRIGGER audit_no_update ON audit;
CREATE TRIGGER audit_no_update BEFORE UPDATE ON audit
    FOR EACH STATEMENT EXECUTE FUNCTION audit_append_only();

CREATE FUNCTION audit_head_keeps_mac() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'UPDATE' AND (OLD.last_mac = '' OR NEW.last_mac <> '') THEN
        RETURN NEW;
    END IF;
    RAISE EXCEPTION 'the audit head''s MAC cannot be removed, nor the head deleted';
END;
$$;
CREATE TRIGGER audit_head_keeps_mac BEFORE UPDATE OR DELETE ON audit_head
    FOR EACH ROW EXECUTE FUNCTION audit_head_keeps_mac();
CREATE TRIGGER audit_head_no_truncate BEFORE TRUNCATE ON audit_head
    FOR EACH STATEMENT EXECUTE FUNCTION audit_append_only();
