-- The definition of the tool a grant was made for (a hash of its config or
-- its MCP schema): a grant whose tool changed since is not used. '' for
-- grants made before this migration.
ALTER TABLE grants ADD COLUMN tool_def TEXT NOT NULL DEFAULT '';
