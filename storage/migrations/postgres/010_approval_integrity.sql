-- Approval integrity: a yes counts only for the arguments its giver saw,
-- and a grant covers only its requester's turns and the calls its creator
-- may decide.

-- Each edit of a call's arguments makes a new revision; every button, form
-- and view carries the revision it showed, and a decision at another
-- revision changes nothing. A call edited before this upgrade is at
-- revision 1, so the buttons posted before (revision 0) must be looked at
-- again.
ALTER TABLE calls ADD COLUMN revision INTEGER NOT NULL DEFAULT 0;
UPDATE calls SET revision = 1 WHERE edited_at IS NOT NULL;

-- Whose turns a grant covers: the requester of the call whose "Allow for"
-- made it (taken from its batch for grants made before this upgrade), and
-- the creator's platform roles then (JSON list), for the restrictions of a
-- later call's rules.
ALTER TABLE grants ADD COLUMN requester TEXT NOT NULL DEFAULT '';
ALTER TABLE grants ADD COLUMN creator_roles TEXT NOT NULL DEFAULT '[]';
UPDATE grants SET requester = COALESCE((SELECT b.requested_by FROM batches b WHERE b.id = grants.batch_id), '');
