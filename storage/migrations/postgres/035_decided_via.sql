-- How the person who decided a call proved who they are (step-up):
-- 'passkey', 'sso', 'chat' (a page decision without either); '' for a
-- chat click or Airlock's own decision.
ALTER TABLE calls ADD COLUMN decided_via TEXT NOT NULL DEFAULT '';
