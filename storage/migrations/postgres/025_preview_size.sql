-- A finished preview's size: the length in bytes of its whole scrubbed
-- output, which preview_hash covers; preview_output keeps its first
-- 16 KiB. 0 for a preview stored before (its output is all there is).
ALTER TABLE calls ADD COLUMN preview_size BIGINT NOT NULL DEFAULT 0;
