-- payhooks core, version 42: a failed or pending attempt reported once to the handlers.
--
-- A payment authorised or captured is claimed by its own key (payhooks_payments), so that its
-- webhook and reconciliation's report of it reach the handlers once. A failed or pending
-- attempt was not: its webhook (Cashfree's PAYMENT_FAILED_WEBHOOK, PayU's failure post) and the
-- pass's report of it under reconciliation's key (reconcile:<id>:FAILED) each reached the
-- handler, and a handler noting failures noted one twice. Each is claimed here by the attempt
-- and its kind: the later of a webhook and a reconciled report is answered duplicate
-- (payhooks.intake.expectations.reporting). An attempt is the payment id and, where the
-- gateway names attempts under one payment id (PayU's mihpayid under its txnid), the attempt:
-- a second attempt's failure is its own. The rows go with the deliveries (retention), but
-- while a parked delivery of the payment may be replayed or a callback of it waits.
CREATE TABLE IF NOT EXISTS payhooks_attempt_reports (
    provider    text        NOT NULL,
    payment_id  text        NOT NULL,
    kind        text        NOT NULL,
    attempt_id  text        NOT NULL DEFAULT '',
    event_id    text        NOT NULL,
    reconciled  boolean     NOT NULL,
    reported_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (provider, payment_id, kind, attempt_id)
);
CREATE INDEX IF NOT EXISTS payhooks_attempt_reports_reported_at
    ON payhooks_attempt_reports (reported_at);
