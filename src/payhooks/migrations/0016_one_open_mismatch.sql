-- payhooks core, version 16: one open mismatch per payment (docs/design.md, "What the merchant
-- expects").

-- A payment applied under another key (reconciliation's, a confirmation's) while its mismatch
-- stayed open: settled as applied. Its delivery, if still parked, is recorded ignored when
-- replayed, as a delivery of a payment already applied always is.
UPDATE payhooks_amount_mismatches m
SET resolved_at = now(),
    resolution = 'applied: the payment reached a handler under ' || p.event_id
FROM payhooks_payments p
WHERE m.resolved_at IS NULL AND p.provider = m.provider AND p.payment_id = m.payment_id
  AND p.event_id <> m.event_id;

-- Two open mismatches for one payment (a webhook's and reconciliation's): the first found is
-- kept open for a person; the others are settled as its copies and their deliveries, which
-- nothing could resolve once it is, recorded ignored.
WITH ranked AS (
    SELECT provider, event_id,
           first_value(event_id) OVER w AS kept,
           row_number() OVER w AS n
    FROM payhooks_amount_mismatches
    WHERE resolved_at IS NULL AND payment_id IS NOT NULL
    WINDOW w AS (PARTITION BY provider, payment_id ORDER BY found_at, event_id)
), copies AS (
    UPDATE payhooks_amount_mismatches m
    SET resolved_at = now(), resolution = 'a copy: the payment is parked under ' || r.kept
    FROM ranked r
    WHERE r.n > 1 AND m.provider = r.provider AND m.event_id = r.event_id
    RETURNING m.provider, m.event_id
)
UPDATE processed_webhooks w SET outcome = 'ignored', processed_at = now()
FROM copies c
WHERE w.provider = c.provider AND w.event_id = c.event_id AND w.outcome = 'parked';

DROP INDEX IF EXISTS payhooks_amount_mismatches_unresolved_payment;
CREATE UNIQUE INDEX IF NOT EXISTS payhooks_amount_mismatches_one_open
    ON payhooks_amount_mismatches (provider, payment_id)
    WHERE resolved_at IS NULL AND payment_id IS NOT NULL;
