-- payhooks core, version 43: a gateway order's refunds found through an index.
--
-- An order's story (the console's order page, Django's admin timeline, the JSON routes) names
-- the payments its refunds name (payhooks.operations.timeline), so that the refunds of a
-- payment whose record a refund's year purged are still told with their order. Refunds are
-- kept for good: without the index every order told would read them all.
CREATE INDEX IF NOT EXISTS payhooks_refunds_order ON payhooks_refunds (provider, gateway_order_id)
    WHERE gateway_order_id IS NOT NULL;
