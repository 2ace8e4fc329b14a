-- payhooks core, version 31: how far each gateway's settlement report was read whole
-- (payhooks.settlements.reads, docs/design.md, "Settlements").
--
-- One row per gateway: read_through is the last day (India's) its report was read whole, with
-- every day after the first one read also read whole; a day counts once it is over when it is
-- read. A fetch read whole moves it on when its range starts no later than the day after it,
-- never back; a fetch that leaves days unread between leaves it where it is. The worker
-- fetches from the day after it, so days it missed (a gateway outage, the worker down) are
-- read when it can again; the settlements review flags a capture unsettled only when its
-- whole cycle and margin lie on days read. Never purged: one row per gateway.
CREATE TABLE IF NOT EXISTS payhooks_settlement_reads (
    provider     text        PRIMARY KEY,
    read_through date        NOT NULL,
    read_at      timestamptz NOT NULL DEFAULT now()
);
