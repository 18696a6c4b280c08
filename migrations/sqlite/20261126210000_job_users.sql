-- The scheduler's user of a job, as a key (the name, or a keyed hash of it where the
-- site's configuration asks): the engine counts a user's own jobs pending ahead of
-- theirs (issue 21). Never shown to other users. NULL where the source does not say.
ALTER TABLE jobs ADD COLUMN user_key TEXT;
