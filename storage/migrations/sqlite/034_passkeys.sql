-- The web console's passkeys (WebAuthn credentials, one row each, the
-- library's JSON of it), and its ceremonies in progress (a registration, or
-- a vote's assertion bound to one call's revision), each taken once.
CREATE TABLE web_passkeys (
  id         TEXT PRIMARY KEY,
  email      TEXT NOT NULL,
  credential TEXT NOT NULL,
  created_at TEXT NOT NULL
);
CREATE INDEX web_passkeys_email ON web_passkeys (email);
CREATE TABLE web_ceremonies (
  id_hash    TEXT PRIMARY KEY,
  email      TEXT NOT NULL,
  kind       TEXT NOT NULL,
  data       TEXT NOT NULL,
  expires_at TEXT NOT NULL
);
