"""payhooks inside a merchant's FastAPI app: ``pip install 'payhooks[fastapi]'``.

::

    hooks = AsyncHooks()

    @hooks.on(EventKind.PAYMENT_CAPTURED)
    async def mark_paid(conn, event): ...

    app.include_router(router(adapters=[Razorpay(secrets=(...,))], hooks=hooks, pool=pool))

``pool`` is the app's psycopg pool: an ``AsyncConnectionPool`` with ``AsyncHooks``, or a
``ConnectionPool`` with ``payhooks.Hooks`` (docs/fastapi.md). A plain Starlette app takes
``payhooks.starlette.route`` instead: only ``router`` needs FastAPI, so it is imported when
first named.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from payhooks.aio.claims import ingest, replay
from payhooks.aio.hooks import AsyncConnection, AsyncHandler, AsyncHook, AsyncHooks
from payhooks.intake.expectations import expect_async as expect

if TYPE_CHECKING:
    from payhooks.fastapi.routes import router


def __getattr__(name: str) -> object:
    if name == "router":
        from payhooks.fastapi.routes import router

        return router
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "AsyncConnection",
    "AsyncHandler",
    "AsyncHook",
    "AsyncHooks",
    "expect",
    "ingest",
    "replay",
    "router",
]
