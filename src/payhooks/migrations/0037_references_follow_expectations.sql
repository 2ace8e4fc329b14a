-- payhooks core, version 37: a payment's record keeps the merchant's reference its order's
-- expectation names now.
--
-- Version 36's record keeps the reference the timeline's search finds a payment by once the
-- purge has taken its delivery and expectation (payhooks_payments.reference), copied when the
-- record was written: an expectation recorded after the payment (an order expected late) left
-- it empty, and one corrected after it left the reference it replaced. payhooks.expect now
-- writes the reference on the records of the order's payments in the statement that records or
-- corrects the expectation (payhooks.intake.expectations.EXPECT); the records written before
-- are corrected here from the expectations still kept. Each record and expectation is read
-- once; only the records naming another reference are written (each row lock held until the
-- migration commits: a copy of that payment's capture arriving meanwhile waits).
UPDATE payhooks_payments p SET reference = e.reference
FROM payhooks_expectations e
WHERE e.provider = p.provider AND e.gateway_order_id = p.gateway_order_id
  AND p.reference IS DISTINCT FROM e.reference;
