-- Shop, version 16: what the console looks up beyond exact identifiers.
-- A customer found by the first few characters of their email (lower(customer_email) LIKE
-- 'alice.5e%'): text_pattern_ops makes that prefix an index range whatever the database's
-- collation; the existing index serves the exact match.
CREATE INDEX IF NOT EXISTS carts_customer_email_prefix ON carts (lower(customer_email) text_pattern_ops);
-- The open carts a parked delivery may pay (same amount, opened in the day before it): a
-- partial index, as small as the carts still open.
CREATE INDEX IF NOT EXISTS carts_open_created_at ON carts (created_at) WHERE status = 'open';
