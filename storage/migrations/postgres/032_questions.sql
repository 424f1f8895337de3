-- An upstream MCP server's question (elicitation, form mode) during a call
-- Airlock makes: posted in the call's conversation, answered by an approver
-- of its channel, declined, or cancelled (expiry, the call ending first).
-- One conditional UPDATE from 'pending' ends it.
CREATE TABLE questions (
  id              TEXT PRIMARY KEY,
  conversation_id BIGINT NOT NULL REFERENCES conversations(id),
  batch_id        TEXT NOT NULL,
  call_key        TEXT NOT NULL,
  server          TEXT NOT NULL,
  tool            TEXT NOT NULL,
  message         TEXT NOT NULL,
  fields          TEXT NOT NULL,             -- JSON array of the form's fields
  status          TEXT NOT NULL DEFAULT 'pending',
  answer          TEXT NOT NULL DEFAULT '',  -- JSON object of the accepted values
  answered_by     TEXT NOT NULL DEFAULT '',
  why             TEXT NOT NULL DEFAULT '',
  notice_ref      TEXT NOT NULL DEFAULT '',
  created_at      TIMESTAMPTZ NOT NULL,
  expires_at      TIMESTAMPTZ NOT NULL,
  ended_at        TIMESTAMPTZ
);
CREATE INDEX questions_pending ON questions(expires_at) WHERE status = 'pending';
