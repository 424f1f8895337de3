-- Signed checkpoints of the audit's hash chain (issue 28; README "Audit"):
-- the head row's id and hash at a time, Ed25519-signed. One checkpoint per
-- head (replicas insert conditionally), and one start checkpoint per head
-- (retention writes it before pruning the rows up to it).
CREATE TABLE audit_checkpoints (
    head_id    INTEGER NOT NULL,
    head_hash  TEXT NOT NULL,
    at         TEXT NOT NULL,
    signature  TEXT NOT NULL,  -- base64 of the Ed25519 signature of storage.AuditCheckpoint.SignedBytes
    public_key TEXT NOT NULL,  -- base64 of the key that signed it
    start      INTEGER NOT NULL DEFAULT 0 CHECK (start IN (0, 1)),
    PRIMARY KEY (head_id, start)
);

CREATE TRIGGER audit_checkpoints_no_update BEFORE UPDATE ON audit_checkpoints
BEGIN
    SELECT RAISE(ABORT, 'audit checkpoints are append-only');
END;
CREATE TRIGGER audit_checkpoints_no_delete BEFORE DELETE ON audit_checkpoints
BEGIN
    SELECT RAISE(ABORT, 'audit checkpoints are append-only');
END;
