"""Keys and the payment state machine: what an attacker replays, and the orders
in which refunds and captures can meet, through the real ingest path on real PostgreSQL."""

from __future__ import annotations

from dataclasses import replace
from decimal import Decimal

from payhooks.events import Provider
from payhooks.gateways import payu
from payhooks.intake.ingest import Outcome
from payhooks.service.shop.payments import get_payment
from payhooks.sim.gateway import Delivery
from tests.factories import GATEWAY, Purchase, deliver, purchase


def scalar(conn, sql, *params):
    return conn.execute(sql, params).fetchone()[0]


def alerts(conn, flag: str) -> int:
    return scalar(conn, "SELECT count(*) FROM outbox WHERE payload->>'flag' = %s", flag)


def with_fields(delivery: Delivery, **fields: str) -> Delivery:
    """A PayU post with unhashed fields changed: what anyone holding a signed post can send."""
    return replace(delivery, body=payu.encode({**payu.decode_form(delivery.body), **fields}))


def razorpay_event(buy: Purchase, name: str, **extra: object) -> Delivery:
    return GATEWAY.razorpay(
        name,
        payment_id=buy.payment_id,
        order_id=buy.reference,
        amount_paise=buy.amount_paise,
        **extra,  # type: ignore[arg-type]
    )


# --- PayU keys come only from hashed fields -------------------------------------------------


def test_payu_post_resent_under_the_next_mihpayid_does_not_swallow_that_payment(conn):
    """A customer resends their own signed post with the mihpayid PayU gives someone else
    next; that person's genuine post must still take effect."""
    attacker, victim = purchase(conn, Provider.PAYU), purchase(conn, Provider.PAYU)
    assert deliver(conn, attacker.captured()).outcome is Outcome.PROCESSED
    next_mihpayid = "403993715599999999"
    deliver(conn, with_fields(attacker.captured(), mihpayid=next_mihpayid))
    genuine = deliver(conn, victim.captured(payment_id=next_mihpayid))
    assert genuine.outcome is Outcome.PROCESSED and genuine.order_id is not None
    assert get_payment(conn, "payu", victim.reference).status == "captured"
    assert scalar(conn, "SELECT count(*) FROM orders") == 2


def test_payu_failure_post_resent_under_new_padded_mihpayids_is_stored_once(conn):
    buy = purchase(conn, Provider.PAYU)
    failure = buy.delivery("failed")
    deliver(conn, failure)
    for n in range(20):
        padded = with_fields(failure, mihpayid=f"40399{n}", field9="9" * 30_000)
        assert deliver(conn, padded).outcome is Outcome.DUPLICATE
    assert scalar(conn, "SELECT count(*) FROM processed_webhooks") == 1
    assert scalar(conn, "SELECT sum(octet_length(body)) FROM processed_webhooks") == len(
        failure.body
    )


def test_two_payu_success_posts_for_one_txnid_make_one_payment_and_no_refund_flag(conn):
    """mihpayid is not hashed, so a second success post for a txnid cannot be told from a
    replay by itself: it changes nothing by itself and waits for PayU's check_payment under a
    key of its own (tests/gateways/payu/test_second_payments.py), never flagged for refund as
    it came, nor counted a copy with another body of the first post (which the console showed
    among the first post's copies)."""
    buy = purchase(conn, Provider.PAYU)
    deliver(conn, buy.captured())
    second = deliver(conn, buy.captured(payment_id="403993715588888888"))
    assert second.outcome is Outcome.CONFIRMING and second.order_id is None
    payment = get_payment(conn, "payu", buy.reference)
    assert payment.flags == () and not payment.needs_refund
    assert scalar(conn, "SELECT sum(mismatches) FROM processed_webhooks") == 0


# --- unsigned key headers: the same authentic bytes under a new key -------------------------


def test_razorpay_body_replayed_under_a_new_event_id_is_a_duplicate_and_stored_once(conn):
    buy = purchase(conn, stock=5)
    genuine = buy.captured()
    first = deliver(conn, genuine)
    replayed = replace(genuine, headers={**genuine.headers, "x-razorpay-event-id": "evt_new1"})
    again = deliver(conn, replayed)
    assert again.outcome is Outcome.DUPLICATE and again.order_id == first.order_id
    assert scalar(conn, "SELECT count(*) FROM processed_webhooks") == 1


