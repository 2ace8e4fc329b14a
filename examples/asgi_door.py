"""A webhook door on payhooks' async core in a bare ASGI app: what a route of a framework
payhooks has no module for (Litestar, Quart, Sanic) does, in the fewest lines. It needs
``pip install 'payhooks[aio]'`` and an ASGI server (docs/fastapi.md, "Another framework"):

    DATABASE_URL=postgresql://... RAZORPAY_WEBHOOK_SECRET=... uvicorn examples.asgi_door:app

``POST /webhooks/{gateway}``: the body read up to the gateway's bound, then the step every
integration shares (which gateway, verify, claim, your handlers in the claim's transaction,
answer, log), each request noted in the delivery log the console and health read.
"""

from __future__ import annotations

import json
import logging
import os
from typing import Any

import anyio
import psycopg
import psycopg_pool

from payhooks import EventKind, PayhooksError, PayloadTooLarge, Razorpay, migrate
from payhooks.aio.deliveries import awaited
from payhooks.aio.hooks import AsyncHooks
from payhooks.intake.endpoint import Endpoint, Reply
from payhooks.operations.deliverylog import DeliveryLog, own_connection

DATABASE_URL = os.environ["DATABASE_URL"]
PREFIX = "/webhooks/"

hooks = AsyncHooks()


@hooks.on(EventKind.PAYMENT_CAPTURED)
async def paid(conn: psycopg.AsyncConnection[Any], event: Any) -> None:
    # In the claim's transaction: a copy of this delivery never reaches here again.
    # Keyed by the payment: Razorpay's order.paid is another delivery of the same payment.
    await conn.execute(
        "INSERT INTO shop_payments (payment_id, amount_paise) VALUES (%s, %s)"
        " ON CONFLICT (payment_id) DO NOTHING",
        (event.payment_id, event.amount_paise),
    )


class Door:
    """The app: its pool, the delivery log and the claim opened at startup, closed at
    shutdown (the log's last lines written before the pool closes)."""

    def __init__(self) -> None:
        secrets = (os.environ["RAZORPAY_WEBHOOK_SECRET"],)
        self.log = DeliveryLog(own_connection(DATABASE_URL))
        logger = logging.getLogger("shop.payhooks")
        self.endpoint = Endpoint.serving([Razorpay(secrets=secrets)], logger, self.log.note)
        self.pool = psycopg_pool.AsyncConnectionPool(DATABASE_URL, max_size=10, open=False)
        self.deliver = awaited(self.pool, hooks, anyio.CapacityLimiter(self.pool.max_size))

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            await self.lifespan(receive, send)
            return
        path = scope["path"]
        if scope["method"] != "POST" or not path.startswith(PREFIX):
            await respond(send, 404, {"error": "not_found"})
            return
        gateway = path.removeprefix(PREFIX)
        try:
            body = await read_bounded(receive, self.endpoint.bound(gateway), gateway)
        except PayhooksError as exc:  # an unknown gateway, a body past its bound
            await answer(send, self.endpoint.unread(gateway, exc))
            return
        except Disconnected:  # no one to answer, and half a body is no delivery to verify
            return
        pairs = [(name.decode("latin-1"), value.decode("latin-1"))
                 for name, value in scope["headers"]]  # fmt: skip
        await answer(send, await self.deliver(self.endpoint, gateway, body, pairs))

    async def lifespan(self, receive: Any, send: Any) -> None:
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                try:
                    await self.start()
                except Exception as exc:  # the server says so and exits, serving nothing
                    await send({"type": "lifespan.startup.failed", "message": repr(exc)})
                    return
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await anyio.to_thread.run_sync(self.log.stop)
                await self.pool.close()
                await send({"type": "lifespan.shutdown.complete"})
                return

    async def start(self) -> None:
        with psycopg.connect(DATABASE_URL, autocommit=True) as conn:
            migrate(conn)  # payhooks' tables; yours by your own migrations
            conn.execute(
                "CREATE TABLE IF NOT EXISTS shop_payments "
                "(payment_id text PRIMARY KEY, amount_paise bigint NOT NULL)"
            )
        await self.pool.open(wait=True)
        self.log.start()


class Disconnected(Exception):
    """The client went away before its whole body came."""


async def read_bounded(receive: Any, limit: int, gateway: str) -> bytes:
    """The body's exact bytes, refused as soon as they pass the gateway's bound."""
    chunks, size, more = [], 0, True
    while more:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise Disconnected
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            raise PayloadTooLarge(gateway, f"body exceeds {limit} bytes")
        chunks.append(chunk)
        more = message.get("more_body", False)
    return b"".join(chunks)


async def answer(send: Any, reply: Reply) -> None:
    """The shared step's answer: its status and JSON body; a body refused unread closes the
    connection (the rest of it would be read as the next request)."""
    await respond(send, reply.status, reply.body, close=reply.close)


async def respond(send: Any, status: int, body: dict[str, Any], close: bool = False) -> None:
    headers = [(b"content-type", b"application/json")]
    if close:
        headers.append((b"connection", b"close"))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": json.dumps(body).encode()})


app = Door()
