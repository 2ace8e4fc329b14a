"""payhooks in a plain Starlette app (or any ASGI app built on Starlette), no FastAPI needed::

    routes = [route(adapters=[Razorpay(secrets=(...,))], hooks=hooks, pool=pool)]
    app = Starlette(routes=routes, lifespan=lifespan(routes, around=opens_the_pool))

``route()`` is the webhook route ``payhooks.fastapi.router`` mounts too: it reads the body
bounded by the gateway's adapter, and hands the gateway's name, the body and the header pairs
to the shared step (``payhooks.intake.endpoint``), which verifies, claims on the merchant's pool and
answers from the core's one table. The bounded reader is also the reference service's.

Each route holds something of its own beside the merchant's pool (the delivery log's thread
and connection, a reading route's connection). Starlette gives a route no part in the app's
lifespan, so ``lifespan()`` is the app's, with each route's own inside it: the log's last
lines are written, and what the routes hold let go, when the app stops.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Iterator
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager
from datetime import UTC, datetime
from functools import partial
from typing import Any, NotRequired, TypedDict, Unpack, cast, overload

import anyio
import anyio.to_thread
import psycopg_pool
from psycopg.rows import tuple_row
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Mount, Route, compile_path
from starlette.types import Message, Receive

from payhooks.aio import deliveries
from payhooks.aio.deliveries import AsyncPool, Deliver, SyncPool
from payhooks.aio.hooks import AsyncHandler
from payhooks.gateways import Adapter
from payhooks.intake.answers import declared_over
from payhooks.intake.endpoint import Endpoint, Reply
from payhooks.intake.hooks import Hooks, Registry
from payhooks.intake.ingest import Handler
from payhooks.operations import health, reads, timeline
from payhooks.operations.deliverylog import (
    DeliveryLog,
    OwnConnection,
    closed_at_exit,
    own_connection,
)
from payhooks.operations.reads import Read
from payhooks.plumbing.errors import PayhooksError, PayloadTooLarge

PATH = "/webhooks/{provider}"
HEALTH_PATH = "/payhooks/health"
TIMELINE_PATH = "/payhooks/timeline"
DeliveryLogOption = bool | str
"""Where each request is noted: ``True`` (the pool's database), a conninfo, or ``False``."""
Lifespan = Callable[[Any], AbstractAsyncContextManager[Any]]
"""An app's lifespan, as Starlette and FastAPI take it: the app in, a context around its life."""


class HoldingRoute(Route):
    """A payhooks route, and what it holds of its own beside the merchant's pool: the delivery
    log (its thread, its connection, the lines not written yet) or a reading route's
    connection. ``lifespan`` lets go of it when the app stops, the log's lines written first;
    the route takes requests again if the app starts again."""

    def __init__(
        self,
        path: str,
        endpoint: Callable[[Request], Awaitable[Response]],
        *,
        name: str,
        methods: list[str],
        release: Callable[[], None] | None = None,
    ) -> None:
        super().__init__(path, endpoint, methods=methods, name=name)
        self.release = release

    @asynccontextmanager
    async def lifespan(self, app: object) -> AsyncIterator[None]:
        """Releases what the route holds when the app stops."""
        try:
            yield
        finally:
            if self.release is not None:
                await anyio.to_thread.run_sync(self.release)


def lifespan(routes: Iterable[BaseRoute], around: Lifespan | None = None) -> Lifespan:
    """The app's lifespan: ``around`` (the app's own, which opens and closes its pool), and
    inside it that of each payhooks route among ``routes`` (inside a ``Mount`` too), so the
    delivery log is written to its last line, and the routes' connections closed, before the
    pool closes: ``Starlette(routes=routes, lifespan=lifespan(routes, around=yours))``.
    ``around``'s state, if it yields one, is the app's. A FastAPI app needs none of this:
    ``include_router`` takes ``payhooks.fastapi.router``'s lifespan into the app's."""
    holding = list(_holding(routes))

    @asynccontextmanager
    async def run(app: Any) -> AsyncIterator[Any]:
        async with AsyncExitStack() as stack:
            state = None if around is None else await stack.enter_async_context(around(app))
            for route in holding:
                await stack.enter_async_context(route.lifespan(app))
            yield state

    return run


def _holding(routes: Iterable[BaseRoute]) -> Iterator[HoldingRoute]:
    for found in routes:
        if isinstance(found, HoldingRoute):
            yield found
        elif isinstance(found, Mount):
            yield from _holding(found.routes)


class _Wiring(TypedDict):
    adapters: Iterable[Adapter]
    threads: NotRequired[int | None]
    delivery_log: NotRequired[DeliveryLogOption]


class SyncWiring(_Wiring):
    """The keywords ``route()`` and ``payhooks.fastapi.router()`` take for sync hooks: the
    hooks with the pool that runs them (checked again at startup, for untyped callers)."""

    hooks: Handler
    pool: SyncPool


class AsyncWiring(_Wiring):
    """The keywords for async hooks: the hooks with the pool that awaits them."""

    hooks: AsyncHandler
    pool: AsyncPool


@overload
def route(*, path: str = ..., **wiring: Unpack[SyncWiring]) -> HoldingRoute: ...
@overload
def route(*, path: str = ..., **wiring: Unpack[AsyncWiring]) -> HoldingRoute: ...


def route(
    *,
    adapters: Iterable[Adapter],
    hooks: Handler | AsyncHandler,
    pool: SyncPool | AsyncPool,
    path: str = PATH,
    threads: int | None = None,
    delivery_log: DeliveryLogOption = True,
) -> HoldingRoute:
    """``POST {path}`` (``/webhooks/{provider}``) for each adapter's gateway.

    ``pool`` is the merchant's: a ``ConnectionPool`` runs sync ``hooks`` (``payhooks.Hooks``)
    in a worker thread; an ``AsyncConnectionPool`` awaits async ones
    (``payhooks.fastapi.AsyncHooks``). ``threads`` bounds the deliveries verified or applied
    at once in threads of their own (default: the pool's ``max_size``). Each request is noted
    in ``payhooks_deliveries`` (``delivery_log``: on a connection of its own to the pool's
    database, or to the conninfo given; ``False``: not at all), written to its last line when
    the app stops by the route's ``lifespan`` (see ``lifespan()``), else at the process's end."""
    deliver = delivery(hooks, pool, threads)  # the pool checked first
    log = logging.getLogger("payhooks.starlette")
    return webhook_route(path, adapters, log, deliver, noting(pool, delivery_log))


def noting(pool: SyncPool | AsyncPool, delivery_log: DeliveryLogOption) -> DeliveryLog | None:
    """The log a door's requests are noted in, on a connection of its own: never one of the
    pool's, which webhooks need."""
    if delivery_log is False:
        return None
    return closed_at_exit(DeliveryLog(connection_to(pool, delivery_log)))


def connection_to(pool: SyncPool | AsyncPool, conninfo: DeliveryLogOption = True) -> OwnConnection:
    """The delivery log's own connection: to ``conninfo`` when it is a URL, else to
    the pool's database (refused when the pool computes its conninfo)."""
    if isinstance(conninfo, str):
        return own_connection(conninfo)
    given, kwargs = pool.conninfo, pool.kwargs
    if not isinstance(given, str) or not isinstance(kwargs, dict | None):
        raise TypeError("the pool's conninfo is computed: pass the database's conninfo too")
    return own_connection(given, **(kwargs or {}))


Allow = Callable[[Request], bool | Awaitable[bool]]
"""Whether a request may read an operator's view: your operators' auth (a session, a token,
a network check). Required: the views show payments and refusals, never to everyone."""


def health_route(
    *,
    pool: SyncPool | AsyncPool,
    allow: Allow,
    path: str = HEALTH_PATH,
    conninfo: str | None = None,
) -> HoldingRoute:
    """``GET {path}``: ``payhooks.operations.health.summary`` as JSON (last 2xx, answers by status
    in the last hour, signature failures, the forged-signature banner), read on a connection of its
    own (to the pool's database, or ``conninfo``), one read at a time; 403 unless
    ``allow(request)``."""

    def summary(request: Request) -> Read:
        now = datetime.now(UTC)
        return lambda conn: health.summary(conn, now).as_json()

    return _reading_route(pool, allow, path, conninfo, "payhooks_health", summary)


def timeline_route(
    *,
    pool: SyncPool | AsyncPool,
    allow: Allow,
    path: str = TIMELINE_PATH,
    conninfo: str | None = None,
) -> HoldingRoute:
    """``GET {path}?q=...``: ``payhooks.operations.timeline.answer`` as JSON, each gateway order
    what an operator typed names (a gateway order id, the reference given to ``expect``, a payment
    id, a delivery key, a UTR/RRN) with its story; read as ``health_route`` reads; 403 unless
    ``allow(request)``."""

    def told(request: Request) -> Read:
        return partial(timeline.answer, text=request.query_params.get("q", ""))

    return _reading_route(pool, allow, path, conninfo, "payhooks_timeline", told)


def _reading_route(
    pool: SyncPool | AsyncPool,
    allow: Allow,
    path: str,
    conninfo: str | None,
    name: str,
    reading: Callable[[Request], Read],
) -> HoldingRoute:
    """A JSON ``GET`` answered by a read on a connection of its own, in a thread: opened at
    the first read, held until the app stops."""
    side = connection_to(pool, conninfo or True)

    async def answer(request: Request) -> Response:
        allowed = allow(request)
        if not (await allowed if inspect.isawaitable(allowed) else allowed):
            return JSONResponse({"error": "forbidden"}, status_code=403)
        given = await anyio.to_thread.run_sync(reads.answered, side, reading(request))
        return JSONResponse(given.body, status_code=given.status)

    return HoldingRoute(path, answer, methods=["GET"], name=name, release=side.close)


def webhook_route(
    path: str,
    adapters: Iterable[Adapter],
    log: logging.Logger,
    deliver: Deliver,
    noted: DeliveryLog | None,
) -> HoldingRoute:
    """The route, for the step serving ``adapters`` and the claim ``deliver``, each request
    noted in ``noted``: Starlette's own, so FastAPI (which takes it as it is) reads nothing of
    the request before payhooks does. A ``path`` that does not name the gateway as
    ``{provider}`` is refused here: every delivery to it would fail."""
    if "provider" not in compile_path(path)[2]:
        raise ValueError(
            f"the webhook path names the gateway as {{provider}}, as in "
            f"'/payments/hooks/{{provider}}': {path!r} names none"
        )
    endpoint = Endpoint.serving(adapters, log, None if noted is None else noted.note)

    async def webhook(request: Request) -> Response:
        gateway = str(request.path_params["provider"])
        try:
            body = await read_bounded(request, endpoint.bound(gateway), gateway)
        except PayhooksError as exc:
            return response(endpoint.unread(gateway, exc))
        except ClientDisconnect:
            return Response(status_code=400)  # no one to answer, nothing worth a traceback
        return response(await deliver(endpoint, gateway, body, tuple(request.headers.items())))

    release = None if noted is None else noted.stop
    return HoldingRoute(path, webhook, methods=["POST"], name="payhooks_webhook", release=release)


def delivery(
    hooks: Handler | AsyncHandler, pool: SyncPool | AsyncPool, threads: int | None
) -> Deliver:
    """The sync or async path, from the pool; hooks of the other kind are refused here, at
    startup, rather than on the first delivery, and so are hooks that leave their rows to a
    pool making other rows than tuples (``_rows_declared``)."""
    if not isinstance(pool, psycopg_pool.ConnectionPool | psycopg_pool.AsyncConnectionPool):
        raise TypeError("pool must be a psycopg_pool.ConnectionPool or AsyncConnectionPool")
    _rows_declared(hooks, pool)
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


def _rows_declared(hooks: object, pool: SyncPool | AsyncPool) -> None:
    """Hooks on a pool whose connections make other rows than tuples (``dict_row``) must say
    which rows they are written for: the commands that run them too (``payhooks confirm``,
    ``replay`` and ``reconcile --hooks``) hand them connections of their own, which make
    tuples unless the hooks say otherwise, and a PhonePe payment reaches them only there. A
    handler of the merchant's own that is no registry is served as it is: it cannot say its
    rows, and the commands' ``--hooks`` take a registry."""
    made = pool.kwargs.get("row_factory") if isinstance(pool.kwargs, dict) else None
    if made is None or made is tuple_row or not isinstance(hooks, Registry):
        return
    if hooks.row_factory is not None:
        return
    name = getattr(made, "__name__", repr(made))
    raise TypeError(
        f"the pool makes its rows with {name} and the hooks do not say which rows they are "
        "written for: payhooks confirm, replay and reconcile --hooks run them on connections "
        f"of their own, which make tuples. Declare it: AsyncHooks(row_factory={name}) (or "
        f"payhooks.Hooks(row_factory={name}) on a ConnectionPool)"
    )


def _is_async(hooks: object) -> bool:
    if isinstance(hooks, Hooks):
        return False
    call = getattr(hooks, "__call__", None)  # noqa: B004  (an instance with an async __call__)
    return inspect.iscoroutinefunction(hooks) or inspect.iscoroutinefunction(call)


def response(reply: Reply) -> Response:
    # A body refused unread would otherwise still be received, to find the next request.
    """A shared step's reply as Starlette's JSON response."""
    headers = {"connection": "close"} if reply.close else None
    return JSONResponse(reply.body, status_code=reply.status, headers=headers)


async def read_bounded(request: Request, limit: int, source: str) -> bytes:
    """A body's exact bytes, refused on the declared length before a byte is read, else as
    soon as the streamed bytes pass the bound: an unauthenticated sender chooses the size,
    and some gateways (PayU) must be parsed to be verified."""
    if declared_over(request.headers.get("content-length", ""), limit):
        raise PayloadTooLarge(source, f"declared body exceeds {limit} bytes")
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise PayloadTooLarge(source, f"body exceeds {limit} bytes")
        chunks.append(chunk)
    return b"".join(chunks)


def replaying(body: bytes, receive: Receive) -> Receive:
    """The body already read, as one message; then the client's own messages (disconnect).
    For a layer that reads a bounded body before the app behind it does."""
    sent = False

    async def replay() -> Message:
        nonlocal sent
        if sent:
            return await receive()
        sent = True
        return {"type": "http.request", "body": body, "more_body": False}

    return replay


__all__ = [
    "HoldingRoute",
    "health_route",
    "lifespan",
    "read_bounded",
    "replaying",
    "route",
    "timeline_route",
]
