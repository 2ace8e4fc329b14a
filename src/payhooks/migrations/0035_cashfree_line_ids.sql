-- payhooks core, version 35: a Cashfree settlement line is keyed by its event's type and id.
--
-- Cashfree numbers each kind of event on its own (a payment, a refund, a chargeback), so one
-- payout can hold two lines of one event_id (a chargeback and its reversal): keyed by the id
-- alone, the second replaced the first, and the payout's lines no longer added up. A line is
-- now `<event_type>:<event_id>` (payhooks.gateways.cashfree.settlements.entry_id): those
-- recorded before are renamed so, and a fetch of their days again finds them, never records
-- them twice. An unreadable line is named the same way where its kept body says its type, so
-- that reading it later still clears it.
UPDATE payhooks_settlement_lines SET entry_id = entry_type || ':' || entry_id
WHERE provider = 'cashfree' AND strpos(entry_id, ':') = 0;

DO $$
DECLARE
    kept record;
    kind text;
BEGIN
    FOR kept IN SELECT digest, entry_id, raw FROM payhooks_settlement_unreadable
                WHERE provider = 'cashfree' AND strpos(entry_id, ':') = 0 LOOP
        BEGIN
            kind := kept.raw::jsonb #>> '{event_details,event_type}';
        EXCEPTION WHEN others THEN  -- a body that is not JSON names no type
            kind := NULL;
        END;
        IF kind IS NOT NULL THEN
            UPDATE payhooks_settlement_unreadable SET entry_id = kind || ':' || kept.entry_id
            WHERE provider = 'cashfree' AND digest = kept.digest;
        END IF;
    END LOOP;
END $$;
