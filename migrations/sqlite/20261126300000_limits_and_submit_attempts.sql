-- Issue 22: the nodes a queue's jobs can reach in all (a Slurm partition's TotalNodes,
-- a trace header's MaxNodes/MaxProcs, or what [[sites.queues]] states), beside the
-- per-job limits max_nodes and max_walltime_s. A job asking for more can never run
-- there, so it gets no bound. Learnt limits are stored so they survive restarts.
ALTER TABLE queues ADD COLUMN total_nodes INTEGER CHECK (total_nodes > 0);

-- Issue 22: when an executor last set out to submit a reservation's placeholder job
-- (set before the scheduler is asked). A reservation with neither this nor a remote
-- job id was never submitted: cancelling it has no remote job to look for, and so no
-- clean-up to retry for ever while its scheduler is unreachable. Rows from before
-- this column read as never attempted.
ALTER TABLE reservations ADD COLUMN submit_attempted_at INTEGER;
