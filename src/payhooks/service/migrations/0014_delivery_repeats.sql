-- payhooks reference shop, version 14: the delivery log's repeats column, as the core's
-- version 9 makes it.

-- The core's migrations run before the shop's: on a database the shop's version 12 had not yet
-- reached, the core's 9 gave repeats to the table 12 then dropped for the shop's own log. So the
-- shop gives it again; where the core's 9 ran on the shop's log already, this finds it there.
ALTER TABLE payhooks_deliveries ADD COLUMN IF NOT EXISTS repeats integer NOT NULL DEFAULT 1;
ALTER TABLE payhooks_deliveries DROP CONSTRAINT IF EXISTS payhooks_deliveries_repeats;
ALTER TABLE payhooks_deliveries
    ADD CONSTRAINT payhooks_deliveries_repeats CHECK (repeats >= 1) NOT VALID;
