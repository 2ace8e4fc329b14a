-- payhooks core, version 28: an amount mismatch outlives the purge of its delivery.
--
-- A payment parked for its amount and settled by a person (refunded or written off in the
-- gateway's dashboard, payhooks.resolve) never reached a handler: its row here is all the core
-- has of that payment. It referenced its delivery ON DELETE CASCADE, so the retention purge
-- took it with the delivery, and the payment left the console's payments list and its order's
-- timeline. The row carries everything it is read by (the gateway, the payment, its order, both
-- amounts and currencies, when it was found and how it was settled), so the reference goes and
-- the row stays: event_id keeps naming the delivery, which may be purged. (It cannot be SET
-- NULL: it is the row's own key.) Never purged: money data, as the settlements.
DO $$
DECLARE
    found text;
BEGIN
    FOR found IN
        SELECT conname FROM pg_constraint
        WHERE conrelid = 'payhooks_amount_mismatches'::regclass AND contype = 'f'
          AND confrelid = 'processed_webhooks'::regclass
    LOOP
        EXECUTE format('ALTER TABLE payhooks_amount_mismatches DROP CONSTRAINT %I', found);
    END LOOP;
END
$$;
-- The timeline finds a mismatch by its order or its payment, settled or not (the indexes of
-- versions 8 and 16 hold the unsettled ones alone).
CREATE INDEX IF NOT EXISTS payhooks_amount_mismatches_order
    ON payhooks_amount_mismatches (provider, gateway_order_id);
CREATE INDEX IF NOT EXISTS payhooks_amount_mismatches_payment
    ON payhooks_amount_mismatches (provider, payment_id);
