-- payhooks core, version 36: a payment's record keeps the references it is searched by.
--
-- The timeline's search (payhooks.operations.timeline.find: the console's search box, the
-- Django admin's Payment timeline, the JSON timeline routes) found a payment by the merchant's
-- reference and by its bank reference (UTR/RRN) only through the stored deliveries
-- (processed_webhooks.order_ref, bank_ref) and the expectation (payhooks_expectations.reference),
-- which the retention purge deletes after the window, while a captured payment's record is kept
-- for a refund's year: for those months what an operator mostly holds found nothing. The record
-- now keeps them:
--   reference  what the merchant gave payhooks.expect for its order, copied from the
--              expectation by the lookup version 29's trigger already makes, on every path;
--   order_ref  the order the merchant's handler answered for it, written with the delivery's
--              own record (idempotency.RECORD_WITH_PAYMENT; the reference shop's
--              shop_first_capture writes it in its insert);
--   bank_ref   the payment's bank reference as its delivery reported it, written in the claim.
--
-- The columns and indexes are made only where missing, looked up first: ALTER TABLE ... ADD
-- COLUMN IF NOT EXISTS and CREATE INDEX IF NOT EXISTS lock the whole table (every capture's
-- claim) before they find there is nothing to do, and the migration holds its locks until it
-- commits, through the backfill. With the columns and indexes made beforehand (docs/
-- operations.md, "Upgrading"), the backfill locks only the rows it fills.
DO $$
BEGIN
    IF NOT EXISTS (SELECT FROM pg_attribute WHERE attrelid = 'payhooks_payments'::regclass
                   AND attname IN ('reference', 'order_ref', 'bank_ref') AND NOT attisdropped
                   HAVING count(*) = 3) THEN
        ALTER TABLE payhooks_payments ADD COLUMN IF NOT EXISTS reference text,
            ADD COLUMN IF NOT EXISTS order_ref text, ADD COLUMN IF NOT EXISTS bank_ref text;
    END IF;
END
$$;

-- Version 29's trigger function, reading the reference in the same lookup; one the insert
-- names is kept.
CREATE OR REPLACE FUNCTION payhooks_payment_expected() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    expected_reference text;
BEGIN
    IF NEW.expected_paise IS NULL AND NEW.gateway_order_id IS NOT NULL THEN
        SELECT e.amount_paise, e.currency, e.reference
        INTO NEW.expected_paise, NEW.expected_currency, expected_reference
        FROM payhooks_expectations e
        WHERE e.provider = NEW.provider AND e.gateway_order_id = NEW.gateway_order_id;
        NEW.reference := coalesce(NEW.reference, expected_reference);
    END IF;
    RETURN NEW;
END
$$;

-- The records written before this version, from what is still kept: their delivery's record,
-- their order's expectation.
UPDATE payhooks_payments p
SET order_ref = coalesce(p.order_ref, w.order_ref), bank_ref = coalesce(p.bank_ref, w.bank_ref)
FROM processed_webhooks w
WHERE w.provider = p.provider AND w.event_id = p.event_id
  AND (w.order_ref IS NOT NULL OR w.bank_ref IS NOT NULL);
UPDATE payhooks_payments p SET reference = e.reference
FROM payhooks_expectations e
WHERE e.provider = p.provider AND e.gateway_order_id = p.gateway_order_id
  AND p.reference IS NULL AND e.reference IS NOT NULL;

-- One index each, holding only the records that name one (a record is kept a year: the
-- search reads one entry, never the table).
DO $$
DECLARE
    wanted text;
BEGIN
    FOREACH wanted IN ARRAY ARRAY['reference', 'order_ref', 'bank_ref'] LOOP
        IF to_regclass(format('%I', 'payhooks_payments_' || wanted)) IS NULL THEN
            EXECUTE format('CREATE INDEX %I ON payhooks_payments (%I) WHERE %I IS NOT NULL',
                           'payhooks_payments_' || wanted, wanted, wanted);
        END IF;
    END LOOP;
END
$$;
