-- Signed checkpoints of the audit's hash chain (issue 28; README "Audit"):
-- the head row's id and hash at a time, Ed25519-signed. One checkpoint per
-- head (replicas insert conditionally), and one start checkpoint per head
-- (retention writes it before pruning the rows up to it).
CREATE TABLE audit_checkpoints (
    head_id    BIGINT NOT NULL,
    head_hash  TEXT NOT NULL,
    at         TIMESTAMPTZ NOT NULL,
    signature  TEXT NOT NULL,  -- base64 of the Ed25519 signature of storage.AuditCheckpoint.SignedBytes
    public_key TEXT NOT NULL,  -- base64 of the key that signed it
    start      BOOLEAN NOT NULL DEFAULT FALSE,
    PRIMARY KEY (head_id, start)
);

CREATE FUNCTION audit_checkpoints_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'audit checkpoints are append-only';
END;
$$;
CREATE TRIGGER audit_checkpoints_append_only BEFORE UPDATE OR DELETE OR TRUNCATE ON audit_checkpoints
    FOR EACH STATEMENT EXECUTE FUNCTION audit_checkpoints_append_only();
