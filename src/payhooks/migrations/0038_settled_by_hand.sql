-- payhooks core, version 38: a payment settled by hand stays settled.
--
-- A person settles a payment parked for its amount outside payhooks (refunded or written off
-- in the gateway's dashboard: payhooks.resolve). Its mismatch was then resolved, and a later
-- delivery of the same payment under another key (reconciliation's report of it, asked after
-- the resolve; a webhook after reconciliation's report) found no open mismatch, so it parked
-- the payment again with a second mismatch, asking a person to refund it a second time. The
-- mismatch now says it was settled by hand, and a delivery of its payment under any other key
-- is recorded ignored instead (payhooks.intake.expectations.holding).
ALTER TABLE payhooks_amount_mismatches
    ADD COLUMN IF NOT EXISTS settled_by_hand boolean NOT NULL DEFAULT false;

-- The ones settled before this version: by hand, unless payhooks' own words say how it settled
-- them (applied, ignored by the handlers, or a copy: payhooks.intake.expectations, version 16).
UPDATE payhooks_amount_mismatches SET settled_by_hand = true
WHERE resolved_at IS NOT NULL AND NOT settled_by_hand
  AND resolution NOT LIKE 'applied: %'
  AND resolution NOT LIKE 'ignored: the expectation was corrected%'
  AND resolution NOT LIKE 'a copy: %';

-- A payment parked again under another key after it was settled by hand: that mismatch
-- settled as its copy (told to no one: the payment's own was), and its delivery, which nothing
-- could resolve once it is, recorded ignored.
WITH copies AS (
    UPDATE payhooks_amount_mismatches m
    SET resolved_at = now(), alerted_at = coalesce(m.alerted_at, now()),
        resolution = 'a copy: the payment was settled by hand under ' || (
            SELECT s.event_id FROM payhooks_amount_mismatches s
            WHERE s.provider = m.provider AND s.payment_id = m.payment_id AND s.settled_by_hand
            ORDER BY s.resolved_at, s.event_id LIMIT 1)
    WHERE m.resolved_at IS NULL AND EXISTS (
        SELECT 1 FROM payhooks_amount_mismatches s
        WHERE s.provider = m.provider AND s.payment_id = m.payment_id AND s.settled_by_hand)
    RETURNING m.provider, m.event_id
)
UPDATE processed_webhooks w SET outcome = 'ignored', processed_at = now()
FROM copies c
WHERE w.provider = c.provider AND w.event_id = c.event_id AND w.outcome = 'parked';
