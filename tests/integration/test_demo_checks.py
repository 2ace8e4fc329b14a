"""The demo's invariants can fail: each one, on a real database the shop filled, holds, and
then fails on the very fault it exists to catch."""

from __future__ import annotations

import pytest

from payhooks.events import Provider
from payhooks.sim import demo
from tests.factories import deliver, purchase


@pytest.fixture
def paid(conn):
    """Two carts paid through the real ingest path, one of them twice (a refund flag)."""
    first, second = purchase(conn, stock=5), purchase(conn, Provider.CASHFREE, stock=5)
    deliver(conn, first.captured())
    deliver(conn, second.captured())
    deliver(conn, first.captured(payment_id="pay_second0000001"))
    sent = [(Provider.RAZORPAY, first.payment_id), (Provider.CASHFREE, second.payment_id)]
    return conn, [*sent, (Provider.RAZORPAY, "pay_second0000001")]


def checks(conn, sent) -> dict[str, bool]:
    return {
        c.name: c.ok
        for c in (
            demo.one_order_per_paid_cart(conn),
            demo.stock_ledger_equals_orders(conn),
            demo.every_order_traceable(conn),
            demo.no_payment_lost(conn, sent),
            demo.one_email_per_order(conn),
        )
    }


def failing(conn, sent) -> list[str]:
    return [name for name, ok in checks(conn, sent).items() if not ok]


def test_every_invariant_holds_on_a_sound_shop(paid):
    assert failing(*paid) == []


def test_a_paid_cart_without_its_order_fails_one_order_per_paid_cart(paid):
    conn, sent = paid
    open_cart = purchase(conn)
    conn.execute("UPDATE carts SET status = 'paid' WHERE id = %s", (open_cart.cart_id,))
    assert failing(conn, sent) == ["one order per paid cart"]


def test_stock_taken_twice_fails_the_ledger(paid):
    conn, sent = paid
    conn.execute("UPDATE product_stock SET stock = stock - 1 WHERE stock > 0")
    assert "stock ledger equals orders" in failing(conn, sent)


def test_an_order_whose_delivery_record_is_gone_fails_traceability(paid):
    conn, sent = paid
    conn.execute("UPDATE processed_webhooks SET order_ref = NULL")
    assert failing(conn, sent) == ["every order traceable to its event"]


def test_a_captured_payment_the_shop_never_recorded_fails_no_payment_lost(paid):
    conn, sent = paid
    assert failing(conn, [*sent, (Provider.PAYU, "txn_never_seen")]) == ["no payment lost"]


def test_a_captured_payment_with_neither_order_nor_flag_fails_no_payment_lost(paid):
    conn, sent = paid
    conn.execute("UPDATE payments SET needs_refund = false")
    assert failing(conn, sent) == ["no payment lost"]


def test_an_order_without_its_email_fails_one_email_per_order(paid):
    conn, sent = paid
    conn.execute("DELETE FROM outbox WHERE kind = 'email'")
    assert failing(conn, sent) == ["one confirmation email per order"]
