-- payhooks reference shop, version 9: a gateway refusing reconciliation's API credentials
-- (a 401 or 403, PayU's "Invalid Hash.") reaches an operator (docs/operations.md).

-- Since when the gateway refuses them, and its own words; NULL while they work. /readyz and
-- /metrics read it whichever worker saw the refusal, and an alert is queued once per episode.
ALTER TABLE reconcile_totals
    ADD COLUMN refused_since  timestamptz,
    ADD COLUMN refused_reason text;
