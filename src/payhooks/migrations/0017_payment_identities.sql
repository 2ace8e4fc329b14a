-- payhooks core, version 16: a payment's identities and what the customer paid, kept in its
-- own record (payhooks_payments), which the purge keeps while a refund of it is possible; a
-- refund reads them there, never from the stored deliveries (processed_webhooks), which go
-- after the retention window.

-- attempt_id: the gateway's own id of the payment attempt where payhooks keys the payment by
-- another (PayU's mihpayid; payment_id is then the txnid). paid_paise and currency: what the
-- customer paid for this payment (Cashfree's payment_amount, not the amount compared with the
-- order), the bound on its refunds.
ALTER TABLE payhooks_payments ADD COLUMN IF NOT EXISTS attempt_id text;
ALTER TABLE payhooks_payments ADD COLUMN IF NOT EXISTS paid_paise bigint;
ALTER TABLE payhooks_payments ADD COLUMN IF NOT EXISTS currency text;

-- A refund intent names the payment attempt it refunds (PayU's mihpayid), as the gateway's
-- refund call needs it.
ALTER TABLE payhooks_refunds ADD COLUMN IF NOT EXISTS attempt_id text;

-- Existing records, from their deliveries while these are still stored: the order, and what a
-- webhook's body says was paid. A body that does not read leaves the figures unknown (NULL):
-- the caller's own figure is then the bound, as before.
CREATE FUNCTION pg_temp.payhooks_paid(provider text, body bytea, OUT paid bigint,
                                      OUT currency text, OUT attempt text)
LANGUAGE plpgsql AS $$
DECLARE
    doc jsonb;
    form text;
BEGIN
    IF provider = 'payu' THEN
        form := convert_from(body, 'UTF8');
        paid := round((substring(form FROM '(?:^|&)amount=([0-9]+(?:\.[0-9]{1,2})?)(?:&|$)'))::numeric * 100);
        attempt := nullif(substring(form FROM '(?:^|&)mihpayid=([A-Za-z0-9_-]+)(?:&|$)'), '');
        currency := 'INR';
        RETURN;
    END IF;
    doc := convert_from(body, 'UTF8')::jsonb;
    IF provider = 'razorpay' THEN
        paid := (doc #>> '{payload,payment,entity,amount}')::bigint;
        currency := doc #>> '{payload,payment,entity,currency}';
    ELSIF provider = 'cashfree' THEN
        paid := round((doc #>> '{data,payment,payment_amount}')::numeric * 100);
        currency := doc #>> '{data,order,order_currency}';
    ELSIF provider = 'phonepe' THEN
        paid := (doc #>> '{payload,amount}')::bigint;
        currency := 'INR';
    END IF;
EXCEPTION WHEN others THEN
    paid := NULL;
    currency := NULL;
    attempt := NULL;
END;
$$;

UPDATE payhooks_payments p
SET gateway_order_id = coalesce(p.gateway_order_id, w.merchant_ref),
    paid_paise = coalesce(p.paid_paise, f.paid),
    currency = coalesce(p.currency, f.currency),
    attempt_id = coalesce(p.attempt_id, f.attempt)
FROM processed_webhooks w
CROSS JOIN LATERAL pg_temp.payhooks_paid(
    CASE WHEN w.event_id LIKE 'reconcile:%' THEN '' ELSE w.provider END, w.body) f
WHERE w.provider = p.provider AND w.event_id = p.event_id;

DROP FUNCTION pg_temp.payhooks_paid(text, bytea);

-- An intent written before, for a payment whose record names its attempt.
UPDATE payhooks_refunds r SET attempt_id = p.attempt_id
FROM payhooks_payments p
WHERE r.attempt_id IS NULL AND p.provider = r.provider AND p.payment_id = r.payment_id
  AND p.kind = 'payment_captured' AND p.attempt_id IS NOT NULL;
