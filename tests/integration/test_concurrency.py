"""Real concurrency: many connections delivering at the same moment, exactly one effect."""

from __future__ import annotations

import threading
from collections import Counter

import psycopg
import pytest

from payhooks.events import Provider
from payhooks.gateway import Delivery
from payhooks.ingest import Outcome
from payhooks.shop.payments import get_payment
from tests.factories import deliver, purchase

THREADS = 50


def at_once(database_url: str, deliveries: list[Delivery]) -> Counter[str]:
    """Each delivery on its own thread and connection, released together by a barrier."""
    barrier = threading.Barrier(len(deliveries))
    outcomes: Counter[str] = Counter()
    lock = threading.Lock()

    def run(delivery: Delivery) -> None:
        with psycopg.connect(database_url, autocommit=True) as conn:
            barrier.wait()
            outcome = deliver(conn, delivery).outcome.value
        with lock:
            outcomes[outcome] += 1

    _join([threading.Thread(target=run, args=(d,)) for d in deliveries])
    return outcomes


def _join(threads: list[threading.Thread]) -> None:
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
        assert not thread.is_alive()


def count(conn, sql: str, *params) -> int:
    return conn.execute(sql, params).fetchone()[0]


@pytest.mark.parametrize("provider", list(Provider))
def test_fifty_copies_of_one_delivery_make_one_order_and_one_stock_movement(
    conn, database_url, provider
):
    buy = purchase(conn, provider, stock=100)
    outcomes = at_once(database_url, [buy.captured()] * THREADS)
    assert outcomes == {Outcome.PROCESSED: 1, Outcome.DUPLICATE: THREADS - 1}
    assert count(conn, "SELECT count(*) FROM orders WHERE cart_id = %s", buy.cart_id) == 1
    assert count(conn, "SELECT count(*) FROM inventory_movements WHERE reason = 'sale'") == 1
    assert count(conn, "SELECT stock FROM products WHERE sku = %s", buy.sku) == 99


def test_captured_and_order_paid_racing_make_one_order(conn, database_url):
    buy = purchase(conn, stock=100)
    captured = [buy.captured() for _ in range(THREADS // 2)]
    paid = [buy.delivery("captured", event="order.paid") for _ in range(THREADS // 2)]
    outcomes = at_once(database_url, captured + paid)
    assert outcomes == {Outcome.PROCESSED: THREADS}
    assert count(conn, "SELECT count(*) FROM orders") == 1
    assert count(conn, "SELECT stock FROM products WHERE sku = %s", buy.sku) == 99


def test_two_tabs_paying_one_cart_at_once_make_one_order_and_one_refund_flag(conn, database_url):
    buy = purchase(conn, stock=100)
    deliveries = [buy.captured(payment_id=f"pay_tab{n:010d}") for n in range(10)]
    at_once(database_url, deliveries)
    assert count(conn, "SELECT count(*) FROM orders") == 1
    flagged = [get_payment(conn, "razorpay", f"pay_tab{n:010d}").needs_refund for n in range(10)]
    assert flagged.count(True) == 9


def test_flash_sale_never_sells_stock_that_does_not_exist(conn, database_url):
    first = purchase(conn, stock=10)
    buyers = [first] + [purchase(conn, sku=first.sku) for _ in range(THREADS - 1)]
    outcomes = at_once(database_url, [b.captured() for b in buyers])
    assert outcomes == {Outcome.PROCESSED: THREADS}
    statuses = dict(conn.execute("SELECT status, count(*) FROM orders GROUP BY status").fetchall())
    assert statuses == {"confirmed": 10, "backordered": THREADS - 10}
    assert count(conn, "SELECT stock FROM products WHERE sku = %s", first.sku) == 0
    assert count(conn, "SELECT sum(delta) FROM inventory_movements WHERE sku = %s", first.sku) == 0
