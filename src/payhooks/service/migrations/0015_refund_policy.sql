-- Shop, version 15: the payments flagged for a refund, read by the worker's double-payment
-- policy on every tick (PAYHOOKS_REFUND_DOUBLE_PAYMENTS): a small partial index, never a scan
-- of every payment.
CREATE INDEX IF NOT EXISTS payments_needing_refund ON payments (provider) WHERE needs_refund;
-- The worker's captures (PAYHOOKS_CAPTURE_AUTHORIZED): Razorpay payments authorised and not
-- captured, read on every tick through a partial index.
CREATE INDEX IF NOT EXISTS payments_authorized ON payments (created_at) WHERE status = 'authorized';
