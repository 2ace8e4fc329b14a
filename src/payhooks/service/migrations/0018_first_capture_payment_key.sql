-- payhooks reference shop, version 17: the one-statement first capture claims the payment's
-- own key.
--
-- shop_first_capture (migration 0008) wrote the delivery's claim but not the payment's row in
-- payhooks_payments, the business key the general path claims insert-first
-- (expectations.CLAIM_PAYMENT) right after the delivery's. So reconciliation's delivery of a
-- payment this path applied found the key free and applied the payment again (processed, where
-- it must answer duplicate with the first delivery's order). The function now claims that key
-- at the same point, taking the same lock on the expectation, and declines (PH001, nothing
-- kept) when the key is taken or the expectation is not met: the general path decides those.
-- tests/integration/test_first_capture.py compares the two paths row by row, this table too.
-- It also writes the payment's record as expectations.CLAIM_PAYMENT does (its attempt, what
-- was paid, the currency: what refunds read once the deliveries are purged). A payment parked
-- for its amount holds its key, so this path declines it and never leaves its mismatch open.
-- This migration made the function so; 0021 makes it as it is now, whole, so the version
-- made here is no longer written out: only the earlier one is dropped.
DROP FUNCTION IF EXISTS shop_first_capture(
    text, text, text, text, text, text, text, bytea, jsonb, bigint, bigint, text,
    text, text, text, text, jsonb);

-- The payments this path applied before, given the key it did not write (as 0011 carried the
-- shop's captured payments over), so reconciliation finds them applied.
INSERT INTO payhooks_payments
    (provider, payment_id, kind, gateway_order_id, event_id, reconciled, applied_at,
     paid_paise, currency)
SELECT p.provider, p.payment_id, 'payment_captured', c.gateway_order_id,
    coalesce(o.event_id, 'shop:' || p.payment_id), coalesce(o.event_id LIKE 'reconcile:%', false),
    p.captured_at, coalesce(p.payment_amount_paise, p.amount_paise), coalesce(p.currency, 'INR')
FROM payments p
LEFT JOIN checkouts c ON c.cart_id = p.cart_id AND c.provider = p.provider
LEFT JOIN orders o ON o.provider = p.provider AND o.payment_id = p.payment_id
WHERE p.captured_at IS NOT NULL
ON CONFLICT DO NOTHING;
