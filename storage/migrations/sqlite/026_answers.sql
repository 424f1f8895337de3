-- Answers to post. A model's answer (or the notice that ends a turn) is a
-- message of the conversation's history that Airlock then posts in its
-- thread: the row here, written in the same transaction as the message,
-- says it is not posted yet, and is deleted once the platform accepted the
-- post (or the post was given up). The process that stored it posts it at
-- once, holding it (claimed_by until claimed_until, renewed while the post
-- lasts); one left by a process that died, or whose post failed (retry_at:
-- its backoff), is posted by the answers job of one replica, in order within
-- its conversation. No text here: the message is the text, redacted when
-- posted.
CREATE TABLE answers (
    id              INTEGER PRIMARY KEY AUTOINCREMENT,
    conversation_id INTEGER NOT NULL,
    seq             INTEGER NOT NULL,
    created_at      TEXT NOT NULL,
    attempts        INTEGER NOT NULL DEFAULT 1, -- posts tried: its storer's, then each claim
    retry_at        TEXT,
    claimed_by      TEXT NOT NULL DEFAULT '',
    claimed_until   TEXT,
    UNIQUE (conversation_id, seq),
    FOREIGN KEY (conversation_id, seq) REFERENCES messages (conversation_id, seq)
);
