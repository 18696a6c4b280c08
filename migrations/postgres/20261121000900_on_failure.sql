-- What becomes of a reservation's remote job when the reservation fails (varq.md:
-- "cancel it unless the user asked to keep it"). Reservations made before keep the
-- behaviour they were made with: cancel.
ALTER TABLE reservations
    ADD COLUMN on_failure TEXT NOT NULL DEFAULT 'cancel'
    CHECK (on_failure IN ('cancel', 'keep'));
