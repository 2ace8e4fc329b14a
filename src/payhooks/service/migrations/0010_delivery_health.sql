-- payhooks reference shop, version 10: when each gateway was last answered 2xx.

-- The console's health page shows it per gateway however long ago it was (a gateway failing
-- for a day, or one the shop does not use): one read of this index, never a scan of the log.
-- Built first with CREATE INDEX CONCURRENTLY under this name on a big log, it is left as it is
-- (docs/operations.md, "Upgrading").
CREATE INDEX IF NOT EXISTS deliveries_answered ON deliveries (provider, received_at) WHERE status < 300;
