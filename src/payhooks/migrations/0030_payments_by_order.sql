-- payhooks core, version 30: a payment's record is found by its gateway order.
--
-- A captured payment's record (payhooks_payments) is kept for a refund's year, past the
-- retention window that purges its deliveries and its order's expectation. The console's
-- payments list links each payment to its order's timeline, which found the order only
-- through those purged tables: after the purge the link answered 404, and a search for the
-- order found nothing. The timeline and the search now read the record too, through this
-- index (one entry a payment; a record that names no order has none).
CREATE INDEX IF NOT EXISTS payhooks_payments_order ON payhooks_payments (provider, gateway_order_id)
    WHERE gateway_order_id IS NOT NULL;
