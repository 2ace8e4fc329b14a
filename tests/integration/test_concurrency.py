"""Real concurrency: many connections delivering at the same moment, exactly one effect."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable
from typing import Any

import psycopg
import pytest

from payhooks.events import Provider, Received
from payhooks.gateways import GATEWAYS
from payhooks.intake.ingest import (
    Outcome,
    Receipt,
    ingest_received,
    ingest_received_in_transaction,
    receive,
)
from payhooks.intake.payments import find as find_payment
from payhooks.refunding import refunds
from payhooks.service.shop import captures
from payhooks.service.shop.payments import apply_event, get_payment
from payhooks.sim.deliveries import Disputed
from payhooks.sim.gateway import Delivery
from payhooks.sim.gateways import simulator
from tests.conftest import released_together
from tests.factories import ADAPTERS, GATEWAY, Purchase, deliver, purchase
from tests.racing import while_held as racing_held

THREADS = 50
# Bounds against a hang only, never a measure: a deadlock still ends at once (PostgreSQL's
# deadlock_timeout, DeadlockDetected), and a machine busy with other work makes fifty
# deliveries queued on one stock row wait past the service's 2 s lock timeout (one did).
OPTIONS = "-c lock_timeout=30000 -c statement_timeout=60000"


def at_once(database_url: str, deliveries: list[Delivery]) -> list[Receipt]:
    """Each delivery on its own connection (with the service's lock and statement timeouts),
    released together."""
    return released_together(
        deliveries,
        lambda _: psycopg.connect(database_url, autocommit=True, options=OPTIONS),
        deliver,
    )


def outcomes(receipts: list[Receipt]) -> Counter[str]:
    return Counter(r.outcome.value for r in receipts)


def count(conn, sql: str, *params) -> int:
    return conn.execute(sql, params).fetchone()[0]


@pytest.mark.parametrize("provider", list(Provider))
def test_fifty_copies_of_one_delivery_make_one_order_and_one_stock_movement(
    conn, database_url, provider
):
    buy = purchase(conn, provider, stock=100)
    answers = outcomes(at_once(database_url, [buy.captured()] * THREADS))
    if GATEWAYS[provider].confirmed_by_api:  # one claim kept for the API, nothing applied yet
        assert answers == {Outcome.CONFIRMING: 1, Outcome.DUPLICATE: THREADS - 1}
        assert count(conn, "SELECT count(*) FROM payhooks_confirmations") == 1
        assert count(conn, "SELECT count(*) FROM orders WHERE cart_id = %s", buy.cart_id) == 0
        return
    assert answers == {Outcome.PROCESSED: 1, Outcome.DUPLICATE: THREADS - 1}
    assert count(conn, "SELECT count(*) FROM orders WHERE cart_id = %s", buy.cart_id) == 1
    assert count(conn, "SELECT count(*) FROM inventory_movements WHERE reason = 'sale'") == 1
    assert count(conn, "SELECT stock FROM products WHERE sku = %s", buy.sku) == 99


def test_captured_and_order_paid_racing_make_one_order(conn, database_url):
    """Each body is sent under many event ids: the same bytes under another key are one
    delivery (key headers are not signed), so each of the two bodies is processed once."""
    buy = purchase(conn, stock=100)
    captured = [buy.captured() for _ in range(THREADS // 2)]
    paid = [buy.delivery("captured", event="order.paid") for _ in range(THREADS // 2)]
    answers = outcomes(at_once(database_url, captured + paid))
    assert answers == {Outcome.PROCESSED: 2, Outcome.DUPLICATE: THREADS - 2}
    assert count(conn, "SELECT count(*) FROM orders") == 1
    assert count(conn, "SELECT stock FROM products WHERE sku = %s", buy.sku) == 99


def test_ten_tabs_paying_one_cart_at_once_make_one_order_and_nine_refund_flags(conn, database_url):
    buy = purchase(conn, stock=100)
    deliveries = [buy.captured(payment_id=f"pay_tab{n:010d}") for n in range(10)]
    receipts = at_once(database_url, deliveries)
    assert count(conn, "SELECT count(*) FROM orders") == 1
    order_id = count(conn, "SELECT id FROM orders")
    answers = sorted((r.outcome.value, r.order_id or "") for r in receipts)
    assert answers == [("processed", "")] * 9 + [("processed", order_id)]  # the nine paid none
    flagged = [get_payment(conn, "razorpay", f"pay_tab{n:010d}").needs_refund for n in range(10)]
    assert flagged.count(True) == 9


def test_flash_sale_never_sells_stock_that_does_not_exist(conn, database_url):
    first = purchase(conn, stock=10)
    buyers = [first] + [purchase(conn, sku=first.sku) for _ in range(THREADS - 1)]
    answers = outcomes(at_once(database_url, [b.captured() for b in buyers]))
    assert answers == {Outcome.PROCESSED: THREADS}
    statuses = dict(conn.execute("SELECT status, count(*) FROM orders GROUP BY status").fetchall())
    assert statuses == {"confirmed": 10, "backordered": THREADS - 10}
    assert count(conn, "SELECT stock FROM products WHERE sku = %s", first.sku) == 0
    assert count(conn, "SELECT sum(delta) FROM inventory_movements WHERE sku = %s", first.sku) == 0


def test_parked_event_redelivered_twice_at_once_applies_once_and_both_name_the_order(
    conn, database_url
):
    from payhooks.service.shop import carts
    from tests.factories import GATEWAY

    buy = purchase(conn, stock=5)
    orphan = GATEWAY.razorpay(
        "payment.captured",
        payment_id="pay_twin00000001",
        order_id="order_twins",
        amount_paise=buy.amount_paise,
    )
    assert deliver(conn, orphan).outcome is Outcome.PARKED
    cart = carts.create_cart(conn, "t@example.com", [carts.LineItem(sku=buy.sku, quantity=1)])
    carts.checkout(conn, cart.cart_id, Provider.RAZORPAY, "order_twins")
    receipts = at_once(database_url, [orphan, orphan])
    order_id = count(conn, "SELECT id FROM orders")
    assert sorted(r.outcome.value for r in receipts) == ["duplicate", "processed"]
    assert {r.order_id for r in receipts} == {order_id}


# --- a dispute's report racing the capture that places its order ----------------------------


Apply = Callable[[psycopg.Connection[Any], Received], None]


def in_transaction(conn: psycopg.Connection[Any], received: Received) -> None:
    """The general path, inside the caller's transaction (left open)."""
    ingest_received_in_transaction(conn, received, apply_event)


def on_its_own(conn: psycopg.Connection[Any], received: Received) -> None:
    """The general path, in a transaction of its own."""
    ingest_received(conn, received, apply_event)


def one_statement(conn: psycopg.Connection[Any], received: Received) -> None:
    """``shop_first_capture``; on a connection out of autocommit, its transaction left open."""
    assert captures.first_capture(conn, received) is not None  # not declined to the general path


def received_of(delivery: Delivery) -> Received:
    return receive(ADAPTERS[delivery.provider], delivery.body, delivery.headers)


def disputed(
    buy: Purchase,
    what: str,
    minute: int,
    amount_paise: int | None = None,
    dispute_id: str = "disp_RACE",
) -> Received:
    told = Disputed(what=what, dispute_id=dispute_id, payment_id=buy.payment_id,
                    reference=buy.reference,
                    amount_paise=buy.amount_paise if amount_paise is None else amount_paise,
                    respond_by=int(time.time()) + 86_400,
                    reported_at=int(time.time()) + minute * 60)  # fmt: skip
    build = simulator(buy.provider).dispute_delivery
    assert build is not None
    return received_of(build(GATEWAY, told))


def while_held(
    database_url: str, conn, held: tuple[Apply, Received], racing: tuple[Apply, Received]
) -> None:
    """``held``'s delivery applied in a transaction left open, ``racing``'s racing it
    (tests/racing.py)."""
    racing_held(database_url, conn, lambda c: held[0](c, held[1]),
                lambda c: racing[0](c, racing[1]), options=OPTIONS)  # fmt: skip


CAPTURE_PATHS: dict[str, tuple[Apply, Apply]] = {
    "general": (in_transaction, on_its_own),
    "one statement": (one_statement, one_statement),
}


@pytest.mark.parametrize("path", list(CAPTURE_PATHS))
@pytest.mark.parametrize("held", ["capture", "report"])
def test_a_disputes_report_racing_the_capture_leaves_the_order_marked_as_it_ended(
    conn, database_url, path, held
):
    """The dispute opened, then its loss reported while the capture that places the order is
    in flight (the storm's interleaving): whichever of the two commits first, the order ends
    marked lost, on either path the capture takes."""
    buy = purchase(conn)
    assert (
        ingest_received(conn, disputed(buy, "opened", 0), apply_event).outcome is Outcome.PROCESSED
    )
    capture = received_of(buy.captured())
    lost = disputed(buy, "lost", 1)
    held_capture, racing_capture = CAPTURE_PATHS[path]
    if held == "capture":
        while_held(database_url, conn, (held_capture, capture), (on_its_own, lost))
    else:
        while_held(database_url, conn, (in_transaction, lost), (racing_capture, capture))
    marked = conn.execute(
        "SELECT dispute, dispute_id FROM orders WHERE cart_id = %s", (buy.cart_id,)
    ).fetchall()
    assert marked == [("lost", "disp_RACE")]


@pytest.mark.parametrize("path", list(CAPTURE_PATHS))
@pytest.mark.parametrize("held", ["capture", "report"])
def test_a_loss_reported_while_its_capture_is_in_flight_bounds_the_payments_refunds(
    conn, database_url, path, held
):
    """The payment's record is written by the capture and the loss by the report, each in a
    transaction the other cannot see until it commits: whichever commits first, the record
    ends counting what the dispute took back, and no refund takes it back again."""
    buy = purchase(conn)
    taken = buy.amount_paise // 2
    capture = received_of(buy.captured())
    lost = disputed(buy, "lost", 1, amount_paise=taken)
    held_capture, racing_capture = CAPTURE_PATHS[path]
    if held == "capture":
        while_held(database_url, conn, (held_capture, capture), (on_its_own, lost))
    else:
        while_held(database_url, conn, (in_transaction, lost), (racing_capture, capture))
    paid = find_payment(conn, buy.provider, buy.payment_id)
    assert paid is not None and (paid.paid_paise, paid.disputed_paise) == (buy.amount_paise, taken)
    ask = {"key": "after-the-race", "captured_paise": buy.amount_paise, "reason": "test",
           "requested_by": "test"}  # fmt: skip
    with pytest.raises(refunds.RefundTooLarge):
        refunds.request(conn, buy.provider, buy.payment_id, buy.amount_paise - taken + 1, **ask)


@pytest.mark.parametrize("held", ["refund", "report"])
def test_a_refund_asked_while_a_loss_is_reported_never_takes_back_what_the_dispute_took(
    conn, database_url, held
):
    """A refund of everything the dispute left, asked while the report of its loss is in
    flight: the two take the payment's turn, so the refund is refused once the loss counts,
    or the loss is counted after the refund it did not yet bound (held: the refund first)."""
    buy = purchase(conn)
    on_its_own(conn, received_of(buy.captured()))
    taken = buy.amount_paise // 2
    lost = disputed(buy, "lost", 1, amount_paise=taken)
    ask = {"key": f"racing-{held}", "captured_paise": buy.amount_paise, "reason": "test",
           "requested_by": "test"}  # fmt: skip
    outcome: list[object] = []

    def refund(c: psycopg.Connection[Any]) -> None:
        try:
            with c.transaction():
                refunds.request(c, buy.provider, buy.payment_id, buy.amount_paise, **ask)
            outcome.append("asked")
        except refunds.RefundTooLarge as exc:
            outcome.append(exc)

    if held == "report":
        racing_held(database_url, conn, lambda c: in_transaction(c, lost), refund,
                    options=OPTIONS)  # fmt: skip
        assert len(outcome) == 1 and isinstance(outcome[0], refunds.RefundTooLarge)
    else:
        racing_held(database_url, conn, refund, lambda c: on_its_own(c, lost),
                    options=OPTIONS)  # fmt: skip
        assert outcome == ["asked"]  # asked before the loss was known: the gateway decides
    paid = find_payment(conn, buy.provider, buy.payment_id)
    assert paid is not None and paid.disputed_paise == taken


def as_the_service(conn: psycopg.Connection[Any], received: Received) -> None:
    """The one statement, else (declined) the general path, as the service takes a capture."""
    if captures.first_capture(conn, received) is None:
        on_its_own(conn, received)


@pytest.mark.parametrize("taking", [on_its_own, as_the_service], ids=["general", "service"])
def test_two_copies_of_a_capture_and_two_losses_of_its_payment_at_once_count_both_losses(
    conn, database_url, taking
):
    """Four deliveries of one payment released together, each on its own connection: the two
    copies of the capture and the two reports take the payment's turn in some order, none
    waits for another that waits for it, and the record counts both losses."""
    buy = purchase(conn)
    copies = [buy.captured(), buy.delivery("captured", event="order.paid")]
    losses = [disputed(buy, "lost", 1, 1_000 * (n + 1), f"disp_CROWD{n}") for n in range(2)]
    released_together(
        [(taking, received_of(c)) for c in copies] + [(on_its_own, lost) for lost in losses],
        lambda _: psycopg.connect(database_url, autocommit=True, options=OPTIONS),
        lambda other, item: item[0](other, item[1]),
    )
    paid = find_payment(conn, buy.provider, buy.payment_id)
    assert paid is not None and paid.disputed_paise == 3_000
    assert count(conn, "SELECT count(*) FROM orders WHERE cart_id = %s", buy.cart_id) == 1


def full_refund(buy: Purchase) -> Delivery:
    return GATEWAY.razorpay("refund.processed", payment_id=buy.payment_id, order_id=buy.reference,
                            amount_paise=buy.amount_paise, refund_id="rfnd_RACE0001")  # fmt: skip


REFUND_RACES: dict[str, tuple[Apply, Apply]] = {
    "general": (in_transaction, on_its_own),
    "one statement": (one_statement, as_the_service),
}


@pytest.mark.parametrize("path", list(REFUND_RACES))
@pytest.mark.parametrize("held", ["capture", "refund"])
def test_a_full_refund_racing_the_capture_is_flagged_as_it_committed(
    conn, database_url, path, held
):
    """A refund of the whole payment reported while its capture is in flight: the two wait on
    the payment's row, so either the order stands and the refund is flagged against it, or the
    capture finds the money back and places no order."""
    buy = purchase(conn)
    capture = received_of(buy.captured())
    refund = received_of(full_refund(buy))
    held_capture, racing_capture = REFUND_RACES[path]
    if held == "capture":
        while_held(database_url, conn, (held_capture, capture), (on_its_own, refund))
    else:
        while_held(database_url, conn, (in_transaction, refund), (racing_capture, capture))
    orders = count(conn, "SELECT count(*) FROM orders WHERE cart_id = %s", buy.cart_id)
    flags = get_payment(conn, "razorpay", buy.payment_id).flags
    if held == "capture":
        assert (orders, flags) == (1, ("refunded_after_order",))
    else:
        assert (orders, flags) == (0, ("captured_after_full_refund",))
