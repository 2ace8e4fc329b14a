-- payhooks core, version 8: a reconciliation pass reads what it asks about, not the window;
-- the amount mismatches not yet resolved are found by the order and the payment they name.

-- An expectation is enrolled once it is old enough to be asked about: its reconciliation row is
-- written then (payhooks.reconcile.checkouts), with its next attempt at its creation. The ones
-- not yet enrolled are found through this index alone, whatever the window holds.
ALTER TABLE payhooks_expectations ADD COLUMN IF NOT EXISTS enrolled boolean NOT NULL DEFAULT false;
CREATE INDEX IF NOT EXISTS payhooks_expectations_unenrolled
    ON payhooks_expectations (provider, created_at, gateway_order_id) WHERE NOT enrolled;

-- Whether a capture of the gateway order is known: set when a pass finds one in
-- payhooks_payments, never unset (a capture applied is never taken back). A pass reads the
-- due rows of each gateway in this index's order, those with no capture first, so it reads
-- about as many rows as it claims.
ALTER TABLE payhooks_reconcile ADD COLUMN IF NOT EXISTS captured boolean NOT NULL DEFAULT false;
CREATE INDEX IF NOT EXISTS payhooks_reconcile_due
    ON payhooks_reconcile (provider, captured, next_attempt_at, gateway_order_id);

-- The amount mismatches not yet resolved, by the order they name: the purge keeps the
-- expectation of each (payhooks.retention).
CREATE INDEX IF NOT EXISTS payhooks_amount_mismatches_unresolved_order
    ON payhooks_amount_mismatches (provider, gateway_order_id) WHERE resolved_at IS NULL;

-- The amount mismatches not yet resolved, by the payment they name: a refund of such a payment
-- is parked beside it (payhooks.expectations.checking), one lookup per refund.
CREATE INDEX IF NOT EXISTS payhooks_amount_mismatches_unresolved_payment
    ON payhooks_amount_mismatches (provider, payment_id) WHERE resolved_at IS NULL;
