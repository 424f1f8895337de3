-- The batches' status indexes hold open batches only (pending, decided,
-- running): every query that uses them looks for those, and done batches,
-- nearly all of them in time, only made the indexes grow and cost a page
-- written when each batch was done. A query must name the indexes'
-- condition itself (status <> 'done') for SQLite to use them.
DROP INDEX batches_status;
DROP INDEX batches_conversation_status;
CREATE INDEX batches_open ON batches (status, created_at) WHERE status <> 'done';
CREATE INDEX batches_conversation_open ON batches (conversation_id, status, created_at) WHERE status <> 'done';
