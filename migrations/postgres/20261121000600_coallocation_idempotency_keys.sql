-- The same on POST /v1/coallocations, whose retry must also ask for the same: the digest
-- of what the keyed request asked for (its parameters as read, not its bytes).
ALTER TABLE coallocations ADD COLUMN idempotency_key TEXT;
ALTER TABLE coallocations ADD COLUMN request_digest TEXT;
CREATE UNIQUE INDEX coallocations_idempotency ON coallocations (owner, idempotency_key)
    WHERE idempotency_key IS NOT NULL;
