-- qbets schema, SQLite dialect. Times are Unix seconds (INTEGER), as on PostgreSQL.
-- An applied migration is never edited: add a new file instead.

CREATE TABLE sites (
    id          INTEGER PRIMARY KEY,
    name        TEXT    NOT NULL UNIQUE,
    -- 'archive': imported from a trace, answered as of its last record;
    -- 'live': fed by a scheduler, answered as of now.
    kind        TEXT    NOT NULL CHECK (kind IN ('archive', 'live')),
    description TEXT    NOT NULL DEFAULT '',
    time_zone   TEXT,
    created_at  INTEGER NOT NULL
);

CREATE TABLE queues (
    id             INTEGER PRIMARY KEY,
    site_id        INTEGER NOT NULL REFERENCES sites (id) ON DELETE CASCADE,
    name           TEXT    NOT NULL,
    max_walltime_s INTEGER CHECK (max_walltime_s > 0),
    max_nodes      INTEGER CHECK (max_nodes > 0),
    UNIQUE (site_id, name),
    -- The target of jobs' (queue_id, site_id) reference.
    UNIQUE (id, site_id)
);

CREATE TABLE jobs (
    id           INTEGER PRIMARY KEY,
    site_id      INTEGER NOT NULL,
    queue_id     INTEGER NOT NULL,
    -- The scheduler's job id, unique per site: re-importing a trace inserts nothing.
    job_id       TEXT    NOT NULL,
    submit_time  INTEGER NOT NULL,
    start_time   INTEGER,
    end_time     INTEGER,
    nodes        INTEGER CHECK (nodes > 0),
    walltime_s   INTEGER CHECK (walltime_s > 0),
    state        TEXT    NOT NULL CHECK (state IN ('pending', 'running', 'completed', 'failed', 'cancelled', 'unknown')),
    -- The bound predicted when the job was submitted (filled by the live predictors).
    bound_s      INTEGER,
    bound_status TEXT,
    -- One reference checks both: the queue exists and belongs to the job's site.
    FOREIGN KEY (queue_id, site_id) REFERENCES queues (id, site_id) ON DELETE CASCADE,
    UNIQUE (site_id, job_id),
    CHECK (start_time IS NULL OR start_time >= submit_time)
);
-- Rebuild order: submit time, then arrival (id) — keyset paging walks this index.
CREATE INDEX jobs_queue_submit ON jobs (queue_id, submit_time, id);
-- Windows of starts (`.../waits`) and last release per queue.
CREATE INDEX jobs_queue_start ON jobs (queue_id, start_time, id) WHERE start_time IS NOT NULL;

CREATE TABLE api_tokens (
    id         INTEGER PRIMARY KEY,
    name       TEXT    NOT NULL UNIQUE,
    scope      TEXT    NOT NULL CHECK (scope IN ('read', 'ingest', 'reserve', 'admin')),
    -- First characters of the secret, to find the row; the secret itself is never stored.
    prefix     TEXT    NOT NULL,
    -- SHA-256 of the whole token.
    hash       BLOB    NOT NULL UNIQUE,
    created_at INTEGER NOT NULL
);
CREATE INDEX api_tokens_prefix ON api_tokens (prefix);

-- Records that could not be read (a malformed trace line, a bad sensor answer), kept
-- with the reason instead of being dropped.
CREATE TABLE rejects (
    id          INTEGER PRIMARY KEY,
    site_id     INTEGER NOT NULL REFERENCES sites (id) ON DELETE CASCADE,
    source      TEXT    NOT NULL,
    line        INTEGER,
    raw         TEXT    NOT NULL,
    reason      TEXT    NOT NULL,
    received_at INTEGER NOT NULL
);
-- The same line of the same file is kept once, however often it is imported.
CREATE UNIQUE INDEX rejects_source_line ON rejects (site_id, source, line) WHERE line IS NOT NULL;
