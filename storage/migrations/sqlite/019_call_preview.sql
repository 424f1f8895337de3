-- A call's preview (tools[].preview): its state (''/running/done/failed),
-- the scrubbed output the approver saw (or the scrubbed error), the hex
-- sha256 of that output, and the recheck run just before the tool
-- (''/matched/changed/failed) with its output's hash.
ALTER TABLE calls ADD COLUMN preview_state TEXT NOT NULL DEFAULT '';
ALTER TABLE calls ADD COLUMN preview_output TEXT NOT NULL DEFAULT '';
ALTER TABLE calls ADD COLUMN preview_hash TEXT NOT NULL DEFAULT '';
ALTER TABLE calls ADD COLUMN recheck_state TEXT NOT NULL DEFAULT '';
ALTER TABLE calls ADD COLUMN recheck_hash TEXT NOT NULL DEFAULT '';
