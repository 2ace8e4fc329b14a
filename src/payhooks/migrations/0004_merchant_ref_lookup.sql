-- payhooks core, version 4: every delivery found by the gateway reference it names.

-- The console's timelines look deliveries up by (provider, merchant_ref) whatever their
-- outcome; the index of version 2 holds parked deliveries only, so each lookup read the whole
-- table (90 days of deliveries). Built in the migration's transaction, webhook inserts wait
-- while it is built (about 2 s per million rows): on a big table, build it first with
-- CREATE INDEX CONCURRENTLY IF NOT EXISTS under this very name (docs/operations.md,
-- "Upgrading"), and this finds it and does nothing.
CREATE INDEX IF NOT EXISTS processed_webhooks_merchant_ref ON processed_webhooks (provider, merchant_ref)
    WHERE merchant_ref IS NOT NULL;
