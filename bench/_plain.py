"""The yardstick beside payhooks: the seed's design written plainly, by hand, on the same stack.

    python bench/_plain.py --port 8002 --pool 16

What a careful merchant writes from the seed without payhooks: a Starlette app on psycopg's
async pool, served by uvicorn. It checks Razorpay's signature (HMAC-SHA256, hex, of the exact
body; header ``X-Razorpay-Signature``) over the exact bytes, parses the event, and in one
transaction claims ``(provider, event_id)`` insert-first (the event id from
``X-Razorpay-Event-Id``), marks the cart paid, takes the stock, inserts the order and queues
the email: five statements. No stored body or headers, no payment state machine, no ledger, no
amount check. Its tables are the seed's, in a schema of their own (``plain``), so it runs on
the same database beside payhooks' tables. Statements are prepared as psycopg prepares them by
default (on their fifth use per connection).

The webhook secret comes from ``RAZORPAY_WEBHOOK_SECRET``, the database from ``DATABASE_URL``.
"""

from __future__ import annotations

import argparse
import hashlib
import hmac
import json
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import psycopg
import psycopg_pool
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse
from starlette.routing import Route

SECRET_VARIABLE = "RAZORPAY_WEBHOOK_SECRET"

# The seed's tables (docs/design.md, "Data model"): the claim with the seed's four columns, and
# the shop without payments or a ledger.
SCHEMA = """
CREATE SCHEMA plain;
CREATE TABLE plain.processed_webhooks (
    provider     text        NOT NULL,
    event_id     text        NOT NULL,
    order_ref    text,
    processed_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (provider, event_id)
);
CREATE TABLE plain.products (
    sku         text    PRIMARY KEY,
    name        text    NOT NULL,
    price_paise bigint  NOT NULL CHECK (price_paise >= 0),
    stock       integer NOT NULL CHECK (stock >= 0)
);
CREATE TABLE plain.carts (
    id             text   PRIMARY KEY,
    customer_email text   NOT NULL,
    amount_paise   bigint NOT NULL CHECK (amount_paise >= 0),
    status         text   NOT NULL DEFAULT 'open' CHECK (status IN ('open', 'paid')),
    paid_at        timestamptz
);
CREATE TABLE plain.cart_items (
    cart_id     text    NOT NULL REFERENCES plain.carts (id),
    sku         text    NOT NULL REFERENCES plain.products (sku),
    quantity    integer NOT NULL CHECK (quantity > 0),
    price_paise bigint  NOT NULL,
    PRIMARY KEY (cart_id, sku)
);
CREATE TABLE plain.checkouts (
    provider         text NOT NULL,
    gateway_order_id text NOT NULL,
    cart_id          text NOT NULL REFERENCES plain.carts (id),
    PRIMARY KEY (provider, gateway_order_id)
);
CREATE TABLE plain.orders (
    id           text   PRIMARY KEY,
    cart_id      text   NOT NULL UNIQUE REFERENCES plain.carts (id),
    provider     text   NOT NULL,
    payment_id   text   NOT NULL,
    amount_paise bigint NOT NULL,
    event_id     text   NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT now()
);
CREATE TABLE plain.outbox (
    id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    dedupe_key text   NOT NULL UNIQUE,
    recipient  text   NOT NULL,
    subject    text   NOT NULL,
    body       text   NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    sent_at    timestamptz
);
CREATE INDEX outbox_pending ON plain.outbox (created_at) WHERE sent_at IS NULL;
"""

# The five statements of a capture, in its one transaction.
CLAIM = """
INSERT INTO plain.processed_webhooks (provider, event_id, order_ref) VALUES (%s, %s, %s)
ON CONFLICT DO NOTHING RETURNING 1
"""
MARK_PAID = """
UPDATE plain.carts c SET status = 'paid', paid_at = now()
FROM plain.checkouts k
WHERE k.provider = %s AND k.gateway_order_id = %s AND c.id = k.cart_id AND c.status = 'open'
RETURNING c.id, c.customer_email, c.amount_paise
"""
TAKE_STOCK = """
UPDATE plain.products p SET stock = p.stock - i.quantity
FROM plain.cart_items i WHERE i.cart_id = %s AND p.sku = i.sku
"""
INSERT_ORDER = """
INSERT INTO plain.orders (id, cart_id, provider, payment_id, amount_paise, event_id)
VALUES (%s, %s, %s, %s, %s, %s)
"""
QUEUE_EMAIL = """
INSERT INTO plain.outbox (dedupe_key, recipient, subject, body) VALUES (%s, %s, %s, %s)
ON CONFLICT (dedupe_key) DO NOTHING
"""
STATEMENTS = {
    "claim": CLAIM,
    "mark paid": MARK_PAID,
    "take stock": TAKE_STOCK,
    "insert order": INSERT_ORDER,
    "queue email": QUEUE_EMAIL,
}

