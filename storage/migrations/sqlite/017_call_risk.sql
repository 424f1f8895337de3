-- The risk tier of a flagged call (low, medium, high, critical), shown on
-- its card. '' for calls nobody was asked about and for calls stored
-- before tiers existed.
ALTER TABLE calls ADD COLUMN risk TEXT NOT NULL DEFAULT '';
