-- payhooks core, version 15: alerts that reach people (payhooks.alerts, docs/operations.md,
-- "Alerts").

-- One row per condition and what it concerns (a gateway, the outbox): the claim that makes an
-- alert sent once however many notifiers look. A notifier raises it by inserting the row, or
-- by reopening a resolved one; repeats it by pushing notified_at forward once it is older than
-- the repeat interval; resolves it by setting resolved_at. Each is one conditional write, and
-- only the notifier whose write took queues the notices, in the same transaction.
CREATE TABLE IF NOT EXISTS payhooks_alerts (
    key         text        PRIMARY KEY,
    condition   text        NOT NULL,
    subject     text        NOT NULL,
    title       text        NOT NULL,
    body        text        NOT NULL,
    raised_at   timestamptz NOT NULL,
    notified_at timestamptz NOT NULL,
    notices     integer     NOT NULL DEFAULT 1,
    resolved_at timestamptz
);
CREATE INDEX IF NOT EXISTS payhooks_alerts_open ON payhooks_alerts (condition)
    WHERE resolved_at IS NULL;

-- What is to be said, one row per notice and channel (email, webhook): sent after commit by
-- whichever notifier leases it (next_attempt_at pushed past the call), retried with backoff
-- while the channel fails, given up after a day (failed_at) so a channel gone for good does
-- not grow the table without end.
CREATE TABLE IF NOT EXISTS payhooks_alert_notices (
    id              bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    alert_key       text        NOT NULL REFERENCES payhooks_alerts (key) ON DELETE CASCADE,
    kind            text        NOT NULL CHECK (kind IN ('raised', 'repeated', 'resolved')),
    channel         text        NOT NULL,
    title           text        NOT NULL,
    body            text        NOT NULL,
    created_at      timestamptz NOT NULL,
    attempts        integer     NOT NULL DEFAULT 0,
    next_attempt_at timestamptz NOT NULL,
    last_error      text,
    sent_at         timestamptz,
    failed_at       timestamptz
);
CREATE INDEX IF NOT EXISTS payhooks_alert_notices_due ON payhooks_alert_notices (next_attempt_at)
    WHERE sent_at IS NULL AND failed_at IS NULL;
CREATE INDEX IF NOT EXISTS payhooks_alert_notices_alert ON payhooks_alert_notices (alert_key);
