"""Orders and the stock they take: created once per paid cart, never below zero."""

from __future__ import annotations

from dataclasses import dataclass

from payhooks.events import Event
from payhooks.plumbing.db import Connection, shaped_rows
from payhooks.plumbing.errors import NotFound
from payhooks.refunding import refunds
from payhooks.refunding.refunds import Refund
from payhooks.service import outbox
from payhooks.service.shop import double_refunds
from payhooks.service.shop.ids import new_id, record


@dataclass(frozen=True, slots=True, kw_only=True)
class Order:
    order_id: str
    cart_id: str
    provider: str
    payment_id: str
    amount_paise: int
    status: str
    event_id: str
    dispute: str | None = None
    """Where a dispute of its payment stands (``payments.apply_event``), None when none."""
    dispute_id: str | None = None


_LINES = "SELECT sku, quantity FROM cart_items WHERE cart_id = %s ORDER BY sku"
# A slot with enough that no other order holds: buyers of one SKU do not queue on each other.
_TAKE_FREE_SLOT = """
UPDATE product_stock SET stock = stock - %(qty)s
WHERE (sku, slot) = (
    SELECT sku, slot FROM product_stock WHERE sku = %(sku)s AND stock >= %(qty)s
    ORDER BY slot LIMIT 1 FOR NO KEY UPDATE SKIP LOCKED)
RETURNING slot
"""
# Every slot with enough is held by another order: wait for the first that still has enough
# once its holder commits.
_TAKE_BUSY_SLOT = """
UPDATE product_stock SET stock = stock - %(qty)s
WHERE (sku, slot) = (
    SELECT sku, slot FROM product_stock WHERE sku = %(sku)s AND stock >= %(qty)s
    ORDER BY slot LIMIT 1 FOR NO KEY UPDATE)
RETURNING slot
"""
# No slot has enough on its own: hold them all (in slot order) and take across them.
_LOCK_ALL_SLOTS = """
SELECT slot, stock FROM product_stock WHERE sku = %s ORDER BY slot FOR NO KEY UPDATE
"""
# A slot locked, found short on recheck and skipped stays locked until commit; rolling back to
# this savepoint releases such locks before the next, waiting attempt.
_SAVEPOINT = "SAVEPOINT stock_take"
_ROLLBACK_TO = "ROLLBACK TO SAVEPOINT stock_take"
_TAKE = "UPDATE product_stock SET stock = stock - %s WHERE sku = %s AND slot = %s"
_GIVE_BACK = "UPDATE product_stock SET stock = stock + %s WHERE sku = %s AND slot = %s"
_LEFT = "SELECT sku, stock FROM products WHERE sku = ANY(%s)"
_LEDGER = """
INSERT INTO inventory_movements (sku, delta, reason, order_id) VALUES (%s, %s, 'sale', %s)
"""
_INSERT_ORDER = """
INSERT INTO orders (id, cart_id, provider, payment_id, amount_paise, status, event_id)
VALUES (%s, %s, %s, %s, %s, %s, %s)
"""
_MARK_PAID = "UPDATE carts SET status = 'paid', paid_at = now() WHERE id = %s"
# Named as Order's fields: the Order is made from them.
_COLUMNS = (
    "id AS order_id, cart_id, provider, payment_id, amount_paise, status, event_id, dispute, "
    "dispute_id"
)
_GET = f"SELECT {_COLUMNS} FROM orders WHERE id = %s"
_BY_CART = f"SELECT {_COLUMNS} FROM orders WHERE cart_id = %s"

Taken = list[tuple[str, int, int]]
"""(sku, slot, quantity) taken so far by one order: what to give back if a later line is short."""


def place_order(conn: Connection, event: Event, cart_id: str, customer_email: str) -> str:
    """Pay the cart (locked by the caller), create its order, take stock, queue the email.

    Stock slots are locked in (SKU, slot) order, and a transaction only ever waits for a slot
    ordered after every slot it holds, so two orders never deadlock. If any line cannot be
    served the order is ``backordered``: no stock moves and the merchant is alerted.
    """
    order_id = new_id("ord")
    lines: list[tuple[str, int]] = conn.execute(_LINES, (cart_id,)).fetchall()
    taken = take_stock(conn, lines)
    status = "confirmed" if taken is not None else "backordered"
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
    if taken is not None:
        for sku, qty in lines:
            conn.execute(_LEDGER, (sku, -qty, order_id))
    else:
        _alert_backorder(conn, order_id, cart_id, lines)
    outbox.enqueue(conn, confirmation(order_id, customer_email, event.amount_paise, status))
    return order_id


