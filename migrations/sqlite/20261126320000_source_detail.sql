-- Issue 26: what a background source says about itself, shown in its health (e.g.
-- `slurmrestd API v0.0.45 (auto, from v0.0.42 ... offered by Slurm 26.05.5)`); kept
-- from the last successful poll that said anything.
ALTER TABLE source_states ADD COLUMN detail TEXT;
