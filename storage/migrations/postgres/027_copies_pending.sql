-- Batches whose card copies are still pending, whatever their status: a
-- request decided while a copy posted before a kill was never recorded
-- still has that copy adopted (so card sync brings it to the decision), and
-- recovery finds such batches without scanning every batch.
CREATE INDEX batches_copies_pending ON batches (created_at) WHERE copies_pending;
