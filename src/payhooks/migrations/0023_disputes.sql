-- payhooks core, version 22: disputes (payhooks.intake.disputes, docs/design.md, "Disputes").
-- One row per dispute a gateway reports, keyed by the gateway's own id, holding the state the
-- newest report in order put it in. A report is applied by one conditional upsert: it moves
-- the row only forward (a later phase of the chargeback process, or a later status in the same
-- phase: opened, then under review or action required, then won, lost or closed; two reports
-- of one open rank by the gateway's time), so a late or concurrent delivery of an earlier
-- report changes nothing, whatever order the deliveries take.

-- status: payhooks' word for where the dispute stands (opened, under_review, action_required,
-- won, lost, closed), status_rank its place (0 opened, 1 under review or action required,
-- 2 decided). phase: the gateway's stage (chargeback, pre_arbitration, ...), phase_rank its
-- place. gateway_status: the gateway's own word, as it came. reported_at: when the gateway
-- says the dispute reached this state. lost_paise: what a lost dispute took back (0 unless
-- lost). event_id: the delivery that put the row in this state. closed_at: when payhooks
-- recorded it decided.
CREATE TABLE IF NOT EXISTS payhooks_disputes (
    provider         text        NOT NULL,
    dispute_id       text        NOT NULL,
    payment_id       text,
    gateway_order_id text,
    status           text        NOT NULL
                     CHECK (status IN ('opened', 'under_review', 'action_required', 'won', 'lost',
                                       'closed')),
    status_rank      smallint    NOT NULL,
    phase            text,
    phase_rank       smallint    NOT NULL,
    gateway_status   text,
    amount_paise     bigint,
    currency         text,
    reason           text,
    respond_by       timestamptz,
    reported_at      timestamptz,
    lost_paise       bigint      NOT NULL DEFAULT 0 CHECK (lost_paise >= 0),
    event_id         text        NOT NULL,
    opened_at        timestamptz NOT NULL DEFAULT now(),
    updated_at       timestamptz NOT NULL DEFAULT now(),
    closed_at        timestamptz,
    PRIMARY KEY (provider, dispute_id)
);
-- The disputes still open, by deadline: the console's list, the alerts and the gauges.
CREATE INDEX IF NOT EXISTS payhooks_disputes_open
    ON payhooks_disputes (respond_by, provider) WHERE closed_at IS NULL;
-- A payment's disputes (its timeline, what its lost disputes took back) and an order's.
CREATE INDEX IF NOT EXISTS payhooks_disputes_payment
    ON payhooks_disputes (provider, payment_id) WHERE payment_id IS NOT NULL;
CREATE INDEX IF NOT EXISTS payhooks_disputes_order
    ON payhooks_disputes (provider, gateway_order_id) WHERE gateway_order_id IS NOT NULL;
-- The disputes lost lately, for their alert.
CREATE INDEX IF NOT EXISTS payhooks_disputes_lost
    ON payhooks_disputes (closed_at) WHERE status = 'lost';

-- What the payment's lost disputes took back, on the payment's record: the sum of their
-- lost_paise, written with each report that changes it.
ALTER TABLE payhooks_payments ADD COLUMN IF NOT EXISTS disputed_paise bigint NOT NULL DEFAULT 0;
