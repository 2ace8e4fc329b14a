-- payhooks core, version 4: every delivery found by the gateway reference it names.

-- The console's timelines look deliveries up by (provider, merchant_ref) whatever their
-- outcome; the index of version 2 holds parked deliveries only, so each lookup read the whole
-- table (90 days of deliveries). A plain CREATE INDEX, in the migration's transaction: writes
-- to the table wait while it is built.
CREATE INDEX processed_webhooks_merchant_ref ON processed_webhooks (provider, merchant_ref)
    WHERE merchant_ref IS NOT NULL;
