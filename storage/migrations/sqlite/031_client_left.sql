-- When the MCP client whose call a pending batch is stopped waiting for it
-- (cancelled its tools/call, or went away): the card says so. NULL: it waits,
-- or the batch is not an MCP client's.
ALTER TABLE batches ADD COLUMN client_left_at TEXT;
