-- Rejected clicks are coalesced: the first click of a (person, batch,
-- reason) in a minute window inserts its row here and writes an audit row;
-- later ones of the window only count in suppressed. The next audit row
-- of the same key carries the count and the earlier windows' rows go.
-- Replicas coalesce through the primary key: one INSERT wins a window.
CREATE TABLE rejected_clicks (
    actor        TEXT NOT NULL,
    batch_id     TEXT NOT NULL,
    reason       TEXT NOT NULL,
    window_start TIMESTAMPTZ NOT NULL,
    suppressed   BIGINT NOT NULL DEFAULT 0,
    PRIMARY KEY (actor, batch_id, reason, window_start)
);