def test_cashfree_body_replayed_under_a_new_idempotency_key_is_a_duplicate(conn):
    buy = purchase(conn, Provider.CASHFREE)
    genuine = buy.captured()
    deliver(conn, genuine)
    replayed = replace(genuine, headers={**genuine.headers, "x-idempotency-key": "forged"})
    assert deliver(conn, replayed).outcome is Outcome.DUPLICATE
    assert scalar(conn, "SELECT count(*) FROM processed_webhooks") == 1


def test_parked_body_replayed_under_new_keys_raises_one_alert(conn):
    orphan = GATEWAY.razorpay(
        "payment.captured", payment_id="pay_orphan000001", order_id="order_orphan", amount_paise=100
    )
    assert deliver(conn, orphan).outcome is Outcome.PARKED
    for n in range(3):
        deliver(conn, replace(orphan, headers={**orphan.headers, "x-razorpay-event-id": f"e{n}"}))
    assert scalar(conn, "SELECT count(*) FROM processed_webhooks") == 1
    assert scalar(conn, "SELECT count(*) FROM outbox WHERE kind = 'alert'") == 1


def test_distinct_deliveries_for_one_unknown_reference_raise_one_parked_alert(conn):
    authorized = GATEWAY.razorpay(
        "payment.authorized", payment_id="pay_orphan2", order_id="order_gone", amount_paise=100
    )
    captured = GATEWAY.razorpay(
        "payment.captured", payment_id="pay_orphan2", order_id="order_gone", amount_paise=100
    )
    assert deliver(conn, authorized).outcome is Outcome.PARKED
    assert deliver(conn, captured).outcome is Outcome.PARKED
    assert scalar(conn, "SELECT count(*) FROM outbox WHERE kind = 'alert'") == 1


# --- refunds and captures in every order ------------------------------------------------------


def test_partial_refund_that_overtakes_its_capture_still_gets_the_order(conn):
    buy = purchase(conn, stock=5)
    partial = razorpay_event(
        buy, "refund.processed", refund_id="rfnd_part1", refund_amount_paise=buy.amount_paise // 4
    )
    deliver(conn, partial)
    receipt = deliver(conn, buy.captured())
    assert receipt.order_id is not None
    assert scalar(conn, "SELECT stock FROM products WHERE sku = %s", buy.sku) == 4
    payment = get_payment(conn, "razorpay", buy.payment_id)
    assert payment.status == "refunded" and payment.flags == ()


def test_failed_then_fully_refunded_then_captured_places_no_order_and_alerts(conn):
    """The storm's ordering: failed, refund.processed, authorized, captured, order.paid."""
    buy = purchase(conn, stock=5)
    for delivery in (
        buy.delivery("failed"),
        razorpay_event(buy, "refund.processed", refund_id="rfnd_full1"),
        buy.delivery("authorized"),
        buy.captured(),
        razorpay_event(buy, "order.paid"),
    ):
        assert deliver(conn, delivery).outcome is Outcome.PROCESSED
    assert scalar(conn, "SELECT count(*) FROM orders") == 0
    assert scalar(conn, "SELECT stock FROM products WHERE sku = %s", buy.sku) == 5
    payment = get_payment(conn, "razorpay", buy.payment_id)
    assert payment.status == "refunded" and payment.flags == ("captured_after_full_refund",)
    assert not payment.needs_refund
    assert alerts(conn, "captured_after_full_refund") == 1


def test_full_refund_overtaking_its_capture_alerts_once_however_often_the_capture_comes(conn):
    buy = purchase(conn, stock=5)
    deliver(conn, razorpay_event(buy, "refund.processed", refund_id="rfnd_full2"))
    deliver(conn, buy.captured())
    deliver(conn, razorpay_event(buy, "order.paid"))
    deliver(conn, buy.captured())
    assert alerts(conn, "captured_after_full_refund") == 1
    assert scalar(conn, "SELECT count(*) FROM orders") == 0


