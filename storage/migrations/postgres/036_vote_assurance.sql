-- How each voter of a call needing several approvals proved who they
-- are (step-up): 'passkey', 'sso', 'chat' (a page vote without either);
-- '' for a chat click. Quorum counts only the votes of the assurance the
-- call's tier needs now.
ALTER TABLE votes ADD COLUMN assurance TEXT NOT NULL DEFAULT '';
