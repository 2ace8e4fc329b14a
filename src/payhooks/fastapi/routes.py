"""``router()``: the webhook route a merchant mounts on their own FastAPI app.

The route is ``payhooks.starlette``'s: it reads the body bounded by the gateway's adapter and
hands it to the shared step (``payhooks.intake.endpoint``), which verifies and parses off the event
loop, claims it and runs the merchant's handlers in the claim's transaction on the merchant's
pool, and answers from the core's one table (``payhooks.intake.answers``). The router's lifespan is
the route's (the delivery log written to its last line when the app stops), and FastAPI's
``include_router`` makes it part of the app's.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Unpack, overload

from fastapi import APIRouter

from payhooks import starlette
from payhooks.aio.deliveries import AsyncPool, SyncPool
from payhooks.aio.hooks import AsyncHandler
from payhooks.gateways import Adapter
from payhooks.intake.ingest import Handler
from payhooks.starlette import AsyncWiring, SyncWiring

log = logging.getLogger("payhooks.fastapi")


@overload
def router(*, prefix: str = ..., **wiring: Unpack[SyncWiring]) -> APIRouter: ...
@overload
def router(*, prefix: str = ..., **wiring: Unpack[AsyncWiring]) -> APIRouter: ...


def router(
    *,
    adapters: Iterable[Adapter],
    hooks: Handler | AsyncHandler,
    pool: SyncPool | AsyncPool,
    prefix: str = "/webhooks",
    threads: int | None = None,
    delivery_log: starlette.DeliveryLogOption = True,
) -> APIRouter:
    """``POST {prefix}/{provider}`` for each adapter's gateway: ``app.include_router(...)`` in a
    FastAPI app, or ``Starlette(routes=router(...).routes)`` (or ``payhooks.starlette.route``).

    ``pool`` is the merchant's: a ``ConnectionPool`` runs sync ``hooks`` (``payhooks.Hooks``)
    in a worker thread; an ``AsyncConnectionPool`` awaits async ones (``AsyncHooks``). Its
    connections are lent to a delivery in autocommit and given back as they were. ``threads``
    bounds the deliveries verified or applied at once in threads of their own (default: the
    pool's ``max_size``), so webhooks never wait behind the app's other sync work. Each
    request is noted in ``payhooks_deliveries`` (``delivery_log``, as for
    ``payhooks.starlette.route``); ``payhooks.starlette.health_route`` shows what it holds.
    ``app.include_router`` runs the router's lifespan inside the app's: when the app stops,
    the log's last lines are written and its thread and connection let go. Taken as routes
    alone (``Starlette(routes=router(...).routes)``), pass them to
    ``payhooks.starlette.lifespan`` as a Starlette app's are.
    """
    deliver = starlette.delivery(hooks, pool, threads)  # the pool checked first
    noted = starlette.noting(pool, delivery_log)
    webhook = starlette.webhook_route(f"{prefix}/{{provider}}", adapters, log, deliver, noted)
    return APIRouter(routes=[webhook], lifespan=webhook.lifespan)
