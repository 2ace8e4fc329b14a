-- payhooks core, version 12: refunds sent to the gateway exactly once (payhooks.refunds).

-- One row per refund asked for: an intent, written in the caller's transaction with a stable
-- idempotency key, then sent by a sender (payhooks.refunds.send_due) that retries timeouts,
-- 409s and 5xx with the same key and body, so the gateway refunds it once however often it is
-- asked. What the gateway answered, and what its refund webhooks later said, close it.
CREATE TABLE IF NOT EXISTS payhooks_refunds (
    provider          text        NOT NULL,
    idempotency_key   text        NOT NULL,
    payment_id        text        NOT NULL,
    gateway_order_id  text,
    amount_paise      bigint      NOT NULL CHECK (amount_paise > 0),
    currency          text        NOT NULL,
    captured_paise    bigint      NOT NULL CHECK (captured_paise > 0),
    reason            text        NOT NULL,
    requested_by      text        NOT NULL,
    state             text        NOT NULL DEFAULT 'requested'
        CHECK (state IN ('requested', 'sent', 'processed', 'failed', 'refused')),
    gateway_refund_id text,
    attempts          integer     NOT NULL DEFAULT 0,
    next_attempt_at   timestamptz NOT NULL DEFAULT now(),
    last_error        text,
    requested_at      timestamptz NOT NULL DEFAULT now(),
    sent_at           timestamptz,
    settled_at        timestamptz,
    PRIMARY KEY (provider, idempotency_key)
);
-- What a sender leases: the requested, by when they are due.
CREATE INDEX IF NOT EXISTS payhooks_refunds_due
    ON payhooks_refunds (provider, next_attempt_at) WHERE state = 'requested';
-- A payment's refunds: the bound on what may still be refunded, and the timeline.
CREATE INDEX IF NOT EXISTS payhooks_refunds_payment ON payhooks_refunds (provider, payment_id);
-- A refund webhook closes its intent by the gateway's refund id.
CREATE INDEX IF NOT EXISTS payhooks_refunds_gateway_id ON payhooks_refunds (provider, gateway_refund_id)
    WHERE gateway_refund_id IS NOT NULL;
