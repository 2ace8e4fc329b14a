"""Stock split across slots: buyers of one SKU take from different rows, never below zero."""

from __future__ import annotations

import secrets

from payhooks.events import Provider
from payhooks.intake.ingest import Outcome
from payhooks.service.shop import carts, catalog
from payhooks.sim.gateway import new_payment_id
from tests.factories import GATEWAY, deliver, product
from tests.integration.test_concurrency import THREADS, at_once, count, outcomes


def slots_of(conn, sku: str) -> list[int]:
    rows = conn.execute(
        "SELECT stock FROM product_stock WHERE sku = %s ORDER BY slot", (sku,)
    ).fetchall()
    return [stock for (stock,) in rows]


def stock_of(conn, sku: str) -> int:
    return count(conn, "SELECT stock FROM products WHERE sku = %s", sku)


def ledger_of(conn, sku: str) -> int:
    return count(conn, "SELECT sum(delta) FROM inventory_movements WHERE sku = %s", sku)


def buy(conn, items: dict[str, int]):
    """A checked-out cart of ``items`` and its capture delivery."""
    lines = [carts.LineItem(sku=sku, quantity=qty) for sku, qty in items.items()]
    cart = carts.create_cart(conn, "buyer@example.com", lines)
    done = carts.checkout(conn, cart.cart_id, Provider.RAZORPAY)
    return GATEWAY.razorpay(
        "payment.captured",
        payment_id=new_payment_id(Provider.RAZORPAY),
        order_id=done.gateway_order_id,
        amount_paise=cart.amount_paise,
    )


def test_opening_stock_is_spread_over_slots_and_products_shows_the_sum(conn):
    sku = product(conn, stock=21).sku
    assert slots_of(conn, sku) == [3, 3, 3, 3, 3, 2, 2, 2]
    assert stock_of(conn, sku) == 21
    assert catalog.get_product(conn, sku).stock == 21


def test_a_small_stock_gets_one_slot_per_unit_and_no_stock_one_empty_slot(conn):
    assert slots_of(conn, product(conn, stock=3).sku) == [1, 1, 1]
    assert slots_of(conn, product(conn, stock=0).sku) == [0]


def test_an_order_larger_than_any_slot_takes_across_slots(conn):
    sku = product(conn, stock=8).sku
    receipt = deliver(conn, buy(conn, {sku: 5}))
    assert count(conn, "SELECT status FROM orders WHERE id = %s", receipt.order_id) == "confirmed"
    assert sorted(slots_of(conn, sku)) == [0, 0, 0, 0, 0, 1, 1, 1]
    assert stock_of(conn, sku) == ledger_of(conn, sku) == 3


def named_product(conn, prefix: str, stock: int, slots: int | None = None) -> str:
    sku = f"{prefix}-{secrets.token_hex(4)}"
    item = catalog.Product(sku=sku, name="Tea", price_paise=100, stock=stock)
    catalog.create_product(conn, item, slots=slots)
    return sku


def test_a_short_second_line_backorders_and_gives_back_the_first(conn):
    plenty, scarce = named_product(conn, "A", 10), named_product(conn, "B", 1)
    receipt = deliver(conn, buy(conn, {plenty: 2, scarce: 2}))
    status = count(conn, "SELECT status FROM orders WHERE id = %s", receipt.order_id)
    assert status == "backordered"
    assert slots_of(conn, plenty) == [2, 2, 1, 1, 1, 1, 1, 1]
    assert stock_of(conn, plenty) == ledger_of(conn, plenty) == 10
    assert stock_of(conn, scarce) == ledger_of(conn, scarce) == 1


def test_one_slot_is_the_single_stock_row_design_and_still_sells(conn):
    sku = named_product(conn, "SKU", 5, slots=1)
    assert slots_of(conn, sku) == [5]
    deliver(conn, buy(conn, {sku: 2}))
    assert slots_of(conn, sku) == [3]


def test_fifty_buyers_of_two_units_each_never_take_more_than_exists(conn, database_url):
    sku = product(conn, stock=15).sku
    deliveries = [buy(conn, {sku: 2}) for _ in range(THREADS)]
    assert outcomes(at_once(database_url, deliveries)) == {Outcome.PROCESSED: THREADS}
    confirmed = count(conn, "SELECT count(*) FROM orders WHERE status = 'confirmed'")
    assert confirmed == 7  # 14 of 15 units: one left, never below zero
    assert min(slots_of(conn, sku)) >= 0
    assert stock_of(conn, sku) == ledger_of(conn, sku) == 1


def test_buyers_of_two_scarce_skus_at_once_neither_deadlock_nor_oversell(conn, database_url):
    first, second = sorted(product(conn, stock=6).sku for _ in range(2))
    deliveries = [buy(conn, {first: 1 + n % 2, second: 1 + (n + 1) % 2}) for n in range(THREADS)]
    assert outcomes(at_once(database_url, deliveries)) == {Outcome.PROCESSED: THREADS}
    for sku in (first, second):
        sold = count(
            conn,
            "SELECT coalesce(sum(ci.quantity), 0) FROM orders o "
            "JOIN cart_items ci ON ci.cart_id = o.cart_id "
            "WHERE o.status = 'confirmed' AND ci.sku = %s",
            sku,
        )
        assert 0 <= stock_of(conn, sku) == ledger_of(conn, sku) == 6 - sold
        assert min(slots_of(conn, sku)) >= 0
