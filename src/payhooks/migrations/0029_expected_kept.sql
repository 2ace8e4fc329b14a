-- payhooks core, version 29: a payment's record keeps what its order was expected to be paid.
--
-- The payments list read the amount expected of a payment from its order's expectation
-- (payhooks_expectations), which the retention purge deletes after the window, while a
-- captured payment's record is kept for a refund's year: for those months the list showed no
-- expected amount. The record now carries it, copied from the expectation when the record is
-- written, or when it first learns its order (a claim's ON CONFLICT sets gateway_order_id), on
-- whichever path it is written (the claim, a merchant's own one-statement capture such as the
-- reference shop's): one lookup by the expectation's key.
ALTER TABLE payhooks_payments ADD COLUMN IF NOT EXISTS expected_paise bigint;
ALTER TABLE payhooks_payments ADD COLUMN IF NOT EXISTS expected_currency text;

CREATE OR REPLACE FUNCTION payhooks_payment_expected() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.expected_paise IS NULL AND NEW.gateway_order_id IS NOT NULL THEN
        SELECT e.amount_paise, e.currency INTO NEW.expected_paise, NEW.expected_currency
        FROM payhooks_expectations e
        WHERE e.provider = NEW.provider AND e.gateway_order_id = NEW.gateway_order_id;
    END IF;
    RETURN NEW;
END
$$;

-- A new record looks its expectation up once (version 27's trigger, its turn and lost
-- disputes, is left as it is); an update, only when the record first learns its order: a
-- duplicate's claim names gateway_order_id in its ON CONFLICT's SET (coalesce keeps it), and
-- would otherwise look again.
DROP TRIGGER IF EXISTS payhooks_payments_expected ON payhooks_payments;
CREATE TRIGGER payhooks_payments_expected
    BEFORE INSERT ON payhooks_payments
    FOR EACH ROW EXECUTE FUNCTION payhooks_payment_expected();
DROP TRIGGER IF EXISTS payhooks_payments_expected_order ON payhooks_payments;
CREATE TRIGGER payhooks_payments_expected_order
    BEFORE UPDATE OF gateway_order_id ON payhooks_payments
    FOR EACH ROW WHEN (OLD.gateway_order_id IS NULL AND NEW.gateway_order_id IS NOT NULL)
    EXECUTE FUNCTION payhooks_payment_expected();

-- The records written before this version whose expectation is still kept.
UPDATE payhooks_payments p
SET expected_paise = e.amount_paise, expected_currency = e.currency
FROM payhooks_expectations e
WHERE e.provider = p.provider AND e.gateway_order_id = p.gateway_order_id
  AND p.expected_paise IS NULL;
