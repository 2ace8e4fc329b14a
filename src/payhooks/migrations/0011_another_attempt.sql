-- payhooks core, version 11: a second post under one delivery key that names another payment
-- attempt than the first (PayU's mihpayid, which its hash does not cover) waits for the
-- gateway's API like a callback resting on a static credential: a real second payment, or an
-- edited copy. Its own record is keyed <first key>:<attempt>; first_event_id names the record
-- it came after, whose attempt the API is asked about too.
ALTER TABLE payhooks_confirmations ADD COLUMN IF NOT EXISTS first_event_id text;
-- How many other attempts of one post wait at once (two at most: payhooks.confirmations).
CREATE INDEX IF NOT EXISTS payhooks_confirmations_attempts
    ON payhooks_confirmations (provider, first_event_id)
    WHERE first_event_id IS NOT NULL AND verdict IS NULL;

-- Health's banner for callbacks the API refuted in the last day (a forged callback under the
-- right credential: the credential is known to someone else): a small partial index, so the
-- read never scans the confirmations of every genuine callback.
CREATE INDEX IF NOT EXISTS payhooks_confirmations_refuted
    ON payhooks_confirmations (settled_at) WHERE verdict = 'refuted';
