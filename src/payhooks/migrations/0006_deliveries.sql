-- payhooks core, version 6: every webhook request as it was answered, for health and timelines.

-- Written by each door (the reference service, FastAPI or Starlette, Flask, Django) in batches
-- after the answer, on a connection of its own (payhooks.deliverylog); what took effect stays
-- in processed_webhooks. A refused request keeps no body and no field it claimed about itself
-- (it was not proven authentic): only its size and hash.
CREATE TABLE IF NOT EXISTS payhooks_deliveries (
    id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    received_at  timestamptz NOT NULL,
    provider     text        NOT NULL,
    status       smallint    NOT NULL,
    outcome      text        NOT NULL,
    verified     boolean     NOT NULL,
    event_id     text,
    event_type   text,
    payment_id   text,
    merchant_ref text,
    mismatch     boolean     NOT NULL DEFAULT false,
    body_bytes   integer     NOT NULL,
    body_sha256  text,
    detail       text,
    duration_ms  real        NOT NULL
);
CREATE INDEX IF NOT EXISTS payhooks_deliveries_received_at ON payhooks_deliveries (received_at);
CREATE INDEX IF NOT EXISTS payhooks_deliveries_reference ON payhooks_deliveries (provider, merchant_ref)
    WHERE merchant_ref IS NOT NULL;
CREATE INDEX IF NOT EXISTS payhooks_deliveries_payment ON payhooks_deliveries (provider, payment_id)
    WHERE payment_id IS NOT NULL;
CREATE INDEX IF NOT EXISTS payhooks_deliveries_key ON payhooks_deliveries (provider, event_id)
    WHERE event_id IS NOT NULL;
-- When each gateway was last answered 2xx: one read of this index per gateway, never a scan.
CREATE INDEX IF NOT EXISTS payhooks_deliveries_answered ON payhooks_deliveries (provider, received_at)
    WHERE status < 300;
