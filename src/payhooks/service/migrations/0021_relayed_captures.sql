-- payhooks reference shop, version 21: payment events relayed to a broker (core version 22).
--
-- The shop's view of the one outbound queue shows its own messages only: a payment event on
-- its way to a broker (kind 'event') is the relay's, never an email to send or list.
-- shop_first_capture queues the capture for every relay channel, as the general path does
-- (payhooks.intake.relaying.QUEUE, after the claim's record), with the message Python made
-- (relaying.relayed): with no channel it writes nothing more and takes no lock.
-- tests/integration/test_first_capture.py compares the two paths' rows, these too.
--
-- shop_first_capture is written out whole here (0008 first made it, 0018 added the payment's
-- own key): the one path most deliveries take (the first capture of a checked-out cart, at its
-- price, stock found in a slot) as one function: the statements payments.apply_event and
-- orders.place_order run for it, in the same order, taking the same locks, writing the same
-- rows, in one round trip instead of eight and one statement instead of fifteen. Every other
-- case is declined, and the caller takes the general path (service/shop/captures.py): before
-- anything is written ('declined'), or by raising SQLSTATE PH001, which rolls back what was.
-- It claims the payment's own key in payhooks_payments (expectations.CLAIM_PAYMENT) right
-- after the delivery's, taking the same lock on the expectation, and declines when the key is
-- taken or the expectation is not met. Returns 'seen' with the record when the delivery key is
-- already recorded (the caller decides, as idempotency.seen does), 'processed' with the
-- order, or 'declined'.
CREATE OR REPLACE VIEW outbox AS
SELECT id, kind, dedupe_key, recipient, subject, body, payload, created_at,
       next_attempt_at AS available_at, attempts, sent_at, failed_at, last_error
FROM payhooks_outbox WHERE alert_key IS NULL AND kind <> 'event';

DROP FUNCTION IF EXISTS shop_first_capture(
    text, text, text, text, text, text, text, bytea, jsonb, bigint, bigint, text, text,
    text, text, text, text, jsonb);
CREATE FUNCTION shop_first_capture(
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
    -- does not meet. Taken already (reconciliation applied it, another delivery holds it) or
    -- not what the merchant expected: for the general path, which decides duplicate or parked.
    INSERT INTO payhooks_payments
        (provider, payment_id, kind, gateway_order_id, event_id, reconciled, attempt_id,
         paid_paise, currency)
    VALUES (p_provider, p_payment_id, 'payment_captured', p_merchant_ref, p_event_id,
            starts_with(p_event_id, 'reconcile:'), p_attempt_id,
            coalesce(p_payment_amount, p_amount), coalesce(p_currency, 'INR'))
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
