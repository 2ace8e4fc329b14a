-- Shop, version 23: an order placed after its payment's dispute was reported is born marked.
-- A dispute's report marks the order its payment paid (version 22); a report that came before
-- the order existed (its capture delayed, parked or reordered behind it) marked nothing, and
-- the order stayed unmarked once placed. Every order, on whichever path it is placed (the
-- general path, the one-statement first capture), now takes its payment's dispute, where it
-- stands, as it is inserted: one lookup by the disputes' payment index, finding nothing for
-- almost every order.
CREATE OR REPLACE FUNCTION shop_order_disputed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.dispute IS NULL AND NEW.payment_id IS NOT NULL THEN
        SELECT d.status, d.dispute_id INTO NEW.dispute, NEW.dispute_id
        FROM payhooks_disputes d
        WHERE d.provider = NEW.provider AND d.payment_id = NEW.payment_id
        ORDER BY d.updated_at DESC, d.dispute_id DESC
        LIMIT 1;
    END IF;
    RETURN NEW;
END
$$;
DROP TRIGGER IF EXISTS orders_disputed_at_birth ON orders;
CREATE TRIGGER orders_disputed_at_birth BEFORE INSERT ON orders
    FOR EACH ROW EXECUTE FUNCTION shop_order_disputed();
