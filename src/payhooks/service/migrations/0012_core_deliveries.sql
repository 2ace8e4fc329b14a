-- payhooks reference shop, version 12: the delivery log is the core's payhooks_deliveries.

-- The core's version 6 made payhooks_deliveries in this same migration, empty unless a door
-- wrote to it first: what it holds joins the shop's log, and the shop's log, renamed, becomes
-- the core's (no copy of 90 days of lines).
-- Both logs locked first: a door's line committing while this runs must not be dropped with
-- the table it went to.
LOCK TABLE payhooks_deliveries, deliveries IN ACCESS EXCLUSIVE MODE;
INSERT INTO deliveries (received_at, provider, status, outcome, verified, event_id, event_type,
                        payment_id, merchant_ref, mismatch, body_bytes, body_sha256, detail,
                        duration_ms)
SELECT received_at, provider, status, outcome, verified, event_id, event_type, payment_id,
       merchant_ref, mismatch, body_bytes, body_sha256, detail, duration_ms
FROM payhooks_deliveries ORDER BY id;
DROP TABLE payhooks_deliveries;
ALTER TABLE deliveries RENAME TO payhooks_deliveries;
ALTER TABLE payhooks_deliveries RENAME CONSTRAINT deliveries_pkey TO payhooks_deliveries_pkey;
ALTER SEQUENCE deliveries_id_seq RENAME TO payhooks_deliveries_id_seq;
ALTER INDEX deliveries_received_at RENAME TO payhooks_deliveries_received_at;
ALTER INDEX deliveries_reference RENAME TO payhooks_deliveries_reference;
ALTER INDEX deliveries_payment RENAME TO payhooks_deliveries_payment;
ALTER INDEX deliveries_key RENAME TO payhooks_deliveries_key;
ALTER INDEX deliveries_answered RENAME TO payhooks_deliveries_answered;
