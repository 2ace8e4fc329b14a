-- payhooks core, version 27: a payment's record is born with what its lost disputes took back.
--
-- A dispute lost before its payment was recorded (the capture parked and replayed later,
-- recovered by reconciliation, or delivered after the dispute) must bound the payment's
-- refunds all the same. Every insert into payhooks_payments, on whichever path it is made (the
-- claim, a merchant's own one-statement capture such as the reference shop's), takes
-- disputed_paise from payhooks_disputes by the one rule the dispute's report writes
-- (payhooks.intake.disputes.TAKEN_BACK): one lookup by the disputes' payment index, finding
-- nothing for almost every payment.
--
-- A capture and a report of the payment's loss may be in flight at once, each writing what the
-- other's statements cannot see until it commits: the new record, the lost dispute. So both
-- take the payment's turn first (payhooks_lock_payment: an advisory lock held to the end of
-- the transaction), in a statement of their own before the one that reads the other's work;
-- whichever comes second waits for the first to commit, and the statement after the wait, in
-- a snapshot of its own, sees it. The lock is on two 32-bit keys, a key space PostgreSQL keeps
-- apart from the one-key locks (the migrator's, the purge's, the relay's, the console's), so
-- it never meets them.
CREATE OR REPLACE FUNCTION payhooks_lock_payment(provider text, payment_id text) RETURNS void
LANGUAGE sql VOLATILE STRICT AS $$
    SELECT pg_advisory_xact_lock(hashtext('payhooks_payments'),
                                 hashtext(provider || ':' || payment_id))
$$;

-- A trigger function is volatile: in READ COMMITTED each of its statements takes a snapshot of
-- its own, so the sum, read after the turn is taken, sees a report that committed meanwhile.
CREATE OR REPLACE FUNCTION payhooks_payment_disputed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM payhooks_lock_payment(NEW.provider, NEW.payment_id);
    SELECT coalesce(sum(d.lost_paise), 0) INTO NEW.disputed_paise
    FROM payhooks_disputes d
    WHERE d.provider = NEW.provider AND d.payment_id = NEW.payment_id;
    RETURN NEW;
END
$$;
DROP TRIGGER IF EXISTS payhooks_payments_disputed_at_birth ON payhooks_payments;
CREATE TRIGGER payhooks_payments_disputed_at_birth BEFORE INSERT ON payhooks_payments
    FOR EACH ROW EXECUTE FUNCTION payhooks_payment_disputed();

-- The records written before this version without a loss reported before them.
UPDATE payhooks_payments p SET disputed_paise = lost.paise
FROM (SELECT provider, payment_id, sum(lost_paise) AS paise FROM payhooks_disputes
      WHERE payment_id IS NOT NULL GROUP BY provider, payment_id) AS lost
WHERE p.provider = lost.provider AND p.payment_id = lost.payment_id
  AND p.disputed_paise <> lost.paise;
