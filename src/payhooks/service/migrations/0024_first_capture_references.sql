-- payhooks reference shop, version 24: the first capture keeps the payment's references on
-- its record (core version 36).
--
-- A payment's record (payhooks_payments) keeps its bank reference and the order its capture
-- made, so the timeline's search finds it by them after the retention purge has taken its
-- delivery (payhooks.operations.timeline.find). The general path writes the bank reference in
-- the claim (expectations.CLAIM_PAYMENT) and the order with the delivery's record
-- (idempotency.RECORD_WITH_PAYMENT); shop_first_capture, which knows both before it writes,
-- writes them in its insert of the record. The merchant's reference (the cart) is copied from
-- the expectation by the record's trigger (core version 36), on either path.
-- tests/integration/test_first_capture.py compares the two paths' records, these columns too.
--
-- shop_first_capture is written out whole here (0021 is the version before), changed in that
-- insert alone.
CREATE OR REPLACE FUNCTION shop_first_capture(
    p_provider text, p_event_id text, p_event_type text, p_payment_id text,
    p_merchant_ref text, p_bank_ref text, p_payload_sha256 text, p_body bytea, p_headers jsonb,
    p_amount bigint, p_payment_amount bigint, p_currency text, p_attempt_id text,
    p_order_id text, p_dedupe_key text, p_subject text, p_message text, p_payload jsonb,
    p_relay_id text, p_relay_payment text, p_relay_subject text, p_relay_body text,
    OUT state text, OUT outcome text, OUT payload_sha256 text, OUT order_ref text
)
LANGUAGE plpgsql AS $$
DECLARE
    v_cart text;
    v_cart_status text;
    v_cart_amount bigint;
    v_cart_currency text;
    v_email text;
    v_skus text[] := '{}';
    v_quantities integer[] := '{}';
    v_line record;
