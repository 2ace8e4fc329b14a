-- payhooks reference shop, version 7: a first capture in one statement.
--
-- The one path most deliveries take (the first capture of a checked-out cart, at its price,
-- stock found in a slot) as one function, shop_first_capture. A database migrated by an
-- earlier release holds the first version this migration made; 0018 drops it, and 0021
-- creates the function as it is now (with what it does, and why), so a new database
-- creates it once. What stays here is the stock taking it shares with the general path.

-- orders._take_line's first two attempts: a free slot, else wait for a busy one. Each runs in
-- a subtransaction (the savepoint stock_take), rolled back when it finds nothing, so a slot
-- locked and then found short is released before the next, waiting attempt. NULL: neither.
CREATE FUNCTION shop_take_slot(p_sku text, p_quantity integer) RETURNS smallint
LANGUAGE plpgsql AS $$
DECLARE
    v_slot smallint;
BEGIN
    BEGIN
        UPDATE product_stock SET stock = stock - p_quantity
        WHERE (sku, slot) = (
            SELECT s.sku, s.slot FROM product_stock s WHERE s.sku = p_sku AND s.stock >= p_quantity
            ORDER BY s.slot LIMIT 1 FOR NO KEY UPDATE SKIP LOCKED)
        RETURNING slot INTO v_slot;
        IF v_slot IS NOT NULL THEN
            RETURN v_slot;
        END IF;
        RAISE EXCEPTION 'no free slot' USING ERRCODE = 'PH002';
    EXCEPTION WHEN SQLSTATE 'PH002' THEN
        NULL;
    END;
    BEGIN
        UPDATE product_stock SET stock = stock - p_quantity
        WHERE (sku, slot) = (
            SELECT s.sku, s.slot FROM product_stock s WHERE s.sku = p_sku AND s.stock >= p_quantity
            ORDER BY s.slot LIMIT 1 FOR NO KEY UPDATE)
        RETURNING slot INTO v_slot;
        IF v_slot IS NOT NULL THEN
            RETURN v_slot;
        END IF;
        RAISE EXCEPTION 'no slot' USING ERRCODE = 'PH002';
    EXCEPTION WHEN SQLSTATE 'PH002' THEN
        RETURN NULL;
    END;
END
$$;
