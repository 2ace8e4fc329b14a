-- payhooks core, version 32: where each gateway's days read whole begin
-- (payhooks.settlements.reads, docs/design.md, "Settlements").
--
-- read_from is the first day (India's) of the days read whole that end on read_through: set
-- by the first fetch read whole (its range's first day), moved back only by a fetch read
-- whole whose range meets or overlaps those days, never forward. The settlements review
-- flags a capture unsettled only when it was captured on or after read_from as well: a
-- capture of a day before it may have its payout on a day never read.
--
-- A row kept by version 31 knew its last day read whole only, not where reading began: its
-- read_from is that day, so no day before it is taken as read (a capture before it is not
-- flagged until a fetch reads those days; none is flagged on the word of days perhaps never
-- read). One row per gateway: the update and the NOT NULL check are instant.
ALTER TABLE payhooks_settlement_reads ADD COLUMN IF NOT EXISTS read_from date;
UPDATE payhooks_settlement_reads SET read_from = read_through WHERE read_from IS NULL;
ALTER TABLE payhooks_settlement_reads ALTER COLUMN read_from SET NOT NULL;
