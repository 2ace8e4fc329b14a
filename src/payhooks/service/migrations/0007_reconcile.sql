-- payhooks reference shop, version 7: reconciliation asks the gateways about checkouts whose
-- webhook never came (docs/design.md, "Reconciliation").

-- One row per checkout reconciliation has looked at: when to ask again, how often it asked,
-- the last error, and when the gateway said the checkout expired (reported, never acted on).
-- A pass claims a due row by pushing next_attempt_at forward (a lease), so two workers never
-- ask about the same checkout at once.
CREATE TABLE reconcile_checkouts (
    provider            text        NOT NULL,
    gateway_order_id    text        NOT NULL,
    attempts            integer     NOT NULL DEFAULT 0,
    next_attempt_at     timestamptz NOT NULL DEFAULT now(),
    last_attempt_at     timestamptz,
    last_error          text,
    expired_reported_at timestamptz,
    PRIMARY KEY (provider, gateway_order_id),
    FOREIGN KEY (provider, gateway_order_id) REFERENCES checkouts (provider, gateway_order_id)
);

-- Running totals per gateway, read by /metrics whichever worker did the work.
CREATE TABLE reconcile_totals (
    provider   text   PRIMARY KEY,
    examined   bigint NOT NULL DEFAULT 0,
    recovered  bigint NOT NULL DEFAULT 0,
    api_errors bigint NOT NULL DEFAULT 0,
    expired    bigint NOT NULL DEFAULT 0
);
