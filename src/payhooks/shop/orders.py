"""Orders and the stock they take: created once per paid cart, never below zero."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from payhooks import outbox
from payhooks.db import Connection
from payhooks.errors import NotFound
from payhooks.events import Event
from payhooks.shop.ids import new_id


@dataclass(frozen=True, slots=True, kw_only=True)
class Order:
    order_id: str
    cart_id: str
    provider: str
    payment_id: str
    amount_paise: int
    status: str
    event_id: str


_LOCK_STOCK = """
SELECT ci.sku, ci.quantity, p.stock
FROM cart_items ci JOIN products p ON p.sku = ci.sku
WHERE ci.cart_id = %s
ORDER BY ci.sku
FOR NO KEY UPDATE OF p
"""
_TAKE_STOCK = "UPDATE products SET stock = stock - %s WHERE sku = %s"
_LEDGER = """
INSERT INTO inventory_movements (sku, delta, reason, order_id) VALUES (%s, %s, 'sale', %s)
"""
_INSERT_ORDER = """
INSERT INTO orders (id, cart_id, provider, payment_id, amount_paise, status, event_id)
VALUES (%s, %s, %s, %s, %s, %s, %s)
"""
_MARK_PAID = "UPDATE carts SET status = 'paid', paid_at = now() WHERE id = %s"
_COLUMNS = "id, cart_id, provider, payment_id, amount_paise, status, event_id"
_GET = f"SELECT {_COLUMNS} FROM orders WHERE id = %s"
_BY_CART = f"SELECT {_COLUMNS} FROM orders WHERE cart_id = %s"


def place_order(conn: Connection, event: Event, cart_id: str, customer_email: str) -> str:
    """Pay the cart (locked by the caller), create its order, take stock, queue the email.

    Stock rows are locked in SKU order, so two orders never deadlock. If any line cannot be
    served the order is ``backordered``: no stock moves and the merchant is alerted.
    """
    order_id = new_id("ord")
    lines = conn.execute(_LOCK_STOCK, (cart_id,)).fetchall()
    in_stock = all(stock >= qty for _, qty, stock in lines)
    status = "confirmed" if in_stock else "backordered"
    assert event.payment_id is not None and event.amount_paise is not None
    conn.execute(_MARK_PAID, (cart_id,))
    conn.execute(
        _INSERT_ORDER,
        (
            order_id,
            cart_id,
            event.provider.value,
            event.payment_id,
            event.amount_paise,
            status,
            event.event_id,
        ),
    )
    if in_stock:
        for sku, qty, _ in lines:
            conn.execute(_TAKE_STOCK, (qty, sku))
            conn.execute(_LEDGER, (sku, -qty, order_id))
    else:
        short = [sku for sku, qty, stock in lines if stock < qty]
        outbox.enqueue(
            conn,
            outbox.alert(
                f"alert:backorder:{order_id}",
                f"Order {order_id} is backordered",
                f"Paid order {order_id} (cart {cart_id}) needs stock for: {', '.join(short)}.",
                order_id=order_id,
                skus=short,
            ),
        )
    outbox.enqueue(conn, _confirmation(order_id, customer_email, event.amount_paise, status))
    return order_id


def _confirmation(order_id: str, email: str, amount_paise: int, status: str) -> outbox.Message:
    rupees = f"{amount_paise // 100}.{amount_paise % 100:02d}"
    note = "" if status == "confirmed" else " Some items are backordered; we will ship them soon."
    return outbox.Message(
        kind=outbox.MessageKind.EMAIL,
        dedupe_key=f"order_confirmation:{order_id}",
        recipient=email,
        subject=f"Your order {order_id} is confirmed",
        body=f"Thank you. We received INR {rupees} for order {order_id}.{note}",
        payload={"order_id": order_id},
    )


def get_order(conn: Connection, order_id: str) -> Order:
    row = conn.execute(_GET, (order_id,)).fetchone()
    if row is None:
        raise NotFound("order", order_id)
    return _order(row)


def orders_of_cart(conn: Connection, cart_id: str) -> list[Order]:
    return [_order(row) for row in conn.execute(_BY_CART, (cart_id,))]


def _order(row: tuple[Any, ...]) -> Order:
    order_id, cart_id, provider, payment_id, amount, status, event_id = row
    return Order(
        order_id=order_id,
        cart_id=cart_id,
        provider=provider,
        payment_id=payment_id,
        amount_paise=amount,
        status=status,
        event_id=event_id,
    )
