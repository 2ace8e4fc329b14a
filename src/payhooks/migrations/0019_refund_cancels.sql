-- payhooks core, version 16: a refund intent can be cancelled by a person, and the bound on
-- what a payment may still refund holds at every isolation level.

-- One row per payment ever asked to refund: payhooks.refunds.request updates it before it
-- sums the payment's live intents. Two transactions asking for one payment meet on this row:
-- at READ COMMITTED the second waits for the first and then counts its intent; at REPEATABLE
-- READ or SERIALIZABLE, whose snapshot could not see it, the second's serialization fails
-- (the caller retries, as it must at those levels), so no snapshot ever sums stale intents.
CREATE TABLE IF NOT EXISTS payhooks_refund_payments (
    provider    text        NOT NULL,
    payment_id  text        NOT NULL,
    asked       integer     NOT NULL DEFAULT 1,
    asked_at    timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (provider, payment_id)
);

-- 'cancelled': a person stopped an intent the gateway does not have (never sent, or every
-- call refused or failed): it is never sent afterwards and no longer counts against what the
-- payment may refund. Who and why are kept.
ALTER TABLE payhooks_refunds DROP CONSTRAINT IF EXISTS payhooks_refunds_state_check;
ALTER TABLE payhooks_refunds ADD CONSTRAINT payhooks_refunds_state_check
    CHECK (state IN ('requested', 'sent', 'processed', 'failed', 'refused', 'cancelled'));
ALTER TABLE payhooks_refunds ADD COLUMN IF NOT EXISTS cancelled_by text;
ALTER TABLE payhooks_refunds ADD COLUMN IF NOT EXISTS cancel_reason text;
-- Until when a sender holds the intent for its call: while it does, the intent is in flight
-- and cannot be cancelled (the gateway may be acting on it).
ALTER TABLE payhooks_refunds ADD COLUMN IF NOT EXISTS leased_until timestamptz;
