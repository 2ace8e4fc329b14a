"""A merchant's hooks written for rows as dicts (its pool made with ``row_factory=dict_row``),
as ``payhooks confirm|replay|reconcile --hooks tests.fastapi.dict_hooks:async_hooks`` imports
them: each door that runs them must hand them the rows they are written for."""

from __future__ import annotations

from psycopg.rows import dict_row

from payhooks import Applied, EventKind, Hooks, Outcome
from payhooks.fastapi import AsyncHooks

ORDERS = (
    "CREATE TABLE IF NOT EXISTS dict_orders (ref text PRIMARY KEY, amount_paise bigint NOT NULL,"
    " currency text NOT NULL, paid_by text)"
)
_ORDER = "SELECT amount_paise, currency FROM dict_orders WHERE ref = %s FOR UPDATE"
_PAY = "UPDATE dict_orders SET paid_by = %s WHERE ref = %s"


def _answer(row, event) -> Applied | None:
    """Parked without a checkout, ignored at another amount, else paid (``None``)."""
    if row is None:
        return Applied(outcome=Outcome.PARKED)
    if (event.amount_paise, event.currency) != (row["amount_paise"], row["currency"]):
        return Applied(outcome=Outcome.IGNORED)
    return None


hooks = Hooks(row_factory=dict_row)


@hooks.on(EventKind.PAYMENT_CAPTURED)
def mark_paid(conn, event):
    answer = _answer(conn.execute(_ORDER, (event.merchant_ref,)).fetchone(), event)
    if answer is None:
        conn.execute(_PAY, (event.payment_id, event.merchant_ref))
    return answer


async_hooks = AsyncHooks(row_factory=dict_row)


@async_hooks.on(EventKind.PAYMENT_CAPTURED)
async def mark_paid_async(conn, event):
    found = await (await conn.execute(_ORDER, (event.merchant_ref,))).fetchone()
    answer = _answer(found, event)
    if answer is None:
        await conn.execute(_PAY, (event.payment_id, event.merchant_ref))
    return answer
