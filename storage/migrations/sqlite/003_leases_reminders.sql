-- Leases: one holder at a time per key (a conversation's turns), with an
-- expiry so a dead replica's lease lapses.
CREATE TABLE leases (
    key        TEXT PRIMARY KEY,
    holder     TEXT NOT NULL,
    expires_at TEXT NOT NULL
);

-- When the reminder before expiry was posted; NULL: not yet.
ALTER TABLE batches ADD COLUMN reminded_at TEXT;
