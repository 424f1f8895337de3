-- Audit retention (audit.retention; README "Audit"): the one DELETE the
-- audit allows is storage.PruneAudit's, which in one transaction writes a
-- signed start checkpoint at the last row it prunes, sets audit_prune to
-- that row's id, deletes the rows up to it in id order and empties
-- audit_prune again. Any other DELETE (and every TRUNCATE) is refused as
-- before; one done by hand with the trigger dropped still breaks the chain
-- (verify names it).
CREATE TABLE audit_prune (
    one  INTEGER PRIMARY KEY CHECK (one = 1),
    upto BIGINT NOT NULL
);

CREATE FUNCTION audit_delete_pruned_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM audit_prune WHERE one = 1 AND OLD.id <= upto) THEN
        RAISE EXCEPTION 'audit is append-only';
    END IF;
    RETURN OLD;
END;
$$;

DROP TRIGGER audit_append_only ON audit;
CREATE TRIGGER audit_no_truncate BEFORE TRUNCATE ON audit
    FOR EACH STATEMENT EXECUTE FUNCTION audit_append_only();
CREATE TRIGGER audit_append_only BEFORE DELETE ON audit
    FOR EACH ROW EXECUTE FUNCTION audit_delete_pruned_only();
