"""Razorpay payments authorised and not captured (manual capture), captured once by the
reference worker's step (``PAYHOOKS_CAPTURE_AUTHORIZED``) while their cart is open and for its
amount; the capture's answer places the order once with the late ``payment.captured``
webhook. Real PostgreSQL, the Razorpay double over a loopback socket."""

from __future__ import annotations

import threading
from dataclasses import replace
from datetime import UTC, datetime

import httpx
import psycopg
import pytest

from payhooks.events import Provider
from payhooks.intake.ingest import Outcome
from payhooks.service import alerting, application
from payhooks.service.shop import authorised as shop_authorised
from payhooks.sim.gateway_api import Fault
from tests.conftest import released_together
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


def authorised_twice(conn, rig):
    """Two tabs, both authorised: the cart's first payment, and its twin."""
    buy = authorised(conn, rig)
    twin = replace(buy, payment_id=new_payment_id(Provider.RAZORPAY))
    deliver(conn, twin.delivery("authorized"))
    paid_at_gateway(rig.api, twin, "authorized")
    return buy, twin


def refuse_orders_of(conn, payment_id: str) -> None:
    """The shop's database refuses the order of this payment (a trigger), until dropped."""
    conn.execute(
        "CREATE FUNCTION refuse_one() RETURNS trigger LANGUAGE plpgsql AS"
        " $$ BEGIN RAISE EXCEPTION 'refused by a trigger'; END $$"
    )
    conn.execute(
        "CREATE TRIGGER refuse_one BEFORE INSERT ON orders FOR EACH ROW"
        f" WHEN (NEW.payment_id = '{payment_id}') EXECUTE FUNCTION refuse_one()"
    )


def backoff_passed(conn) -> None:
    conn.execute("UPDATE payments SET capture_next_at = now() WHERE capture_next_at > now()")


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
    buy, twin = authorised_twice(conn, rig)
    application.capture_authorized(rig.reconciler())
    assert captures(rig, buy) + captures(rig, twin) == 1
    assert len(orders_of(conn, buy.cart_id)) == 1


@pytest.mark.parametrize("how", ["answer lost", "order refused"])
def test_a_cart_whose_first_capture_failed_waits_for_it_and_its_twin_is_never_captured(
    conn, rig, how
):
    """The first payment is captured at the gateway, and payhooks does not know it: the
    gateway's answer was lost (a 503 after it acted), or the shop refused its order. The
    cart waits for that payment's backoff; its twin is never captured, and the first is
    the one asked again (answered "already captured", read and applied)."""
    buy, twin = authorised_twice(conn, rig)
    if how == "answer lost":
        rig.api.fail_after_acting(Provider.RAZORPAY, Fault(status=503))
    else:
        refuse_orders_of(conn, buy.payment_id)
    reconciler = rig.reconciler()
    assert application.capture_authorized(reconciler) == 0
    assert captures(rig, buy) == 1  # the gateway took the money
    application.capture_authorized(reconciler)  # the next tick: the cart waits
    assert captures(rig, twin) == 0
    if how == "order refused":
        conn.execute("DROP TRIGGER refuse_one ON orders")
    backoff_passed(conn)
    assert application.capture_authorized(reconciler) == 1
    assert (captures(rig, buy), captures(rig, twin)) == (1, 0)
    assert [p for _, p in orders_of(conn, buy.cart_id)] == [buy.payment_id]


def test_no_payment_of_a_cart_is_captured_while_another_ones_capture_is_in_flight(conn, rig):
    """Worker A is calling the gateway to capture the cart's payment when a second payment
    of the cart is recorded that reads as the cart's first (its delivery's transaction began
    before the first's and committed after it), and worker B runs a pass: B captures
    nothing, and the customer is charged once."""
    buy = authorised(conn, rig)
    twin = replace(buy, payment_id=new_payment_id(Provider.RAZORPAY))
    paid_at_gateway(rig.api, twin, "authorized")
    worker_b: list[int] = []

    def meanwhile(request: httpx.Request) -> None:
        if request.method != "POST" or worker_b:
            return
        deliver(conn, twin.delivery("authorized"))
        conn.execute(
            "UPDATE payments SET created_at = created_at - interval '1 minute'"
            " WHERE payment_id = %s",
            (twin.payment_id,),
        )
        worker_b.append(application.capture_authorized(rig.reconciler()))

    with httpx.Client(timeout=5.0, event_hooks={"request": [meanwhile]}) as http:
        assert application.capture_authorized(rig.reconciler(http=http)) == 1  # worker A
    assert worker_b == [0]
    assert (captures(rig, buy), captures(rig, twin)) == (1, 0)
    assert [p for _, p in orders_of(conn, buy.cart_id)] == [buy.payment_id]


