-- Shop, version 16: the console finds a customer by the first few characters of their email
-- (lower(customer_email) LIKE 'alice.5e%'). text_pattern_ops makes that prefix an index range
-- whatever the database's collation; the existing index serves the exact match.
CREATE INDEX IF NOT EXISTS carts_customer_email_prefix ON carts (lower(customer_email) text_pattern_ops);
