-- Shop, version 20: marking a cart paid is a HOT update.
-- The open carts a parked delivery may pay were found through a partial index on
-- (created_at) WHERE status = 'open' (version 16). A column in an index's predicate counts as
-- indexed, so every capture's `UPDATE carts SET status = 'paid'` wrote a new entry in each of
-- the table's four indexes (both lower(customer_email) ones included). The index now holds
-- every cart by its opening time, which the console's same-amount search reads a day of; with
-- room left on each page (fillfactor 90), the paid update stays on its page and touches no
-- index (docs/performance.md, "A new capture's PostgreSQL time").
DROP INDEX IF EXISTS carts_open_created_at;
CREATE INDEX IF NOT EXISTS carts_created_at ON carts (created_at);
ALTER TABLE carts SET (fillfactor = 90);