BEGIN
    -- idempotency.seen: a record of this key answers without a claim.
    SELECT w.outcome, w.payload_sha256, w.order_ref INTO outcome, payload_sha256, order_ref
    FROM processed_webhooks w WHERE w.provider = p_provider AND w.event_id = p_event_id;
    IF FOUND THEN
        state := 'seen';
        RETURN;
    END IF;
    -- Reads that decide the path before a write: a checkout to pay, no payment row yet.
    SELECT c.cart_id INTO v_cart FROM checkouts c
    WHERE c.provider = p_provider AND c.gateway_order_id = p_merchant_ref;
    IF NOT FOUND OR EXISTS (
        SELECT 1 FROM payments p WHERE p.provider = p_provider AND p.payment_id = p_payment_id
    ) THEN
        state := 'declined';
        RETURN;
    END IF;
    -- idempotency.claim, with what idempotency.record would write at the end.
    INSERT INTO processed_webhooks
        (provider, event_id, event_type, outcome, payment_id, merchant_ref, bank_ref,
         payload_sha256, body, headers, order_ref)
    VALUES (p_provider, p_event_id, p_event_type, 'processed', p_payment_id, p_merchant_ref,
            p_bank_ref, p_payload_sha256, p_body, p_headers, p_order_id)
    ON CONFLICT DO NOTHING;
    IF NOT FOUND THEN
        state := 'declined';  -- a twin in flight, or these bytes under another key
        RETURN;
    END IF;
    -- expectations.CLAIM_PAYMENT: the payment's own key, insert-first, and the expectation it
    -- does not meet, with the order the general path writes on it at the end
    -- (idempotency.RECORD_WITH_PAYMENT). Taken already (reconciliation applied it, another
    -- delivery holds it) or not what the merchant expected: for the general path, which
    -- decides duplicate or parked.
    INSERT INTO payhooks_payments
        (provider, payment_id, kind, gateway_order_id, event_id, reconciled, attempt_id,
         paid_paise, currency, bank_ref, order_ref)
    VALUES (p_provider, p_payment_id, 'payment_captured', p_merchant_ref, p_event_id,
            starts_with(p_event_id, 'reconcile:'), p_attempt_id,
            coalesce(p_payment_amount, p_amount), coalesce(p_currency, 'INR'), p_bank_ref,
            p_order_id)
    ON CONFLICT (provider, payment_id, kind) DO NOTHING;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'declined: the payment''s key is taken' USING ERRCODE = 'PH001';
    END IF;
    PERFORM 1 FROM payhooks_expectations e
    WHERE e.provider = p_provider AND e.gateway_order_id = p_merchant_ref
      AND (e.amount_paise IS DISTINCT FROM p_amount OR e.currency <> coalesce(p_currency, 'INR'))
    FOR KEY SHARE;
    IF FOUND THEN
        RAISE EXCEPTION 'declined: not the expected amount' USING ERRCODE = 'PH001';
    END IF;
    -- payments._NEW_PAYMENT, then _FIRST_CAPTURE on the row it created.
    INSERT INTO payments (provider, payment_id, cart_id, status, amount_paise,
                          payment_amount_paise, currency, captured_at)
    VALUES (p_provider, p_payment_id, v_cart, 'captured', p_amount, p_payment_amount,
            p_currency, now())
    ON CONFLICT (provider, payment_id) DO NOTHING;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'declined: payment row created meanwhile' USING ERRCODE = 'PH001';
    END IF;
    -- payments._LOCK_CART: paid already, or another amount, is for the general path.
    SELECT c.status, c.amount_paise, c.currency, c.customer_email
    INTO v_cart_status, v_cart_amount, v_cart_currency, v_email
    FROM carts c WHERE c.id = v_cart FOR NO KEY UPDATE;
    IF v_cart_status = 'paid' OR p_amount IS DISTINCT FROM v_cart_amount
       OR coalesce(p_currency, 'INR') <> v_cart_currency THEN
        RAISE EXCEPTION 'declined: cart paid or amount off' USING ERRCODE = 'PH001';
    END IF;
    -- orders.take_stock, line by line in SKU order; the last units, spread over several
    -- slots, and short lines (a backorder) are for the general path.
    FOR v_line IN
        SELECT i.sku, i.quantity FROM cart_items i WHERE i.cart_id = v_cart ORDER BY i.sku
    LOOP
        IF shop_take_slot(v_line.sku, v_line.quantity) IS NULL THEN
            RAISE EXCEPTION 'declined: no slot holds enough' USING ERRCODE = 'PH001';
        END IF;
        v_skus := v_skus || v_line.sku;
        v_quantities := v_quantities || v_line.quantity;
    END LOOP;
    -- orders.place_order's writes, confirmed.
    UPDATE carts SET status = 'paid', paid_at = now() WHERE id = v_cart;
    INSERT INTO orders (id, cart_id, provider, payment_id, amount_paise, status, event_id)
    VALUES (p_order_id, v_cart, p_provider, p_payment_id, p_amount, 'confirmed', p_event_id);
    INSERT INTO inventory_movements (sku, delta, reason, order_id)
    SELECT l.sku, -l.quantity, 'sale', p_order_id
    FROM unnest(v_skus, v_quantities) WITH ORDINALITY AS l(sku, quantity, n) ORDER BY l.n;
    INSERT INTO outbox (kind, dedupe_key, recipient, subject, body, payload)
    VALUES ('email', p_dedupe_key, v_email, p_subject, p_message, p_payload)
    ON CONFLICT (dedupe_key) DO NOTHING;
    -- idempotency.record, then relaying.QUEUE: the payment event, once per relay channel.
    INSERT INTO payhooks_outbox (kind, channel, dedupe_key, subject, body, payload)
    SELECT 'event', c.channel, 'relay:' || c.channel || ':' || p_relay_id, p_relay_subject,
           p_relay_body,
           jsonb_build_object('message_id', p_relay_id, 'payment', p_relay_payment)
    FROM payhooks_relay_channels c
    CROSS JOIN LATERAL (
        SELECT pg_advisory_xact_lock(
            hashtext('payhooks-relay:' || c.channel || ':' || p_relay_payment))
    ) AS in_order
    ON CONFLICT (dedupe_key) DO NOTHING;
    state := 'processed';
    outcome := 'processed';
    payload_sha256 := p_payload_sha256;
    order_ref := p_order_id;
END
$$;
