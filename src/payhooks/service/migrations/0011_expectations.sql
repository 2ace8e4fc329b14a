-- payhooks reference shop, version 11: the shop's checkouts are the core's expectations.

-- The shop tells the core what each checkout must be paid (payhooks.expect, at checkout), as
-- a merchant's app does, so reconciliation and the amount check run on the core's tables
-- alone. What the shop knew before is carried over: each checkout's cart amount, what
-- reconciliation remembered about it, its totals, and the payments already captured.
INSERT INTO payhooks_expectations
    (provider, gateway_order_id, amount_paise, currency, reference, created_at)
SELECT c.provider, c.gateway_order_id, k.amount_paise, k.currency, c.cart_id, c.created_at
FROM checkouts c JOIN carts k ON k.id = c.cart_id
ON CONFLICT DO NOTHING;

INSERT INTO payhooks_reconcile
    (provider, gateway_order_id, attempts, next_attempt_at, last_attempt_at, last_error,
     expired_reported_at)
SELECT provider, gateway_order_id, attempts, next_attempt_at, last_attempt_at, last_error,
    expired_reported_at
FROM reconcile_checkouts
ON CONFLICT DO NOTHING;

INSERT INTO payhooks_reconcile_totals
    (provider, examined, recovered, api_errors, expired, refused_since, refused_reason)
SELECT provider, examined, recovered, api_errors, expired, refused_since, refused_reason
FROM reconcile_totals
ON CONFLICT DO NOTHING;

INSERT INTO payhooks_payments
    (provider, payment_id, kind, gateway_order_id, event_id, reconciled, applied_at)
SELECT p.provider, p.payment_id, 'payment_captured', c.gateway_order_id,
    coalesce(o.event_id, 'shop:' || p.payment_id), coalesce(o.event_id LIKE 'reconcile:%', false),
    p.captured_at
FROM payments p
LEFT JOIN checkouts c ON c.cart_id = p.cart_id AND c.provider = p.provider
LEFT JOIN orders o ON o.provider = p.provider AND o.payment_id = p.payment_id
WHERE p.captured_at IS NOT NULL
ON CONFLICT DO NOTHING;

DROP TABLE reconcile_checkouts;
DROP TABLE reconcile_totals;