def test_capture_after_partial_refunds_adding_up_to_the_whole_places_no_order(conn):
    buy = purchase(conn, stock=5)
    half = buy.amount_paise // 2
    deliver(conn, razorpay_event(buy, "refund.processed", refund_id="r1", refund_amount_paise=half))
    rest = buy.amount_paise - half
    deliver(conn, razorpay_event(buy, "refund.processed", refund_id="r2", refund_amount_paise=rest))
    deliver(conn, buy.captured())
    assert scalar(conn, "SELECT count(*) FROM orders") == 0
    assert alerts(conn, "captured_after_full_refund") == 1


def test_refund_larger_than_the_payment_is_flagged_once(conn):
    buy = purchase(conn, stock=5)
    deliver(conn, buy.captured())
    deliver(conn, razorpay_event(buy, "refund.processed", refund_id="r1"))
    deliver(conn, razorpay_event(buy, "refund.processed", refund_id="r2", refund_amount_paise=100))
    payment = get_payment(conn, "razorpay", buy.payment_id)
    assert "over_refund" in payment.flags and not payment.needs_refund
    assert alerts(conn, "over_refund") == 1


def test_refund_replayed_under_a_new_event_id_adds_nothing(conn):
    buy = purchase(conn, stock=5)
    deliver(conn, buy.captured())
    refund = razorpay_event(buy, "refund.processed", refund_id="r1", refund_amount_paise=100)
    deliver(conn, refund)
    deliver(conn, replace(refund, headers={**refund.headers, "x-razorpay-event-id": "evt_x"}))
    assert scalar(conn, "SELECT refunded_paise FROM payments") == 100


def test_every_captured_payment_ends_with_an_order_or_a_flag_whatever_the_order(conn):
    """Every permutation of failed / partial refund / authorized / captured for one payment."""
    from itertools import permutations

    for n, order in enumerate(permutations(["failed", "refund", "authorized", "captured"])):
        buy = purchase(conn, stock=5)
        refund = razorpay_event(
            buy, "refund.processed", refund_id=f"rp{n}", refund_amount_paise=100
        )
        steps = {"refund": refund} | {k: buy.delivery(k) for k in ("failed", "authorized")}
        steps["captured"] = buy.captured()
        for step in order:
            deliver(conn, steps[step])
        assert scalar(conn, "SELECT count(*) FROM orders WHERE cart_id = %s", buy.cart_id) == 1, (
            order
        )


def test_a_later_capture_report_of_the_payment_that_paid_the_order_is_not_a_duplicate(conn):
    """A capture applied before captures were recorded apart (an instance of the previous
    version, mid-deploy) leaves captured_at empty; its order.paid must not flag a refund."""
    buy = purchase(conn, stock=5)
    first = deliver(conn, buy.captured())
    conn.execute("UPDATE payments SET captured_at = NULL")  # what the previous version left
    again = deliver(conn, razorpay_event(buy, "order.paid"))
    assert again.order_id == first.order_id
    payment = get_payment(conn, "razorpay", buy.payment_id)
    assert payment.flags == () and not payment.needs_refund
    assert scalar(conn, "SELECT count(*) FROM outbox WHERE kind = 'alert'") == 0


def test_a_full_refund_of_the_payment_that_paid_an_order_alerts_once(conn):
    buy = purchase(conn, stock=5)
    deliver(conn, buy.captured())
    half = buy.amount_paise // 2
    deliver(conn, razorpay_event(buy, "refund.processed", refund_id="r1", refund_amount_paise=half))
    assert alerts(conn, "refunded_after_order") == 0
    rest = buy.amount_paise - half
    deliver(conn, razorpay_event(buy, "refund.processed", refund_id="r2", refund_amount_paise=rest))
    payment = get_payment(conn, "razorpay", buy.payment_id)
    assert payment.flags == ("refunded_after_order",) and not payment.needs_refund
    assert alerts(conn, "refunded_after_order") == 1


