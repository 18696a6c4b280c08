-- Managed VARQ reservations, their events, and CO-VARQ co-allocations (varq.md).
-- Site and queue are kept by name: a reservation outlives nothing it refers to, and its
-- record must stay readable for calibration even if the site is renamed or removed.

CREATE TABLE coallocations (
    id          INTEGER PRIMARY KEY,
    -- The public id, also carried by every member's remote job name.
    uid         TEXT   NOT NULL UNIQUE,
    -- The token name that made it; only its owner sees it.
    owner       TEXT   NOT NULL,
    p_all       REAL NOT NULL,
    p_indep     REAL NOT NULL,
    p_expected  REAL NOT NULL,
    -- How many reservations (i) the co-allocation holds.
    count       INTEGER NOT NULL CHECK (count > 0),
    created_at  INTEGER NOT NULL
);

CREATE TABLE reservations (
    id              INTEGER PRIMARY KEY,
    uid             TEXT   NOT NULL UNIQUE,
    owner           TEXT   NOT NULL,
    site            TEXT   NOT NULL,
    queue           TEXT   NOT NULL,
    nodes           INTEGER NOT NULL CHECK (nodes > 0),
    walltime_s      INTEGER NOT NULL CHECK (walltime_s > 0),
    start_at        INTEGER NOT NULL,
    min_probability REAL NOT NULL,
    confidence      REAL NOT NULL,
    mode            TEXT   NOT NULL CHECK (mode IN ('latest', 'max_probability')),
    step_s          INTEGER NOT NULL CHECK (step_s > 0),
    command         TEXT   NOT NULL,
    run_mode        TEXT   NOT NULL CHECK (run_mode IN ('hold', 'best_effort')),
    state           TEXT   NOT NULL CHECK (state IN ('planned', 'submitted', 'started', 'succeeded', 'failed', 'cancelled', 'refused', 'error')),
    -- The current plan (re-planned while planned).
    submit_at             INTEGER,
    advertised_walltime_s INTEGER,
    probability           REAL,
    at_risk               INTEGER NOT NULL DEFAULT 0,
    planned_at            INTEGER NOT NULL,
    -- The remote job, once submitted.
    remote_job_id   TEXT,
    submitted_at    INTEGER,
    started_at      INTEGER,
    ended_at        INTEGER,
    -- Which executor is submitting it, until when: one replica at a time.
    lease_owner     TEXT,
    lease_until     INTEGER,
    coallocation_id INTEGER REFERENCES coallocations (id) ON DELETE CASCADE,
    coalloc_index   INTEGER,
    created_at      INTEGER NOT NULL,
    updated_at      INTEGER NOT NULL
);
CREATE INDEX reservations_owner ON reservations (owner, id);
-- The executor's work list: reservations that are not final yet.
CREATE INDEX reservations_active ON reservations (state, submit_at)
    WHERE state IN ('planned', 'submitted', 'started');
CREATE INDEX reservations_coallocation ON reservations (coallocation_id) WHERE coallocation_id IS NOT NULL;

CREATE TABLE reservation_events (
    id             INTEGER PRIMARY KEY,
    reservation_id INTEGER NOT NULL REFERENCES reservations (id) ON DELETE CASCADE,
    at             INTEGER NOT NULL,
    -- The state after the event.
    state          TEXT   NOT NULL,
    reason         TEXT   NOT NULL
);
CREATE INDEX reservation_events_of ON reservation_events (reservation_id, id);
