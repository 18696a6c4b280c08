-- Background sources (issue 5): each configured source's durable cursor and health.
-- One row per (site, source); the cursor is opaque text the source understands (a
-- file and offset, a time), written after the records it covers, so a crash between
-- the two repeats an idempotent write instead of losing records.
CREATE TABLE source_states (
    site_id              BIGINT NOT NULL REFERENCES sites (id) ON DELETE CASCADE,
    source               TEXT    NOT NULL,
    kind                 TEXT    NOT NULL,
    cursor               TEXT,
    last_success_at      BIGINT,
    last_error           TEXT,
    last_error_at        BIGINT,
    consecutive_failures BIGINT NOT NULL DEFAULT 0,
    accepted             BIGINT NOT NULL DEFAULT 0,
    rejected             BIGINT NOT NULL DEFAULT 0,
    last_record_at       BIGINT,
    PRIMARY KEY (site_id, source)
);
