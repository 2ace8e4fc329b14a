"""A merchant's refund handlers, as ``payhooks refunds send --hooks
tests.refunds.refund_hooks:hooks`` imports them: each refund recorded in the app's own table,
counted each time a handler is handed it."""

from __future__ import annotations

from payhooks import EventKind, Hooks
from payhooks.fastapi import AsyncHooks

REFUNDS = """
CREATE TABLE IF NOT EXISTS merchant_refunds (
    refund_id text PRIMARY KEY, payment_id text NOT NULL, amount bigint NOT NULL,
    told int NOT NULL DEFAULT 1
)
"""
_RECORD = """
INSERT INTO merchant_refunds (refund_id, payment_id, amount) VALUES (%s, %s, %s)
ON CONFLICT (refund_id) DO UPDATE SET told = merchant_refunds.told + 1
"""

hooks = Hooks()


@hooks.on(EventKind.REFUND_PROCESSED)
def record(conn, event):
    conn.execute(_RECORD, (event.refund_id, event.payment_id, event.refund_amount_paise))


async_hooks = AsyncHooks()


@async_hooks.on(EventKind.REFUND_PROCESSED)
async def record_async(conn, event):
    await conn.execute(_RECORD, (event.refund_id, event.payment_id, event.refund_amount_paise))


failing = Hooks()


@failing.on(EventKind.REFUND_PROCESSED)
def cannot_record(conn, event):
    """A handler with a bug: the refund made, the app unable to record it."""
    raise RuntimeError("merchant_refunds is missing")
