-- A run whose outcome is unknown gates its tool in the conversation until
-- a person marks it checked ("I checked — go on"): who and when (NULL: not
-- checked), and where the thread line announcing it was posted ('' none).
ALTER TABLE calls
    ADD COLUMN checked_by TEXT NOT NULL DEFAULT '',
    ADD COLUMN checked_at TIMESTAMPTZ,
    ADD COLUMN notice_ref TEXT NOT NULL DEFAULT '';
