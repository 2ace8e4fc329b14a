-- payhooks core, version 5: what the merchant expects, and reconciliation's bookkeeping.

-- One row per gateway order the merchant created (payhooks.expect, in the merchant's own
-- transaction): the amount and currency it must be paid, and the merchant's own reference.
-- Every payment authorised or captured for it is checked against it before any handler runs,
-- and reconciliation asks the gateways about the ones whose payment never came.
CREATE TABLE payhooks_expectations (
    provider         text        NOT NULL,
    gateway_order_id text        NOT NULL,
    amount_paise     bigint      NOT NULL CHECK (amount_paise >= 0),
    currency         text        NOT NULL,
    reference        text        NOT NULL,
    created_at       timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (provider, gateway_order_id)
);
CREATE INDEX payhooks_expectations_created_at ON payhooks_expectations (created_at);
CREATE INDEX payhooks_expectations_reference ON payhooks_expectations (reference);

-- A payment whose amount or currency is not what was expected: its delivery is parked, never
-- handed to a handler as a payment, and waits here, with both amounts, for a person, who
-- refunds it and resolves it (the delivery then recorded ignored, with their words), or
-- corrects the expectation and replays it.
CREATE TABLE payhooks_amount_mismatches (
    provider          text        NOT NULL,
    event_id          text        NOT NULL,
    gateway_order_id  text        NOT NULL,
    payment_id        text,
    expected_paise    bigint      NOT NULL,
    expected_currency text        NOT NULL,
    paid_paise        bigint,
    paid_currency     text,
    found_at          timestamptz NOT NULL DEFAULT now(),
    alerted_at        timestamptz,
    resolved_at       timestamptz,
    resolution        text,
    PRIMARY KEY (provider, event_id),
    FOREIGN KEY (provider, event_id) REFERENCES processed_webhooks (provider, event_id)
        ON DELETE CASCADE
);
CREATE INDEX payhooks_amount_mismatches_unalerted ON payhooks_amount_mismatches (found_at)
    WHERE alerted_at IS NULL;

-- One row per payment authorised or captured that reached a handler: the payment's own key, so
-- a payment reconciliation found and a webhook that brings it later (or the other way round)
-- reach the merchant's handler once. Inserted before the handler runs, removed again in the
-- same transaction when the handler does not apply it: a twin waits on the row, then finds it.
CREATE TABLE payhooks_payments (
    provider         text        NOT NULL,
    payment_id       text        NOT NULL,
    kind             text        NOT NULL,
    gateway_order_id text,
    event_id         text        NOT NULL,
    reconciled       boolean     NOT NULL,
    applied_at       timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (provider, payment_id, kind)
);

-- One row per expected checkout reconciliation has looked at: when to ask again, how often it
-- asked, the last error, and when the gateway said the checkout expired (reported, never acted
-- on). A pass claims a due row by pushing next_attempt_at forward (a lease), so two workers
-- never ask about the same checkout at once.
CREATE TABLE payhooks_reconcile (
    provider            text        NOT NULL,
    gateway_order_id    text        NOT NULL,
    attempts            integer     NOT NULL DEFAULT 0,
    next_attempt_at     timestamptz NOT NULL DEFAULT now(),
    last_attempt_at     timestamptz,
    last_error          text,
    expired_reported_at timestamptz,
    PRIMARY KEY (provider, gateway_order_id),
    FOREIGN KEY (provider, gateway_order_id)
        REFERENCES payhooks_expectations (provider, gateway_order_id) ON DELETE CASCADE
);

-- Running totals per gateway, read by the metrics and health views whichever process did the
-- work; refused_since and refused_reason say since when the gateway refuses the API
-- credentials, NULL while they work.
CREATE TABLE payhooks_reconcile_totals (
    provider       text   PRIMARY KEY,
    examined       bigint NOT NULL DEFAULT 0,
    recovered      bigint NOT NULL DEFAULT 0,
    api_errors     bigint NOT NULL DEFAULT 0,
    expired        bigint NOT NULL DEFAULT 0,
    refused_since  timestamptz,
    refused_reason text
);