CARTS = 8


def test_two_workers_claiming_two_payments_of_one_cart_at_once_claim_one(conn, rig, database_url):
    """The claim just before the call, on both payments of each cart at the same instant
    from two connections: one of each cart's is claimed."""
    pairs = [authorised_twice(conn, rig) for _ in range(CARTS)]
    claims = [(buy.cart_id, p.payment_id) for buy, twin in pairs for p in (buy, twin)]

    def claim(own: psycopg.Connection, item: tuple[str, str]) -> tuple[str, bool]:
        return item[0], shop_authorised.claim(own, Provider.RAZORPAY, item[1])

    results = released_together(
        claims, lambda _: psycopg.connect(database_url, autocommit=True), claim
    )
    for buy, _ in pairs:
        assert sum(won for cart, won in results if cart == buy.cart_id) == 1


def test_one_capture_whose_order_the_database_refuses_holds_back_no_other(conn, rig):
    first, second = authorised(conn, rig), authorised(conn, rig)
    refuse_orders_of(conn, first.payment_id)
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


def test_a_capture_answered_with_no_captured_payment_backs_off_and_says_why(conn, rig):
    """Razorpay answers "already captured" and the payment then reads refunded (captured
    and refunded in its dashboard): nothing to apply. The payment is backed off like a
    failed capture, with the reason kept, and past the bound it is the alert."""
    buy = authorised(conn, rig)
    paid_at_gateway(rig.api, buy, "refunded")
    reconciler = rig.reconciler()
    assert application.capture_authorized(reconciler) == 0
    attempts, error, later = conn.execute(
        "SELECT capture_attempts, capture_error, capture_next_at > now() FROM payments"
        " WHERE payment_id = %s",
        (buy.payment_id,),
    ).fetchone()
    assert (attempts, later) == (1, True) and f"{buy.payment_id}:refunded" in error
    asked = rig.api.asked[(Provider.RAZORPAY, buy.payment_id)]
    assert application.capture_authorized(reconciler) == 0  # backed off: the gateway not asked
    assert rig.api.asked[(Provider.RAZORPAY, buy.payment_id)] == asked
    for _ in range(shop_authorised.ALERTED_AFTER - 1):
        backoff_passed(conn)
        application.capture_authorized(reconciler)
    [alert] = alerting.captures_failing(conn, datetime.now(UTC))
    assert f"{buy.payment_id}:refunded" in alert.body


def test_a_payment_failing_to_be_captured_past_the_bound_is_an_alert(conn, rig):
    buy = authorised(conn, rig)
    assert alerting.captures_failing(conn, datetime.now(UTC)) == []
    for _ in range(shop_authorised.ALERTED_AFTER):
        shop_authorised.failed(conn, Provider.RAZORPAY, buy.payment_id, "GatewayApiError: 502")
    [alert] = alerting.captures_failing(conn, datetime.now(UTC))
    assert alert.key == "captures_failing:razorpay" and "502" in alert.body
    conn.execute(  # past the days the worker asks: it asks no more, and says so no more
        "UPDATE payments SET created_at = now() - %s - interval '1 minute' WHERE payment_id = %s",
        (shop_authorised.ATTEMPTED_WINDOW, buy.payment_id),
    )
    assert shop_authorised.due(conn, Provider.RAZORPAY) == []
    assert alerting.captures_failing(conn, datetime.now(UTC)) == []


def test_a_capture_claimed_at_the_end_of_its_window_by_a_worker_that_died_is_asked_again(conn, rig):
    """A worker claims the payment in the window's last minute and dies before it calls the
    gateway. Its claim (a two-minute lease) ends after the window: the payment is still
    asked again, captured once and its order placed."""
    buy = authorised(conn, rig)
    conn.execute(
        "UPDATE payments SET created_at = now() - %s + interval '1 minute' WHERE payment_id = %s",
        (shop_authorised.WINDOW, buy.payment_id),
    )
    assert shop_authorised.claim(conn, Provider.RAZORPAY, buy.payment_id)  # then it died
    conn.execute(  # three minutes on: past the window, and past the dead worker's lease
        "UPDATE payments SET created_at = created_at - interval '3 minutes',"
        " capture_next_at = capture_next_at - interval '3 minutes' WHERE payment_id = %s",
        (buy.payment_id,),
    )
    assert application.capture_authorized(rig.reconciler()) == 1
    assert captures(rig, buy) == 1
    assert [p for _, p in orders_of(conn, buy.cart_id)] == [buy.payment_id]
