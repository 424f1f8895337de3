-- The web console's sign-ins in progress (taken once by their callback)
-- and signed-in sessions, each found by the hash of its random token.
CREATE TABLE web_logins (
  state_hash TEXT PRIMARY KEY,
  nonce      TEXT NOT NULL,
  verifier   TEXT NOT NULL,
  return_to  TEXT NOT NULL DEFAULT '',
  expires_at TEXT NOT NULL
);
CREATE TABLE web_sessions (
  id_hash    TEXT PRIMARY KEY,
  email      TEXT NOT NULL,
  csrf       TEXT NOT NULL,
  auth_time  TEXT NOT NULL,
  created_at TEXT NOT NULL,
  expires_at TEXT NOT NULL
);
-- The console's own requests: a person's recent batches.
CREATE INDEX batches_requested ON batches (requested_by, created_at);
