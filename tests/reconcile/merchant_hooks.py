"""A merchant's handlers, as ``payhooks reconcile --hooks tests.reconcile.merchant_hooks:hooks``
imports them: its own orders table, paid once per payment."""

from __future__ import annotations

from payhooks import EventKind, Hooks
from payhooks.fastapi import AsyncHooks

ORDERS = """
CREATE TABLE IF NOT EXISTS merchant_orders (
    ref text PRIMARY KEY, amount bigint NOT NULL, paid_by text, paid_count int NOT NULL DEFAULT 0
)
"""
_PAY = """
UPDATE merchant_orders SET paid_by = %s, paid_count = paid_count + 1 WHERE ref = %s
"""

hooks = Hooks()


@hooks.on(EventKind.PAYMENT_CAPTURED)
def mark_paid(conn, event):
    conn.execute(_PAY, (event.payment_id, event.merchant_ref))


async_hooks = AsyncHooks()


@async_hooks.on(EventKind.PAYMENT_CAPTURED)
async def mark_paid_async(conn, event):
    await conn.execute(_PAY, (event.payment_id, event.merchant_ref))


fussy = Hooks()


@fussy.on(EventKind.PAYMENT_CAPTURED)
def refuses_one(conn, event):
    """A handler with a bug for one order only."""
    if event.merchant_ref.endswith("bad"):
        raise RuntimeError("the handler's bug")
    conn.execute(_PAY, (event.payment_id, event.merchant_ref))
