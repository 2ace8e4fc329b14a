-- payhooks core, version 39: a payment's record keeps the amount its order's expectation
-- names now.
--
-- Version 29's record keeps what its order was expected to be paid (expected_paise,
-- expected_currency: what the payments list and the order's page show once the purge has taken
-- the expectation), copied when the record was written: an expectation recorded after the
-- payment left it empty, and one corrected after it left the amount it replaced, so the amount
-- shown changed at the purge. payhooks.expect now writes it on the records of the order's
-- payments in the statement that records or corrects the expectation, as version 37 the
-- reference (payhooks.intake.expectations.EXPECT); the records written before are corrected
-- here from the expectations still kept, each read once, only those keeping another amount
-- written.
UPDATE payhooks_payments p
SET expected_paise = e.amount_paise, expected_currency = e.currency
FROM payhooks_expectations e
WHERE e.provider = p.provider AND e.gateway_order_id = p.gateway_order_id
  AND (p.expected_paise, p.expected_currency) IS DISTINCT FROM (e.amount_paise, e.currency);
