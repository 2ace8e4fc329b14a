-- payhooks core, version 1: the claim.

-- One row per delivery key: the claim. The design's columns and key, plus what tracing and
-- replay need.
CREATE TABLE processed_webhooks (
    provider        text        NOT NULL,
    event_id        text        NOT NULL,
    order_ref       text,
    processed_at    timestamptz NOT NULL DEFAULT now(),
    event_type      text        NOT NULL,
    outcome         text        NOT NULL CHECK (outcome IN ('processed', 'ignored', 'parked')),
    payment_id      text,
    payload_sha256  text        NOT NULL,
    body            bytea       NOT NULL,
    headers         jsonb       NOT NULL DEFAULT '{}',
    mismatches      integer     NOT NULL DEFAULT 0,
    last_mismatch_at timestamptz,
    PRIMARY KEY (provider, event_id)
);
CREATE INDEX processed_webhooks_processed_at ON processed_webhooks (processed_at);
CREATE INDEX processed_webhooks_payment ON processed_webhooks (provider, payment_id)
    WHERE payment_id IS NOT NULL;
CREATE INDEX processed_webhooks_order_ref ON processed_webhooks (order_ref)
    WHERE order_ref IS NOT NULL;
CREATE INDEX processed_webhooks_parked ON processed_webhooks (processed_at)
    WHERE outcome = 'parked';
