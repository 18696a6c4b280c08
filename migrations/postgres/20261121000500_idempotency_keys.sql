-- A client's Idempotency-Key on POST /v1/reservations: a request retried with the key
-- of one that already made a reservation gets that reservation back instead of making
-- (and later submitting) a second one. Keys are per token: two owners may use the same.
ALTER TABLE reservations ADD COLUMN idempotency_key TEXT;
CREATE UNIQUE INDEX reservations_idempotency ON reservations (owner, idempotency_key)
    WHERE idempotency_key IS NOT NULL;
