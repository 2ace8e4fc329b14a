-- payhooks core, version 22: settlements (payhooks.settlements, docs/design.md,
-- "Settlements"): each payout a gateway made to the merchant's bank, the payments, refunds
-- and adjustments it covered with their fees and tax, matched to the payments payhooks
-- applied, and the captured payments not settled within their gateway's cycle. None of it is
-- purged: money data is kept for as long as the payments it names (and longer).

-- One row per payout, written by its webhook (settlement.processed, SETTLEMENT_SUCCESS, ...)
-- and by the reports (a line names its settlement before the payout's own figures are known:
-- those, and the gateway's own word for its state, stay NULL until a source states them).
-- state is ranked (pending, failed, settled, reversed): a source saying less never moves it
-- back.
CREATE TABLE IF NOT EXISTS payhooks_settlements (
    provider      text        NOT NULL,
    settlement_id text        NOT NULL,
    state         text        NOT NULL CHECK (state IN ('pending', 'failed', 'settled', 'reversed')),
    status        text,
    amount_paise  bigint,
    fees_paise    bigint,
    tax_paise     bigint,
    currency      text,
    utr           text,
    settled_at    timestamptz,
    recorded_at   timestamptz NOT NULL DEFAULT now(),
    updated_at    timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (provider, settlement_id)
);
-- The console's list and the CLI read settlements by the time they were paid out.
CREATE INDEX IF NOT EXISTS payhooks_settlements_settled_at
    ON payhooks_settlements (settled_at, provider, settlement_id);
CREATE INDEX IF NOT EXISTS payhooks_settlements_utr
    ON payhooks_settlements (utr) WHERE utr IS NOT NULL;

-- One row per entry of a payout, as the gateway's report lists it. net_paise is what the
-- line adds to the payout as the gateway states it (negative for a debit); fee and tax are
-- the gateway's own fields. matched: a payment payhooks applied (payhooks_payments) is the
-- one the line names, when it was recorded; NULL for a line that names no payment (an
-- adjustment of the account). A line found again is recorded once.
CREATE TABLE IF NOT EXISTS payhooks_settlement_lines (
    provider         text        NOT NULL,
    settlement_id    text        NOT NULL,
    entry_id         text        NOT NULL,
    kind             text        NOT NULL CHECK (kind IN ('payment', 'refund', 'adjustment')),
    entry_type       text        NOT NULL,
    payment_id       text,
    gateway_order_id text,
    amount_paise     bigint      NOT NULL,
    fee_paise        bigint      NOT NULL,
    tax_paise        bigint      NOT NULL,
    net_paise        bigint      NOT NULL,
    currency         text,
    occurred_at      timestamptz,
    matched          boolean,
    recorded_at      timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (provider, settlement_id, entry_id),
    FOREIGN KEY (provider, settlement_id) REFERENCES payhooks_settlements ON DELETE CASCADE
);
-- A payment's settlement (the timeline, the unsettled review), and a line to match again.
CREATE INDEX IF NOT EXISTS payhooks_settlement_lines_payment
    ON payhooks_settlement_lines (provider, payment_id) WHERE payment_id IS NOT NULL;
-- The lines that named no payment payhooks knew: the alert and the console's flag.
CREATE INDEX IF NOT EXISTS payhooks_settlement_lines_unmatched
    ON payhooks_settlement_lines (provider, recorded_at) WHERE matched = false;

-- A captured payment its gateway has not settled within its cycle and the margin
-- (PAYHOOKS_SETTLEMENT_MARGIN_HOURS), found by the settlements review (payhooks.settlements
-- .flags.review, run after each fetch) and deleted the moment a settled line names it. The
-- review reads payhooks_payments once per fetch; a capture's own insert is untouched.
CREATE TABLE IF NOT EXISTS payhooks_unsettled (
    provider         text        NOT NULL,
    payment_id       text        NOT NULL,
    gateway_order_id text,
    captured_at      timestamptz NOT NULL,
    due_at           timestamptz NOT NULL,
    flagged_at       timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (provider, payment_id)
);