def test_a_key_header_shaped_like_a_derived_key_cannot_claim_a_later_capture(conn):
    """Key headers are not signed: an authentic body sent under the key a later delivery
    without the header will derive must not turn that capture into a duplicate."""
    buy = purchase(conn, Provider.CASHFREE)
    dropped = GATEWAY.cashfree(
        "PAYMENT_USER_DROPPED_WEBHOOK",
        order_id=buy.reference,
        cf_payment_id="5550001",
        order_amount=Decimal(buy.amount_paise) / 100,
        payment_status="USER_DROPPED",
    )
    forged_key = "PAYMENT_SUCCESS_WEBHOOK:5550002"
    deliver(conn, replace(dropped, headers={**dropped.headers, "x-idempotency-key": forged_key}))
    genuine = GATEWAY.cashfree(
        "PAYMENT_SUCCESS_WEBHOOK",
        order_id=buy.reference,
        cf_payment_id="5550002",
        order_amount=Decimal(buy.amount_paise) / 100,
        version="2023-08-01",
    )
    receipt = deliver(conn, genuine)
    assert receipt.outcome is Outcome.PROCESSED and receipt.order_id is not None
    assert receipt.event.event_id == forged_key  # the derived key, now its own


def test_a_razorpay_event_id_header_with_a_colon_is_not_used_as_the_key(conn):
    buy = purchase(conn)
    captured = buy.captured()
    forged = replace(captured, headers={**captured.headers, "x-razorpay-event-id": "a:b"})
    assert deliver(conn, forged).event.event_id == f"payment.captured:{buy.payment_id}"


def test_a_refund_that_names_no_payment_is_parked_saying_why(conn):
    """A PhonePe refund whose original order had no one completed payment names
    none; the reference shop's handler failed on it (a payment row with no id) and the
    exception left the confirmation pass. It is parked, saying why."""
    from payhooks.events import Event, EventKind, Received
    from payhooks.intake.ingest import ingest_received
    from payhooks.service.shop.payments import apply_event

    buy = purchase(conn, Provider.PHONEPE)
    event = Event(
        provider=Provider.PHONEPE, kind=EventKind.REFUND_PROCESSED,
        event_type="reconcile.refund.COMPLETED", event_id="reconcile:OMR1:COMPLETED",
        payment_id=None, merchant_ref=buy.reference, currency="INR", refund_id="rf_1",
        refund_amount_paise=buy.amount_paise, payload_sha256="0" * 64,
    )  # fmt: skip
    receipt = ingest_received(conn, Received(event=event, body=b"{}", headers={}), apply_event)
    assert receipt.outcome is Outcome.PARKED
    assert scalar(conn, "SELECT count(*) FROM refunds") == 0
    said = scalar(conn, "SELECT body FROM outbox WHERE kind = 'alert' ORDER BY id DESC LIMIT 1")
    assert "names no payment" in str(said)


def test_a_refund_that_names_no_payment_tells_the_operator_to_find_it_not_to_wait(conn):
    """The alert of a refund parked for naming no payment said it would be
    applied when the gateway delivers it again; nothing will apply it, a person must."""
    from payhooks.events import Event, EventKind, Received
    from payhooks.intake.ingest import ingest_received
    from payhooks.service.shop.payments import apply_event

    buy = purchase(conn, Provider.PHONEPE)
    event = Event(
        provider=Provider.PHONEPE, kind=EventKind.REFUND_PROCESSED,
        event_type="reconcile.refund.COMPLETED", event_id="reconcile:OMR2:COMPLETED",
        payment_id=None, merchant_ref=buy.reference, currency="INR", refund_id="rf_2",
        refund_amount_paise=buy.amount_paise, payload_sha256="0" * 64,
    )  # fmt: skip
    ingest_received(conn, Received(event=event, body=b"{}", headers={}), apply_event)
    said = str(scalar(conn, "SELECT body FROM outbox WHERE kind = 'alert' ORDER BY id DESC"))
    assert "delivers it again" not in said
    assert "Nothing applies it by itself" in said and "rf_2" in said and buy.reference in said


def test_a_payment_for_no_checkout_says_it_applies_by_itself_once_the_checkout_exists(conn):
    orphan = GATEWAY.razorpay(
        "payment.captured", payment_id="pay_nocheckout01", order_id="order_nobody",
        amount_paise=100,
    )  # fmt: skip
    assert deliver(conn, orphan).outcome == "parked"
    said = str(scalar(conn, "SELECT body FROM outbox WHERE kind = 'alert' ORDER BY id DESC"))
    assert "applied by itself once its checkout exists" in said
    assert "refund it at Razorpay" in said
