"""A shop on FastAPI whose orders are paid by payment webhooks, made exactly-once by payhooks.

Its one table is its own: ``orders``, written at checkout (``POST /orders``) with what the
order costs, under the reference the shop gives the gateway (Razorpay order id, Cashfree
order id, PayU txnid). The checkout tells payhooks the same (``payhooks.fastapi.expect``, in
the order's transaction), so a capture of another amount or currency is parked by payhooks and
never reaches ``mark_paid``, and ``payhooks reconcile --hooks examples.fastapi_shop.app:hooks``
can ask the gateway about an order whose webhook never came. The operator console is mounted at
``/payhooks/console`` (operators added with ``payhooks operator add NAME --database-url ...``):
parked deliveries to replay or settle, each order's timeline, webhook health. A capture pays
the order only
once: payhooks stops a re-sent delivery; the order's status stops two *different* deliveries of
one payment (Razorpay's ``payment.captured`` and ``order.paid``) and a second payment from
replacing the first.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from typing import Annotated, Any, Literal

import psycopg
from fastapi import FastAPI, HTTPException
from psycopg.rows import dict_row
from psycopg_pool import AsyncConnectionPool
from pydantic import BaseModel, ConfigDict, Field

import payhooks
from payhooks import Adapter, Applied, Cashfree, Event, EventKind, Outcome, PayU, Razorpay
from payhooks.console import close, console
from payhooks.fastapi import AsyncConnection, AsyncHooks, expect, router
from payhooks.gateways import read_secrets
from payhooks.gateways.juspay import Juspay
from payhooks.gateways.phonepe import PhonePe

log = logging.getLogger("fastapi_shop")

ORDERS = """
CREATE TABLE IF NOT EXISTS orders (
    merchant_ref text PRIMARY KEY,
    amount_paise bigint NOT NULL CHECK (amount_paise > 0),
    currency text NOT NULL,
    status text NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'paid')),
    provider text,
    payment_id text,
    created_at timestamptz NOT NULL DEFAULT now(),
    paid_at timestamptz
)
"""
CHECKOUT = """
INSERT INTO orders (merchant_ref, amount_paise, currency) VALUES (%s, %s, %s)
ON CONFLICT (merchant_ref) DO NOTHING
RETURNING merchant_ref
"""
ORDER = """
SELECT merchant_ref, amount_paise, currency, status, provider, payment_id, created_at, paid_at
FROM orders WHERE merchant_ref = %s
"""
LOCK_ORDER = """
SELECT amount_paise, currency, status, payment_id FROM orders WHERE merchant_ref = %s FOR UPDATE
"""
MARK_PAID = """
UPDATE orders SET status = 'paid', provider = %s, payment_id = %s, paid_at = now()
WHERE merchant_ref = %s AND status = 'pending'
"""

hooks = AsyncHooks()


@hooks.on(EventKind.PAYMENT_CAPTURED)
async def mark_paid(conn: AsyncConnection, event: Event) -> Applied | None:
    """Runs inside the claim's transaction: the order's change and the claim commit together.

    The row lock makes ``payment.captured`` and ``order.paid`` of one payment, or two
    payments, arriving together take turns; the second then finds the order paid."""
    if event.merchant_ref is None:
        return Applied(outcome=Outcome.IGNORED)  # a payment not made through our checkout
    cursor = await conn.execute(LOCK_ORDER, (event.merchant_ref,))
    order = await cursor.fetchone()
    if order is None:
        return Applied(outcome=Outcome.PARKED)  # no checkout (yet): kept, to be replayed
    amount_paise, currency, status, payment_id = order
    if (event.amount_paise, event.currency) != (amount_paise, currency):
        # Captured, but not what the order costs (payhooks parks these for the orders it was
        # told of at checkout; this catches the rest): never mark it paid. The order stays
        # pending and a person decides: refund the payment, or collect the difference.
        _flag("payment_amount_mismatch", event)
        return Applied(outcome=Outcome.IGNORED, order_id=event.merchant_ref)
    if status == "paid" and payment_id != event.payment_id:
        # Paid already, by another payment: this one is the customer's money twice. The order
        # keeps its first payment; a person refunds the second.
        _flag("payment_for_paid_order", event)
        return Applied(outcome=Outcome.IGNORED, order_id=event.merchant_ref)
    await conn.execute(MARK_PAID, (event.provider.value, event.payment_id, event.merchant_ref))
    return Applied(outcome=Outcome.PROCESSED, order_id=event.merchant_ref)


def _flag(name: str, event: Event) -> None:
    log.warning(
        name,
        extra={
            "order": event.merchant_ref,
            "payment_id": event.payment_id,
            "paid": event.amount_paise,
            "currency": event.currency,
        },
    )


class Checkout(BaseModel):
    """What the checkout page posts. References are what every gateway accepts as an order
    id (letters, digits, ``_`` and ``-``), and the amount is whole paise: never a float.
    ``gateway`` is where the customer pays (Razorpay unless said)."""

    model_config = ConfigDict(extra="forbid", strict=True)

    merchant_ref: Annotated[str, Field(pattern=r"^[A-Za-z0-9_-]{1,64}$")]
    amount_paise: Annotated[int, Field(gt=0, le=2**63 - 1)]
    currency: Annotated[str, Field(pattern=r"^[A-Z]{3}$")]
    gateway: Literal["razorpay", "cashfree", "payu", "phonepe", "juspay"] = "razorpay"


def migrate(database_url: str) -> None:
    """payhooks' table, then the shop's: run once per deploy, before serving."""
    with psycopg.connect(database_url, autocommit=True) as conn:
        payhooks.migrate(conn)
        conn.execute(ORDERS)


def create_app(database_url: str, adapters: list[Adapter]) -> FastAPI:
    pool = AsyncConnectionPool(database_url, open=False, kwargs={"autocommit": True})
    # The operators' console: its own two connections, its own login (payhooks_operators).
    operators = console(database_url, adapters=adapters, hooks=hooks, pool=pool)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        await pool.open()
        try:
            yield
        finally:
            await pool.close()
            await asyncio.to_thread(close, operators)

    app = FastAPI(title="fastapi_shop", lifespan=lifespan)
    app.include_router(router(adapters=adapters, hooks=hooks, pool=pool))
    app.mount("/payhooks/console", operators)

    @app.post("/orders", status_code=201)
    async def checkout(order: Checkout) -> dict[str, Any]:
        """Checkout: the order, pending, with what it costs, before the customer pays; and,
        in the same transaction, what payhooks must see it paid."""
        async with pool.connection() as conn:
            async with conn.transaction():
                placed = (order.merchant_ref, order.amount_paise, order.currency)
                cursor = await conn.execute(CHECKOUT, placed)
                if await cursor.fetchone() is None:
                    raise HTTPException(
                        status_code=409, detail="an order with this merchant_ref exists"
                    )
                await expect(
                    conn, order.gateway, order.merchant_ref, order.amount_paise, order.currency
                )
            return await _shown(conn, order.merchant_ref)

    @app.get("/orders/{merchant_ref}")
    async def show_order(merchant_ref: str) -> dict[str, Any]:
        async with pool.connection() as conn:
            return await _shown(conn, merchant_ref)

    return app


async def _shown(conn: psycopg.AsyncConnection[Any], merchant_ref: str) -> dict[str, Any]:
    cursor = conn.cursor(row_factory=dict_row)
    row = await (await cursor.execute(ORDER, (merchant_ref,))).fetchone()
    if row is None:
        raise HTTPException(status_code=404, detail="no such order")
    return row


def adapters_from(env: Mapping[str, str]) -> list[Adapter]:
    """The gateways whose secrets are set. A variable holds one secret exactly as written,
    or several (while one is rotated out) as a JSON array: '["whsec_new", "whsec_old"]'.
    What payhooks refuses in one (an array that is not JSON, a credential without its ``:``)
    is a ``ValueError`` naming the variable, as the app starts."""
    found: list[Adapter] = []
    if env.get("RAZORPAY_WEBHOOK_SECRETS"):
        found.append(_read(env, "RAZORPAY_WEBHOOK_SECRETS", lambda given: Razorpay(secrets=given)))
    if env.get("CASHFREE_CLIENT_SECRETS"):
        found.append(_read(env, "CASHFREE_CLIENT_SECRETS", lambda given: Cashfree(secrets=given)))
    if env.get("PAYU_MERCHANT_KEY") and env.get("PAYU_SALTS"):
        key = env["PAYU_MERCHANT_KEY"]
        found.append(_read(env, "PAYU_SALTS", lambda given: PayU(merchant_key=key, salts=given)))
    # PhonePe and Juspay callbacks carry only the username:password set in their dashboards:
    # each takes effect when the gateway's status API confirms it (`payhooks confirm`).
    if env.get("PHONEPE_WEBHOOK_CREDENTIALS"):
        found.append(
            _read(env, "PHONEPE_WEBHOOK_CREDENTIALS", lambda given: PhonePe(credentials=given))
        )
    if env.get("JUSPAY_WEBHOOK_CREDENTIALS"):
        found.append(
            _read(env, "JUSPAY_WEBHOOK_CREDENTIALS", lambda given: Juspay(credentials=given))
        )
    return found


def _read(
    env: Mapping[str, str], variable: str, adapter: Callable[[tuple[str, ...]], Adapter]
) -> Adapter:
    """``adapter`` given what ``variable`` holds, never split on commas (a secret may hold
    one); what payhooks refuses in it is said naming the variable, never quoting it."""
    try:
        return adapter(read_secrets(env[variable]))
    except ValueError as exc:
        raise ValueError(f"{variable} is refused: {exc}") from None


def main() -> None:
    import uvicorn

    url = os.environ["DATABASE_URL"]
    try:
        adapters = adapters_from(os.environ)
    except ValueError as exc:  # one line naming the variable, before the database is touched
        raise SystemExit(f"fastapi_shop: {exc}") from None
    migrate(url)
    app = create_app(url, adapters)
    uvicorn.run(app, host="127.0.0.1", port=int(os.environ.get("PORT", "8000")))
