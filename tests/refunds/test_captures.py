"""Razorpay payments authorised and not captured (manual capture), captured once by the
reference worker's step (``PAYHOOKS_CAPTURE_AUTHORIZED``) while their cart is open and for its
amount; the capture's answer places the order once with the late ``payment.captured``
webhook. Real PostgreSQL, the Razorpay double over a loopback socket."""

from __future__ import annotations

import threading
from dataclasses import replace
from datetime import UTC, datetime

from payhooks.events import Provider
from payhooks.intake.ingest import Outcome
from payhooks.service import application
from tests.factories import deliver, new_payment_id, purchase
from tests.reconcile import conftest as reconciling
from tests.reconcile.conftest import count, orders_of, paid_at_gateway

rig = reconciling.rig  # its fixture
gateway_api = reconciling.gateway_api
STATUS = "SELECT status FROM payments WHERE provider = 'razorpay' AND payment_id = %s"


def authorised(conn, rig, **options):
    buy = purchase(conn, Provider.RAZORPAY, **options)
    assert deliver(conn, buy.delivery("authorized")).outcome is Outcome.PROCESSED
    paid_at_gateway(rig.api, buy, "authorized")
    return buy


def captures(rig, buy) -> int:
    return rig.api.money.captured[(Provider.RAZORPAY, buy.payment_id)]


def test_an_authorised_payment_is_captured_once_and_its_order_placed_once(conn, rig):
    buy = authorised(conn, rig)
    assert orders_of(conn, buy.cart_id) == []  # authorised: no order yet
    reconciler = rig.reconciler()
    assert application.capture_authorized(reconciler) == 1
    assert captures(rig, buy) == 1
    assert [p for _, p in orders_of(conn, buy.cart_id)] == [buy.payment_id]
    assert application.capture_authorized(reconciler) == 0  # captured: not due any more
    late = deliver(conn, buy.captured())  # Razorpay's payment.captured webhook
    assert late.outcome is Outcome.DUPLICATE
    assert captures(rig, buy) == 1 and len(orders_of(conn, buy.cart_id)) == 1
    assert conn.execute(STATUS, (buy.payment_id,)).fetchone() == ("captured",)


def test_two_workers_at_once_capture_once(conn, rig):
    buy = authorised(conn, rig)
    start = threading.Barrier(2)

    def worker() -> None:
        start.wait(timeout=30)
        application.capture_authorized(rig.reconciler())

    threads = [threading.Thread(target=worker) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert captures(rig, buy) == 1  # the second is answered "already captured"
    assert len(orders_of(conn, buy.cart_id)) == 1


def test_a_payment_whose_cart_another_payment_paid_is_left_to_lapse(conn, rig):
    buy = authorised(conn, rig)
    other = new_payment_id(Provider.RAZORPAY)
    deliver(conn, buy.captured(payment_id=other))  # another payment paid the cart
    assert application.capture_authorized(rig.reconciler()) == 0
    assert captures(rig, buy) == 0
    assert count(conn, "SELECT count(*) FROM orders") == 1


def test_a_cart_authorised_twice_is_captured_once(conn, rig):
    """Two tabs, both authorised: the first is captured, the customer charged once."""
    buy = authorised(conn, rig)
    twin = replace(buy, payment_id=new_payment_id(Provider.RAZORPAY))
    deliver(conn, twin.delivery("authorized"))
    paid_at_gateway(rig.api, twin, "authorized")
    application.capture_authorized(rig.reconciler())
    assert captures(rig, buy) + captures(rig, twin) == 1
    assert len(orders_of(conn, buy.cart_id)) == 1


def test_one_capture_whose_order_the_database_refuses_holds_back_no_other(conn, rig):
    first, second = authorised(conn, rig), authorised(conn, rig)
    conn.execute(
        "CREATE FUNCTION refuse_one() RETURNS trigger LANGUAGE plpgsql AS"
        " $$ BEGIN RAISE EXCEPTION 'refused by a trigger'; END $$"
    )
    conn.execute(
        "CREATE TRIGGER refuse_one BEFORE INSERT ON orders FOR EACH ROW"
        f" WHEN (NEW.cart_id = '{first.cart_id}') EXECUTE FUNCTION refuse_one()"
    )
    reconciler = rig.reconciler()
    assert application.capture_authorized(reconciler) == 1
    assert [p for _, p in orders_of(conn, second.cart_id)] == [second.payment_id]
    assert orders_of(conn, first.cart_id) == []
    attempts, error, later = conn.execute(
        "SELECT capture_attempts, capture_error, capture_next_at > now() FROM payments"
        " WHERE payment_id = %s",
        (first.payment_id,),
    ).fetchone()
    assert (attempts, later) == (1, True) and "refused by a trigger" in error
    assert application.capture_authorized(reconciler) == 0  # backed off: not asked again yet
    assert captures(rig, first) == 1


def test_a_payment_failing_to_be_captured_past_the_bound_is_an_alert(conn, rig):
    from payhooks.service import alerting
    from payhooks.service.shop import authorised as shop_authorised

    buy = authorised(conn, rig)
    assert alerting.captures_failing(conn, datetime.now(UTC)) == []
    for _ in range(shop_authorised.ALERTED_AFTER):
        shop_authorised.failed(conn, Provider.RAZORPAY, buy.payment_id, "GatewayApiError: 502")
    [alert] = alerting.captures_failing(conn, datetime.now(UTC))
    assert alert.key == "captures_failing:razorpay" and "502" in alert.body
