-- payhooks core, version 35: a settlement line is keyed by its type as well as its id.
--
-- Cashfree numbers each kind of event on its own (a payment, a refund, a chargeback), so one
-- payout can hold two lines of one event_id (a chargeback and its reversal, a payment and a
-- refund): keyed by (provider, settlement_id, entry_id) alone, the second replaced the first,
-- silently, and the payout's lines no longer added up. The key takes entry_type too; the ids
-- recorded stay as they were, so a fetch of their days again finds them.
ALTER TABLE payhooks_settlement_lines DROP CONSTRAINT payhooks_settlement_lines_pkey;
ALTER TABLE payhooks_settlement_lines
    ADD PRIMARY KEY (provider, settlement_id, entry_type, entry_id);
