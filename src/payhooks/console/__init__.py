"""The operator console, for any app on payhooks: one search box, a timeline per gateway order,
parked deliveries to replay or settle (one at a time or in bulk), webhook health per gateway,
and the deliveries and payments lists with their CSV exports (docs/console.md).

A FastAPI or Starlette app mounts it::

    from payhooks.console import console

    app.mount("/payhooks", console(DATABASE_URL, adapters=adapters, hooks=hooks))

and any other app (Flask) runs it beside itself: ``payhooks console --hooks myshop:hooks``.
Operators are added with ``payhooks operator add NAME``; they log in with their own password.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager
from typing import Any

import anyio.to_thread
from fastapi import FastAPI
from psycopg import AsyncConnection
from psycopg_pool import AsyncConnectionPool
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import RedirectResponse
from starlette.routing import Mount, Route

from payhooks.aio.claims import ingest_received as ingest_async
from payhooks.aio.deliveries import autocommitted_async
from payhooks.aio.hooks import guarded as guarded_async
from payhooks.applying import through
from payhooks.console.actions import Run
from payhooks.console.app import make
from payhooks.console.formats import DEFAULT_TIMEZONE, UnknownTimezone
from payhooks.console.pages import (
    CONNECTIONS,
    WAIT_S,
    Console,
    Count,
    Elsewhere,
    Fetch,
    Link,
    OwnPool,
    Views,
    order_address,
    prefix_of,
)
from payhooks.events import Received
from payhooks.gateways import Adapter
from payhooks.intake.ingest import Receipt
from payhooks.intake.stored import received_stored
from payhooks.operations import replays
from payhooks.plumbing.db import Connection, libpq_url


def console(
    database_url: str,
    *,
    adapters: Iterable[Adapter],
    hooks: Any,
    pool: AsyncConnectionPool[Any] | None = None,
    timezone: str = DEFAULT_TIMEZONE,
    fetch_settlements: Fetch | None = None,
) -> FastAPI:
    """The console on the app's database: parked deliveries replay through ``hooks`` (the
    app's ``payhooks.Hooks`` or ``payhooks.fastapi.AsyncHooks``), read with ``adapters`` (the
    app's gateways, as its webhook route has them). Async hooks run on the app's event loop,
    on a connection of ``pool`` (the app's ``AsyncConnectionPool``, as the webhook route
    lends them) or, without one, on a short connection of their own. The console reads and
    writes on at most ``CONNECTIONS`` connections of its own, opened on its first request;
    ``close(app)`` closes them. Times are shown in ``timezone`` (an IANA name, IST by default;
    ``UnknownTimezone`` for a name the zone database does not hold). ``fetch_settlements``
    gives the Settlements page its Fetch button (``payhooks.reconcile.settling.fetch_once``
    with the app's API credentials)."""
    database_url = libpq_url(database_url)  # SQLAlchemy's postgresql+psycopg:// too
    served = {adapter.provider: adapter for adapter in adapters}
    if getattr(hooks, "is_async", False):
        safe = guarded_async(hooks)

        async def replay_async(run: Run, provider: str, event_id: str) -> Receipt:
            received = await run(received_stored, served, event_id, provider)
            assert isinstance(received, Received)
            if pool is not None:  # lent in autocommit, given back as it was, as the route does
                async with autocommitted_async(pool) as conn:
                    return await ingest_async(conn, received, safe)
            async with await AsyncConnection.connect(database_url, autocommit=True) as conn:
                return await ingest_async(conn, received, safe)

        views = Views(
            replay=None,
            replay_async=replay_async,
            gateways=[p.value for p in served],
            timezone=timezone,
            adapters=served,
            fetch_settlements=fetch_settlements,
        )
    else:
        apply = through(hooks, database_url)

        def replay(conn: Connection, provider: str, event_id: str) -> Receipt:
            return replays.replay(conn, served, apply, event_id=event_id, provider=provider)

        views = Views(
            replay=replay, gateways=[p.value for p in served], timezone=timezone,
            adapters=served, fetch_settlements=fetch_settlements,
        )  # fmt: skip
    own = OwnPool(database_url)
    app = make(views, own)
    app.state.own_pool = own
    return app


def close(app: FastAPI) -> None:
    """Close the connections of a console made by ``console`` (from the app's lifespan)."""
    own: OwnPool | None = getattr(app.state, "own_pool", None)
    if own is not None:
        own.close()


def console_app(
    database_url: str,
    *,
    adapters: Iterable[Adapter],
    hooks: Any,
    timezone: str = DEFAULT_TIMEZONE,
    fetch_settlements: Fetch | None = None,
) -> Starlette:
    """An app of the console alone, at ``/console`` (``payhooks console`` serves it), its
    connections closed when it stops."""
    inner = console(database_url, adapters=adapters, hooks=hooks, timezone=timezone,
                    fetch_settlements=fetch_settlements)  # fmt: skip

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        try:
            yield
        finally:
            await anyio.to_thread.run_sync(close, inner)

    async def home(request: Request) -> RedirectResponse:
        return RedirectResponse(prefix_of(request.scope) + "/console/", status_code=303)

    return Starlette(routes=[Route("/", home), Mount("/console", inner)], lifespan=lifespan)


__all__ = [
    "CONNECTIONS",
    "WAIT_S",
    "Console",
    "Count",
    "Elsewhere",
    "Fetch",
    "Link",
    "UnknownTimezone",
    "Views",
    "close",
    "console",
    "console_app",
    "make",
    "order_address",
]
