"""``router()``: the webhook route a merchant mounts on their own FastAPI app.

It reads the body bounded by the gateway's adapter, verifies and parses it off the event
loop, claims it and runs the merchant's handlers in the claim's transaction on the merchant's
pool, and answers from the core's one table (``payhooks.answers``).
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Iterable, Mapping
from typing import cast, overload

import anyio
import psycopg_pool
from fastapi import APIRouter
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response

from payhooks.answers import answer, clipped, error_answer, log_name
from payhooks.errors import (
    PayhooksError,
    PayloadTooLarge,
    ProviderNotConfigured,
)
from payhooks.fastapi import deliveries
from payhooks.fastapi.bodies import read_body
from payhooks.fastapi.deliveries import AsyncPool, Deliver, SyncPool
from payhooks.fastapi.hooks import AsyncHandler
from payhooks.hooks import Hooks
from payhooks.ingest import Handler, Receipt
from payhooks.providers import Adapter

log = logging.getLogger("payhooks.fastapi")
MAX_PROVIDER_CHARS = 64  # an unknown provider is echoed and logged: never at its own size


@overload
def router(
    *,
    adapters: Iterable[Adapter],
    hooks: Handler,
    pool: SyncPool,
    prefix: str = ...,
    threads: int | None = ...,
) -> APIRouter: ...


@overload
def router(
    *,
    adapters: Iterable[Adapter],
    hooks: AsyncHandler,
    pool: AsyncPool,
    prefix: str = ...,
    threads: int | None = ...,
) -> APIRouter: ...


def router(
    *,
    adapters: Iterable[Adapter],
    hooks: Handler | AsyncHandler,
    pool: SyncPool | AsyncPool,
    prefix: str = "/webhooks",
    threads: int | None = None,
) -> APIRouter:
    """``POST {prefix}/{provider}`` for each adapter's gateway: ``app.include_router(...)`` in a
    FastAPI app, or ``Starlette(routes=router(...).routes)``.

    ``pool`` is the merchant's: a ``ConnectionPool`` runs sync ``hooks`` (``payhooks.Hooks``)
    in a worker thread; an ``AsyncConnectionPool`` awaits async ones (``AsyncHooks``). Its
    connections are lent to a delivery in autocommit and given back as they were. ``threads``
    bounds the deliveries verified or applied at once in threads of their own (default: the
    pool's ``max_size``), so webhooks never wait behind the app's other sync work.
    """
    served = _served(adapters)
    deliver = _delivery(hooks, pool, threads)

    async def webhook(request: Request) -> Response:
        provider = str(request.path_params["provider"])
        adapter = served.get(provider)
        if adapter is None:
            refused = ProviderNotConfigured(clipped(provider, MAX_PROVIDER_CHARS))
            return _refused(refused.provider, refused)
        try:
            receipt = await _delivered(deliver, adapter, request)
        except ClientDisconnect:
            return Response(status_code=400)  # no one to answer, nothing worth a traceback
        except PayhooksError as exc:
            return _refused(adapter.provider.value, exc)
        return _answered(receipt)

    # A plain Starlette route: FastAPI's include_router takes it as it is, a Starlette app
    # takes router(...).routes, and FastAPI reads nothing of the request before we do.
    webhooks = APIRouter()
    webhooks.add_route(f"{prefix}/{{provider}}", webhook, methods=["POST"], name="payhooks_webhook")
    return webhooks


def _served(adapters: Iterable[Adapter]) -> Mapping[str, Adapter]:
    served: dict[str, Adapter] = {}
    for adapter in adapters:
        name = adapter.provider.value
        if name in served:
            raise ValueError(f"two adapters for {name}: give one, with all its secrets")
        served[name] = adapter
    if not served:
        raise ValueError("name at least one adapter (Razorpay, Cashfree, PayU)")
    return served


def _delivery(
    hooks: Handler | AsyncHandler, pool: SyncPool | AsyncPool, threads: int | None
) -> Deliver:
    """The sync or async path, from the pool; hooks of the other kind are refused here, at
    startup, rather than on the first delivery."""
    if not isinstance(pool, psycopg_pool.ConnectionPool | psycopg_pool.AsyncConnectionPool):
        raise TypeError("pool must be a psycopg_pool.ConnectionPool or AsyncConnectionPool")
    limiter = anyio.CapacityLimiter(threads or pool.max_size)
    if isinstance(pool, psycopg_pool.AsyncConnectionPool):
        if not _is_async(hooks):
            raise TypeError(
                "an AsyncConnectionPool runs async hooks: register them on "
                "payhooks.fastapi.AsyncHooks (or pass a ConnectionPool for payhooks.Hooks)"
            )
        return deliveries.awaited(pool, cast(AsyncHandler, hooks), limiter)
    if _is_async(hooks):
        raise TypeError(
            "a ConnectionPool runs sync hooks (payhooks.Hooks): for async def hooks, "
            "pass an AsyncConnectionPool"
        )
    return deliveries.threaded(pool, cast(Handler, hooks), limiter)


def _is_async(hooks: object) -> bool:
    if isinstance(hooks, Hooks):
        return False
    call = getattr(hooks, "__call__", None)  # noqa: B004  (an instance with an async __call__)
    return inspect.iscoroutinefunction(hooks) or inspect.iscoroutinefunction(call)


async def _delivered(deliver: Deliver, adapter: Adapter, request: Request) -> Receipt:
    body = await read_body(request, adapter)
    try:
        return await deliver(adapter, body, tuple(request.headers.items()))
    except PayhooksError:
        raise
    except Exception:
        # The merchant's handler (or a bug): rolled back; the app's error handling answers
        # 500 and logs the traceback, and the gateway delivers it again.
        log.warning("webhook_failed", extra={"provider": adapter.provider.value})
        raise


def _answered(receipt: Receipt) -> Response:
    event = receipt.event
    fields = {
        "provider": event.provider.value,
        "event_id": event.event_id,
        "event_type": event.event_type,
        "order_id": receipt.order_id,
    }
    if receipt.mismatch:
        log.warning("webhook_payload_mismatch", extra=fields)
    log.info(f"webhook_{receipt.outcome.value}", extra=fields)
    given = answer(receipt)
    return JSONResponse(given.body, status_code=given.status)


def _refused(provider: str, exc: PayhooksError) -> Response:
    given = error_answer(exc)
    name = log_name(given.status)
    log.warning(name, extra={"provider": provider, "status": given.status, **given.body})
    # A body refused unread would otherwise still be received, to find the next request.
    headers = {"connection": "close"} if isinstance(exc, PayloadTooLarge) else None
    return JSONResponse(given.body, status_code=given.status, headers=headers)
