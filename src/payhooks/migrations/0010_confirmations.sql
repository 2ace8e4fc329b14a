-- payhooks core, version 10: callbacks whose content rests on a static credential (PhonePe's
-- SHA256(username:password) header, Juspay's Basic credentials, PayU's unsigned refund
-- callbacks) take effect only as the gateway's status API confirms them (payhooks.confirmations).

-- One row per such callback: what it claimed, and what the API said. The callback's own record
-- in processed_webhooks is 'confirming' until then, 'confirmed' or 'refuted' after; what the
-- API reports is applied under its own keys (reconcile:<payment>:<status>), exactly once with
-- any webhook, by the same path as reconciliation.
CREATE TABLE IF NOT EXISTS payhooks_confirmations (
    provider         text        NOT NULL,
    event_id         text        NOT NULL,
    gateway_order_id text        NOT NULL,
    kind             text        NOT NULL,
    payment_id       text,
    refund_id        text,
    amount_paise     bigint,
    requested_at     timestamptz NOT NULL DEFAULT now(),
    next_attempt_at  timestamptz NOT NULL DEFAULT now(),
    attempts         integer     NOT NULL DEFAULT 0,
    last_error       text,
    verdict          text        CHECK (verdict IN ('confirmed', 'refuted')),
    detail           text,
    settled_at       timestamptz,
    PRIMARY KEY (provider, event_id),
    FOREIGN KEY (provider, event_id) REFERENCES processed_webhooks (provider, event_id)
        ON DELETE CASCADE
);
-- What a pass leases: the unsettled, by when they are due.
CREATE INDEX IF NOT EXISTS payhooks_confirmations_due
    ON payhooks_confirmations (provider, next_attempt_at) WHERE verdict IS NULL;

-- The callback's own record: 'confirming' until the API's word, then 'confirmed' or 'refuted'.
-- NOT VALID: every existing row holds one of the older three, and checking it would read the
-- whole table under the migration's lock.
ALTER TABLE processed_webhooks DROP CONSTRAINT IF EXISTS processed_webhooks_outcome_check;
ALTER TABLE processed_webhooks ADD CONSTRAINT processed_webhooks_outcome_check
    CHECK (outcome IN ('processed', 'ignored', 'parked', 'confirming', 'confirmed', 'refuted'))
    NOT VALID;
