"""A shop on FastAPI whose orders come from payment webhooks, made exactly-once by payhooks.

Its one table is its own: ``orders``, one row per merchant reference (the order id it gave
the gateway at checkout). payhooks stops a re-sent delivery; the unique reference stops two
*different* deliveries of one payment (Razorpay's ``payment.captured`` and ``order.paid``).
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from typing import Any

import psycopg
from fastapi import FastAPI, HTTPException
from psycopg_pool import AsyncConnectionPool

import payhooks
from payhooks import Adapter, Applied, Cashfree, Event, EventKind, Outcome, PayU, Razorpay
from payhooks.fastapi import AsyncConnection, AsyncHooks, router
from payhooks.providers import read_secrets

ORDERS = """
CREATE TABLE IF NOT EXISTS orders (
    merchant_ref text PRIMARY KEY,
    provider text NOT NULL,
    payment_id text NOT NULL,
    amount_paise bigint NOT NULL,
    currency text NOT NULL,
    paid_at timestamptz NOT NULL DEFAULT now()
)
"""
PLACE_ORDER = """
INSERT INTO orders (merchant_ref, provider, payment_id, amount_paise, currency)
VALUES (%s, %s, %s, %s, %s)
ON CONFLICT (merchant_ref) DO NOTHING
"""
ORDER = "SELECT merchant_ref, provider, payment_id, amount_paise, currency FROM orders"

hooks = AsyncHooks()


@hooks.on(EventKind.PAYMENT_CAPTURED)
async def place_order(conn: AsyncConnection, event: Event) -> Applied | None:
    """Runs inside the claim's transaction: the row and the claim commit together."""
    if event.merchant_ref is None:
        return Applied(outcome=Outcome.IGNORED)  # a payment not made through our checkout
    await conn.execute(
        PLACE_ORDER,
        (
            event.merchant_ref,
            event.provider.value,
            event.payment_id,
            event.amount_paise,
            event.currency or "INR",
        ),
    )
    return Applied(outcome=Outcome.PROCESSED, order_id=event.merchant_ref)


def migrate(database_url: str) -> None:
    """payhooks' table, then the shop's: run once per deploy, before serving."""
    with psycopg.connect(database_url, autocommit=True) as conn:
        payhooks.migrate(conn)
        conn.execute(ORDERS)


def create_app(database_url: str, adapters: list[Adapter]) -> FastAPI:
    pool = AsyncConnectionPool(database_url, open=False, kwargs={"autocommit": True})

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        await pool.open()
        try:
            yield
        finally:
            await pool.close()

    app = FastAPI(title="fastapi_shop", lifespan=lifespan)
    app.include_router(router(adapters=adapters, hooks=hooks, pool=pool))

    @app.get("/orders/{merchant_ref}")
    async def get_order(merchant_ref: str) -> dict[str, Any]:
        async with pool.connection() as conn:
            cursor = await conn.execute(ORDER + " WHERE merchant_ref = %s", (merchant_ref,))
            row = await cursor.fetchone()
        if row is None:
            raise HTTPException(status_code=404, detail="no such order")
        names = ("merchant_ref", "provider", "payment_id", "amount_paise", "currency")
        return dict(zip(names, row, strict=True))

    return app


def adapters_from(env: Mapping[str, str]) -> list[Adapter]:
    """The gateways whose secrets are set. A variable holds one secret exactly as written,
    or several (while one is rotated out) as a JSON array: '["whsec_new", "whsec_old"]'."""
    found: list[Adapter] = []
    if env.get("RAZORPAY_WEBHOOK_SECRETS"):
        found.append(Razorpay(secrets=_listed(env["RAZORPAY_WEBHOOK_SECRETS"])))
    if env.get("CASHFREE_CLIENT_SECRETS"):
        found.append(Cashfree(secrets=_listed(env["CASHFREE_CLIENT_SECRETS"])))
    if env.get("PAYU_MERCHANT_KEY") and env.get("PAYU_SALTS"):
        found.append(PayU(merchant_key=env["PAYU_MERCHANT_KEY"], salts=_listed(env["PAYU_SALTS"])))
    return found


def _listed(value: str) -> tuple[str, ...]:
    return read_secrets(value)  # never split on commas: a secret may hold one


def main() -> None:
    import uvicorn

    url = os.environ["DATABASE_URL"]
    migrate(url)
    app = create_app(url, adapters_from(os.environ))
    uvicorn.run(app, host="127.0.0.1", port=int(os.environ.get("PORT", "8000")))
