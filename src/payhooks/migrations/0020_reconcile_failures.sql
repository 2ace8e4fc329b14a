-- payhooks core: how many times in a row reconciliation failed on a checkout (its gateway's
-- API answered nothing useful, or the handler failed on what it reported), and since when, so
-- the reconcile_failing alert tells a person once the failures pass a bound. An attempt that
-- succeeds clears both.
ALTER TABLE payhooks_reconcile ADD COLUMN IF NOT EXISTS failures integer NOT NULL DEFAULT 0;
ALTER TABLE payhooks_reconcile ADD COLUMN IF NOT EXISTS failing_since timestamptz;

-- The alert reads only the failing rows, however many checkouts the window holds.
CREATE INDEX IF NOT EXISTS payhooks_reconcile_failing
    ON payhooks_reconcile (provider, last_attempt_at) WHERE failures > 0;