# The bench's carts of the plain shop: ``cart_<prefix>n`` of one unit of one of the SKUs,
# checked out as ``order_<prefix>n``.
SEED_PRODUCTS = """
INSERT INTO plain.products (sku, name, price_paise, stock)
SELECT 'SKU' || g, 'bench', 100, %(stock)s FROM generate_series(1, %(skus)s) g
"""
SEED_CARTS = [
    """INSERT INTO plain.carts (id, customer_email, amount_paise)
       SELECT 'cart_' || %(prefix)s || g, 'b@example.com', 100
       FROM generate_series(1, %(carts)s) g""",
    """INSERT INTO plain.cart_items (cart_id, sku, quantity, price_paise)
       SELECT 'cart_' || %(prefix)s || g, 'SKU' || (g %% %(spread)s + 1), 1, 100
       FROM generate_series(1, %(carts)s) g""",
    """INSERT INTO plain.checkouts (provider, gateway_order_id, cart_id)
       SELECT 'razorpay', 'order_' || %(prefix)s || g, 'cart_' || %(prefix)s || g
       FROM generate_series(1, %(carts)s) g""",
]
CHECKS = {
    "plain: paid carts without their order and email": """
        SELECT count(*) FROM plain.carts c
        LEFT JOIN plain.orders o ON o.cart_id = c.id
        LEFT JOIN plain.outbox x ON x.dedupe_key = 'order_confirmation:' || o.id
        WHERE c.status = 'paid' AND x.id IS NULL""",
    "plain: orders without their claim": """
        SELECT count(*) FROM plain.orders o
        LEFT JOIN plain.processed_webhooks w ON w.provider = o.provider
                                            AND w.event_id = o.event_id
        WHERE w.event_id IS NULL""",
}


def answer(status: int, outcome: str) -> JSONResponse:
    return JSONResponse({"status": outcome}, status_code=status)


def create(url: str, secret: bytes, pool_size: int) -> Starlette:
    pool = psycopg_pool.AsyncConnectionPool(
        url, min_size=min(2, pool_size), max_size=pool_size, kwargs={"autocommit": True}, open=False
    )

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        await pool.open()
        try:
            yield
        finally:
            await pool.close()

    async def razorpay(request: Request) -> JSONResponse:
        body = await request.body()
        signature = request.headers.get("x-razorpay-signature", "")
        expected = hmac.new(secret, body, hashlib.sha256).hexdigest()
        if not hmac.compare_digest(expected, signature):
            return answer(400, "bad signature")
        event_id = request.headers.get("x-razorpay-event-id")
        if not event_id:
            return answer(400, "no event id")
        try:
            event = json.loads(body)
            kind = event["event"]
            payment = event["payload"]["payment"]["entity"]
            payment_id, gateway_order = str(payment["id"]), str(payment["order_id"])
        except (ValueError, KeyError, TypeError):
            return answer(400, "malformed")
        if kind != "payment.captured":
            return answer(200, "ignored")
        order_id = "ord_" + payment_id
        outcome = "duplicate"
        async with pool.connection() as conn, conn.transaction():
            claimed = await conn.execute(CLAIM, ("razorpay", event_id, order_id))
            if await claimed.fetchone() is None:
                raise psycopg.Rollback  # ends the transaction block, nothing written
            paid = await conn.execute(MARK_PAID, ("razorpay", gateway_order))
            cart = await paid.fetchone()
            if cart is None:  # no such checkout, or the cart is paid already: the claim stays
                outcome = "ignored"
            else:
                cart_id, email, amount = cart
                await conn.execute(TAKE_STOCK, (cart_id,))
                await conn.execute(
                    INSERT_ORDER, (order_id, cart_id, "razorpay", payment_id, amount, event_id)
                )
                await conn.execute(
                    QUEUE_EMAIL,
                    (
                        f"order_confirmation:{order_id}",
                        email,
                        "Your order is confirmed",
                        f"Thank you. We received INR {amount / 100:.2f}.",
                    ),
                )
                outcome = "processed"
        return answer(200, outcome)

    async def readyz(request: Request) -> PlainTextResponse:
        return PlainTextResponse("ready")

    return Starlette(
        routes=[
            Route("/webhooks/razorpay", razorpay, methods=["POST"]),
            Route("/readyz", readyz),
        ],
        lifespan=lifespan,
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--pool", type=int, default=10, help="most connections to PostgreSQL")
    args = parser.parse_args()
    app = create(os.environ["DATABASE_URL"], os.environ[SECRET_VARIABLE].encode(), args.pool)
    uvicorn.run(app, host="127.0.0.1", port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