def take_stock(conn: Connection, lines: list[tuple[str, int]]) -> Taken | None:
    """Take every line's quantity, or nothing at all (None) if any line cannot be served."""
    taken: Taken = []
    for sku, qty in lines:
        slots = _take_line(conn, sku, qty)
        if slots is None:
            for done_sku, slot, done_qty in taken:
                conn.execute(_GIVE_BACK, (done_qty, done_sku, slot))
            return None
        taken += [(sku, slot, part) for slot, part in slots]
    return taken


def _take_line(conn: Connection, sku: str, qty: int) -> list[tuple[int, int]] | None:
    """Take ``qty`` of ``sku``: [(slot, quantity)], or None when not enough is left.

    Deadlock freedom: the first attempt never waits; every waiting attempt starts holding no
    slot of ``sku`` (the savepoint drops what a failed attempt locked) and waits in slot
    order. So a transaction only ever waits for a slot ordered after all the slots it holds.
    """
    conn.execute(_SAVEPOINT)
    for sql in (_TAKE_FREE_SLOT, _TAKE_BUSY_SLOT):
        row = conn.execute(sql, {"sku": sku, "qty": qty}).fetchone()
        if row is not None:
            return [(int(row[0]), qty)]
        conn.execute(_ROLLBACK_TO)
    return _take_across_slots(conn, sku, qty)


def _take_across_slots(conn: Connection, sku: str, qty: int) -> list[tuple[int, int]] | None:
    """The last units, spread over several slots: take from each in turn, all locks held."""
    slots: list[tuple[int, int]] = conn.execute(_LOCK_ALL_SLOTS, (sku,)).fetchall()
    if sum(stock for _, stock in slots) < qty:
        return None
    parts: list[tuple[int, int]] = []
    for slot, stock in slots:
        part = min(stock, qty - sum(p for _, p in parts))
        if part:
            conn.execute(_TAKE, (part, sku, slot))
            parts.append((slot, part))
    return parts


def _alert_backorder(
    conn: Connection, order_id: str, cart_id: str, lines: list[tuple[str, int]]
) -> None:
    left: dict[str, int] = dict(conn.execute(_LEFT, ([sku for sku, _ in lines],)).fetchall())
    short = [sku for sku, qty in lines if left.get(sku, 0) < qty]
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


def confirmation(order_id: str, email: str, amount_paise: int, status: str) -> outbox.Message:
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
    return Order(**record(conn, _GET, (order_id,), "order"))


def orders_of_cart(conn: Connection, cart_id: str) -> list[Order]:
    return shaped_rows(conn, Order, _BY_CART, (cart_id,))


_PAID = f"""
SELECT {double_refunds.PAID}, coalesce(c.currency, p.currency), {double_refunds.ORDER},
       c.attempt_id
FROM orders o JOIN payments p ON p.provider = o.provider AND p.payment_id = o.payment_id
{double_refunds.RECORD}
WHERE o.id = %s
"""


def refund(conn: Connection, order_id: str, amount_paise: int, *, key: str, reason: str) -> Refund:
    """A refund of the payment that paid ``order_id``, under the caller's ``key``
    (``payhooks.refunding.refunds``): written in a transaction of its own, sent by the worker."""
    order = get_order(conn, order_id)
    row = conn.execute(_PAID, (order_id,)).fetchone()
    if row is None:
        raise NotFound("payment of order", order_id)
    with conn.transaction():
        return refunds.request(
            conn, order.provider, order.payment_id, amount_paise, key=key,
            captured_paise=int(row[0]), reason=reason, requested_by="api",
            currency=row[1] or "INR", gateway_order_id=row[2], attempt_id=row[3],
        )  # fmt: skip


def cancel_refund(
    conn: Connection, order_id: str, key: str, *, reason: str, cancelled_by: str,
    not_at_gateway: bool = False,
) -> Refund:  # fmt: skip
    """Cancel a refund of ``order_id`` stuck ``requested`` (``payhooks.refunding.refunds.cancel``):
    ``key`` the caller's own key, or the intent's ``ph...`` key as listed."""
    order = get_order(conn, order_id)
    mine = {r.idempotency_key for r in refunds.of_payment(conn, order.provider, order.payment_id)}
    derived = refunds.idempotency_key(order.provider, order.payment_id, key)
    found = derived if derived in mine else key if key in mine else None
    if found is None:
        raise NotFound("refund", key, said=f"order {order_id!r} has no refund {key!r}")
    with conn.transaction():
        return refunds.cancel(conn, order.provider, found, reason=reason,
                              cancelled_by=cancelled_by,
                              not_at_gateway=not_at_gateway)  # fmt: skip


def refunds_of(conn: Connection, order_id: str) -> list[Refund]:
    """The refunds of the payment that paid ``order_id``, oldest first."""
    order = get_order(conn, order_id)
    return refunds.of_payment(conn, order.provider, order.payment_id)
