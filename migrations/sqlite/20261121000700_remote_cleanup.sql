-- A reservation whose remote job(s) must still be cancelled: set before the executor or
-- a cancel asks the scheduler, cleared once it did. A scheduler unreachable at that
-- moment is asked again on later passes, instead of a job left to hold its nodes.
ALTER TABLE reservations ADD COLUMN remote_cleanup INTEGER NOT NULL DEFAULT 0;
CREATE INDEX reservations_remote_cleanup ON reservations (id) WHERE remote_cleanup;
