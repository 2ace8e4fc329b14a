-- payhooks core, version 41: a refund intent names its payment's order.
--
-- A refund asked by its payment alone now takes its order from payhooks' record of the payment
-- at every gateway (it did only where the refund call needs one), so the processed refund the
-- sender hands the app's REFUND_PROCESSED handler names the order as the refund's webhook does
-- (payhooks.refunding.refunds.requesting). The intents written before, naming none, take it
-- here from the same record: one in flight across the upgrade would otherwise still reach the
-- handler with no order.
UPDATE payhooks_refunds r SET gateway_order_id = p.gateway_order_id
FROM payhooks_payments p
WHERE r.gateway_order_id IS NULL
  AND p.provider = r.provider AND p.payment_id = r.payment_id
  AND p.kind = 'payment_captured' AND p.gateway_order_id IS NOT NULL;
