-- payhooks core, version 9: a line of the delivery log says how many requests it stands for.

-- A request refused before it was proven authentic is one line, up to the first few of its kind
-- (gateway, status, answer) in a minute; the rest of that minute are one line whose repeats
-- says how many (payhooks.deliverylog). So a forged-request flood costs a few rows a minute,
-- and every reading of the log counts sum(repeats), never rows. Authentic lines are always 1.
-- The default fills the column without rewriting the table; the check is added NOT VALID so
-- a long log is not read under this migration's lock (every line already holds 1), and it
-- holds for every line written after.
ALTER TABLE payhooks_deliveries ADD COLUMN IF NOT EXISTS repeats integer NOT NULL DEFAULT 1;
ALTER TABLE payhooks_deliveries DROP CONSTRAINT IF EXISTS payhooks_deliveries_repeats;
ALTER TABLE payhooks_deliveries
    ADD CONSTRAINT payhooks_deliveries_repeats CHECK (repeats >= 1) NOT VALID;
