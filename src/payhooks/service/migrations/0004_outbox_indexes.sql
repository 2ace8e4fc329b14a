-- payhooks reference shop, version 4: the outbox's sent and dead rows are found without a scan
-- (retention deletes old sent rows; /metrics counts dead letters on every scrape).
CREATE INDEX outbox_sent_at ON outbox (sent_at) WHERE sent_at IS NOT NULL;
CREATE INDEX outbox_failed_at ON outbox (failed_at) WHERE failed_at IS NOT NULL;
