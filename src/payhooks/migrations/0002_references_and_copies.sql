-- payhooks core, version 2: references and one record per body.

-- The reference the gateway echoes back from checkout, kept with the delivery, so the worker
-- finds every parked delivery whose checkout now exists however many others stay parked.
ALTER TABLE processed_webhooks ADD COLUMN merchant_ref text;
CREATE INDEX processed_webhooks_parked_ref ON processed_webhooks (provider, merchant_ref)
    WHERE outcome = 'parked';

-- One record per authentic body: a gateway's key headers are not signed, so the same bytes
-- replayed under a new key are the same delivery (answered duplicate, stored once). Copies
-- recorded before this version are kept, marked, and left out of the rule.
ALTER TABLE processed_webhooks ADD COLUMN first_copy boolean NOT NULL DEFAULT true;
UPDATE processed_webhooks p SET first_copy = false
FROM (
    SELECT provider, event_id,
           row_number() OVER (PARTITION BY provider, payload_sha256
                              ORDER BY processed_at, event_id) AS n
    FROM processed_webhooks
) later
WHERE later.n > 1 AND p.provider = later.provider AND p.event_id = later.event_id;
CREATE UNIQUE INDEX processed_webhooks_one_body ON processed_webhooks (provider, payload_sha256)
    WHERE first_copy;
