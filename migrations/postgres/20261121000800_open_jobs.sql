-- A site's jobs that have not ended: what a whole listing of the scheduler's jobs is
-- compared with, each poll, to close the ones that left it unseen.
CREATE INDEX jobs_open ON jobs (site_id) WHERE end_time IS NULL;
