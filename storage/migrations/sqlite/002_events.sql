-- Platform events seen, so a retried delivery never starts a second turn.
CREATE TABLE events (
    platform TEXT NOT NULL,
    event_id TEXT NOT NULL,
    seen_at  TEXT NOT NULL,
    PRIMARY KEY (platform, event_id)
);
