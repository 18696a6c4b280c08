-- Background sources (issue 5): each configured source's durable cursor and health.
-- One row per (site, source); the cursor is opaque text the source understands (a
-- file and offset, a time), written after the records it covers, so a crash between
-- the two repeats an idempotent write instead of losing records.
CREATE TABLE source_states (
    site_id              INTEGER NOT NULL REFERENCES sites (id) ON DELETE CASCADE,
    source               TEXT    NOT NULL,
    kind                 TEXT    NOT NULL,
    cursor               TEXT,
    last_success_at      INTEGER,
    last_error           TEXT,
    last_error_at        INTEGER,
    consecutive_failures INTEGER NOT NULL DEFAULT 0,
    accepted             INTEGER NOT NULL DEFAULT 0,
    rejected             INTEGER NOT NULL DEFAULT 0,
    last_record_at       INTEGER,
    PRIMARY KEY (site_id, source)
);
