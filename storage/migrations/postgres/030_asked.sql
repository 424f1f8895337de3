-- The calls a person was asked about (AskedBatch: an MCP call's retry joins
-- the session's asked call of the same tool and arguments). Only those, so
-- the lookup reads them alone, however many ungated calls a session made.
CREATE INDEX calls_asked ON calls (tool) WHERE flagged;
