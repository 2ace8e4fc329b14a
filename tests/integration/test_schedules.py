"""Generated delivery schedules: whatever the order, duplication and mix, the invariants hold."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from payhooks.events import Provider
from tests.factories import Purchase, deliver, product, purchase

KINDS = ["captured", "order.paid", "authorized", "failed"]

step = st.tuples(
    st.integers(0, 2),  # which cart
    st.integers(0, 1),  # which payment attempt of that cart
    st.sampled_from(KINDS),
    st.integers(1, 3),  # how many times it is delivered
)


def delivery_of(buy: Purchase, attempt: int, kind: str):
    payment_id = f"{buy.payment_id[:10]}a{attempt}"
    if kind == "order.paid":
        return buy.delivery("captured", payment_id=payment_id, event="order.paid")
    return buy.delivery(kind, payment_id=payment_id)


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(schedule=st.lists(step, min_size=1, max_size=12))
def test_any_schedule_keeps_orders_stock_and_payments_consistent(conn, schedule):
    sku = product(conn, stock=2).sku
    buys = [purchase(conn, Provider.RAZORPAY, sku=sku) for _ in range(3)]
    for cart, attempt, kind, times in schedule:
        delivery = delivery_of(buys[cart], attempt, kind)
        for _ in range(times):
            deliver(conn, delivery)
    carts = [b.cart_id for b in buys]
    assert_one_order_per_paid_cart(conn, carts)
    assert_stock_matches_ledger_and_orders(conn, sku, carts)
    assert_every_captured_payment_accounted_for(conn, carts)


def assert_one_order_per_paid_cart(conn, carts):
    rows = conn.execute(
        "SELECT c.status, count(o.id) FROM carts c LEFT JOIN orders o ON o.cart_id = c.id "
        "WHERE c.id = ANY(%s) GROUP BY c.id, c.status",
        (carts,),
    ).fetchall()
    assert all((status == "paid") == (orders == 1) and orders <= 1 for status, orders in rows)


def assert_stock_matches_ledger_and_orders(conn, sku, carts):
    stock, ledger = conn.execute(
        "SELECT p.stock, (SELECT sum(delta) FROM inventory_movements WHERE sku = p.sku) "
        "FROM products p WHERE sku = %s",
        (sku,),
    ).fetchone()
    confirmed = conn.execute(
        "SELECT count(*) FROM orders WHERE cart_id = ANY(%s) AND status = 'confirmed'", (carts,)
    ).fetchone()[0]
    assert stock == ledger == 2 - confirmed
    assert stock >= 0


def assert_every_captured_payment_accounted_for(conn, carts):
    lost = conn.execute(
        "SELECT p.payment_id FROM payments p LEFT JOIN orders o ON o.payment_id = p.payment_id "
        "WHERE p.cart_id = ANY(%s) AND p.status = 'captured' AND o.id IS NULL "
        "AND NOT p.needs_refund",
        (carts,),
    ).fetchall()
    assert lost == []
