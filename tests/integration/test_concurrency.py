"""Real concurrency: many connections delivering at the same moment, exactly one effect."""

from __future__ import annotations

from collections import Counter

import psycopg
import pytest

from payhooks.events import Provider
from payhooks.gateways import GATEWAYS
from payhooks.intake.ingest import Outcome, Receipt
from payhooks.service.shop.payments import get_payment
from payhooks.sim.gateway import Delivery
from tests.conftest import released_together
from tests.factories import deliver, purchase

THREADS = 50
OPTIONS = "-c lock_timeout=2000 -c statement_timeout=3000"


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
    assert {(r.outcome.value, r.order_id) for r in receipts} == {("processed", order_id)}
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
