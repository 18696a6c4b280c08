-- Issue 25 item 5: reservation webhooks. A reservation may name a URL its state
-- changes are POSTed to; each change is written to the outbox in the same transaction
-- as the change itself, and a deliverer sends the rows (with retries) from there.
ALTER TABLE reservations ADD COLUMN webhook TEXT;

CREATE TABLE webhook_outbox (
    id              INTEGER PRIMARY KEY,
    reservation_id  INTEGER NOT NULL REFERENCES reservations (id) ON DELETE CASCADE,
    -- Where to (the reservation's webhook when the change happened).
    url             TEXT    NOT NULL,
    -- The state the reservation moved to (`at_risk` for a re-plan that found no time
    -- meeting P), and the one it left.
    state           TEXT    NOT NULL,
    previous_state  TEXT    NOT NULL,
    -- The JSON body, fixed when written: every attempt sends the same bytes.
    body            TEXT    NOT NULL,
    created_at      INTEGER NOT NULL,
    attempts        INTEGER NOT NULL DEFAULT 0,
    next_attempt_at INTEGER NOT NULL,
    -- A deliverer's claim: one sender at a time.
    lease_owner     TEXT,
    lease_until     INTEGER,
    delivered_at    INTEGER,
    gave_up_at      INTEGER,
    last_error      TEXT
);
-- The deliverer's work list: rows neither delivered nor given up.
CREATE INDEX webhook_outbox_due ON webhook_outbox (next_attempt_at)
    WHERE delivered_at IS NULL AND gave_up_at IS NULL;
CREATE INDEX webhook_outbox_of ON webhook_outbox (reservation_id, id);
