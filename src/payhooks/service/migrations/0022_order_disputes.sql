-- Shop, version 21: an order whose payment is disputed is marked with where the dispute
-- stands (payhooks' word: opened, under_review, action_required, won, lost, closed) and its
-- id at the gateway. The dispute itself is the core's (payhooks_disputes, core version 22),
-- recorded once and in order; only a report that moves it reaches the shop.
ALTER TABLE orders ADD COLUMN IF NOT EXISTS dispute text
    CHECK (dispute IN ('opened', 'under_review', 'action_required', 'won', 'lost', 'closed'));
ALTER TABLE orders ADD COLUMN IF NOT EXISTS dispute_id text;
