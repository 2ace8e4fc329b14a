"""payhooks inside a merchant's FastAPI (or Starlette) app: ``pip install 'payhooks[fastapi]'``.

::

    hooks = AsyncHooks()

    @hooks.on(EventKind.PAYMENT_CAPTURED)
    async def mark_paid(conn, event): ...

    app.include_router(router(adapters=[Razorpay(secrets=(...,))], hooks=hooks, pool=pool))

``pool`` is the app's psycopg pool: an ``AsyncConnectionPool`` with ``AsyncHooks``, or a
``ConnectionPool`` with ``payhooks.Hooks`` (docs/fastapi.md).
"""

from __future__ import annotations

from payhooks.fastapi.hooks import AsyncConnection, AsyncHandler, AsyncHook, AsyncHooks
from payhooks.fastapi.routes import router

__all__ = ["AsyncConnection", "AsyncHandler", "AsyncHook", "AsyncHooks", "router"]
