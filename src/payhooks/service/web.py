"""The ASGI app: thin handlers; every outcome and error maps to HTTP in one table."""

from __future__ import annotations

import hmac
import json
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from datetime import UTC, date, datetime
from functools import partial
from typing import Annotated, Any

import anyio
import anyio.to_thread
import psycopg_pool
from fastapi import APIRouter, Depends, FastAPI, Query, Request
from fastapi import Path as PathParam
from fastapi.encoders import jsonable_encoder
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from pydantic import BaseModel, Field, StrictBool, StrictInt
from starlette.datastructures import State
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.requests import ClientDisconnect
from starlette.types import ASGIApp, Receive, Scope, Send

from payhooks import __version__
from payhooks.events import Provider, Received
from payhooks.gateways import Adapter
from payhooks.intake import disputes
from payhooks.intake.answers import clipped, error_answer
from payhooks.intake.endpoint import Arrival, AsyncClaim, Endpoint, Offload, Reply
from payhooks.intake.ingest import Receipt
from payhooks.plumbing import db
from payhooks.plumbing.errors import (
    DatabaseUnavailable,
    NotFound,
    PayhooksError,
    PayloadTooLarge,
    Unauthorised,
)
from payhooks.plumbing.retries import Retries
from payhooks.reconcile.settling import Tally
from payhooks.refunding.refunds import Refund
from payhooks.service import application, console, database, deliveries
from payhooks.service.config import Settings
from payhooks.service.metrics import Metrics, Probes
from payhooks.service.shop import captures, carts, catalog, orders, payments
from payhooks.starlette import read_bounded, replaying

log = logging.getLogger("payhooks")
AsyncPool = psycopg_pool.AsyncConnectionPool[database.AsyncSession]

# What an unauthenticated client can make the service read, echo or log (docs/security.md).
API_POOL_WAIT_S = 5.0
MAX_API_BODY_BYTES = 64 * 1024  # a cart is at most 50 lines: a few KB


def bearer_matches(header: str | None, token: str) -> bool:
    """``Authorization: Bearer <token>``, compared in constant time."""
    scheme, _, given = (header or "").partition(" ")
    return scheme.lower() == "bearer" and hmac.compare_digest(given.encode(), token.encode())


# Identifiers: printable, no control characters (PostgreSQL text cannot hold NUL).
ID_PATTERN = r"^[^\x00-\x1f\x7f]+$"
Id = Annotated[str, Field(min_length=1, max_length=64, pattern=ID_PATTERN)]
PathId = Annotated[str, PathParam(min_length=1, max_length=64, pattern=ID_PATTERN)]
QueryId = Annotated[str, Query(min_length=1, max_length=64, pattern=ID_PATTERN)]


# Amounts and counts are JSON integers, strictly: lax validation read ``true`` as 1 paise and
# ``"499"`` as 499, where the core refuses a bool as an amount.


class ProductIn(BaseModel):
    sku: Id
    name: str = Field(min_length=1, max_length=200, pattern=ID_PATTERN)
    price_paise: StrictInt = Field(ge=0, le=10**10)  # times 100 lines of 100,000 stays in bigint
    stock: StrictInt = Field(ge=0, le=2**31 - 1)


class ItemIn(BaseModel):
    sku: Id
    quantity: StrictInt = Field(gt=0, le=100_000)


class CartIn(BaseModel):
    customer_email: str = Field(
        min_length=3, max_length=254, pattern=r"^[^@\s\x00-\x1f\x7f]+@[^@\s\x00-\x1f\x7f]+$"
    )
    # Each line may take a savepoint while it takes stock; past 64, PostgreSQL's
    # subtransaction cache overflows and every session slows down.
    items: list[ItemIn] = Field(min_length=1, max_length=50)


class CheckoutIn(BaseModel):
    provider: Provider
    gateway_order_id: Id | None = None


class RefundIn(BaseModel):
    """A refund of an order's payment: ``idempotency_key`` is the caller's (asked again with
    it, the same refund), ``amount_paise`` at most what is still refundable."""

    amount_paise: StrictInt = Field(ge=1, le=10**15)
    idempotency_key: Id
    reason: str = Field(default="asked for through the API", min_length=1, max_length=255,
                        pattern=ID_PATTERN)  # fmt: skip


class RefundCancelIn(BaseModel):
    """Who cancels a refund stuck ``requested``, and why: both kept with it."""

    reason: str = Field(min_length=1, max_length=255, pattern=ID_PATTERN)
    cancelled_by: str = Field(min_length=1, max_length=255, pattern=ID_PATTERN)
    not_at_gateway: StrictBool = False
    """The caller looked in the gateway's dashboard: it does not have the refund (needed once
    the refund was sent to it: an answer lost may hide one it made)."""


def create_app(
    settings: Settings,
    *,
    api_token: str,
    url: str | None = None,
    metrics_token: str | None = None,
    docs: bool = False,
    adapters: Mapping[Provider, Adapter] | None = None,
) -> FastAPI:
    """The service. The pool is opened at startup against ``url`` (or the settings' database).

    ``metrics_token``, when given, is required as a bearer token on /metrics. ``docs`` serves
    /docs, /redoc and /openapi.json (``app.openapi()`` works either way). ``adapters``
    replaces the gateways the settings configure.
    """
    if not api_token:
        raise ValueError("the API token must not be empty")
    if metrics_token is not None and not metrics_token:
        raise ValueError("the metrics token must not be empty (leave it unset instead)")
    metrics = Metrics()
    app = Service(
        title="payhooks",
        version=__version__,
        lifespan=_lifespan(settings, url),
        docs_url="/docs" if docs else None,
        redoc_url="/redoc" if docs else None,
        openapi_url="/openapi.json" if docs else None,
    )
    app.state.metrics = metrics
    _install_error_handlers(app)
    witness = Witness(metrics)
    app.state.witness = witness
    served = settings.adapters() if adapters is None else adapters
    retries = Retries.within(settings.pool_timeout_ms, settings.transaction_timeout_ms)
    endpoint = _add_webhook_route(app, served, witness, retries)
    console.install(
        app, served, settings.reconciliation_off(), timezone=settings.console_timezone,
        fetch_settlements=_fetching(app, settings),
    )  # fmt: skip
    _add_api_routes(app, api_token)
    _add_probe_routes(app, metrics, metrics_token, settings)
    app.webhook_endpoint = endpoint
    return app


def _fetching(app: FastAPI, settings: Settings) -> Callable[[date, date], Tally] | None:
    """The console's Fetch of settlement reports, on the console's pool (open once the app
    runs); None when no gateway has API credentials."""
    if not settings.reconciled():
        return None

    def fetch(start: date, end: date) -> Tally:
        found = application.fetching_settlements(app.state.console_pool, settings)
        assert found is not None
        return found(start, end)

    return fetch


class Service(FastAPI):
    """FastAPI with ``WebhookGate`` in front of everything, the middleware FastAPI adds of its
    own included (its error, telemetry and body-limit layers): a delivery then skips them all,
    measured inside the noise (docs/performance.md). The gate bounds bodies itself and answers
    every error it knows; an unexpected one (a bug in reading the delivery, in its claim or its
    handler), logged with its traceback as ``webhook_failed`` by the shared step, is answered
    500 ``internal_error`` in JSON with the connection closed (``FAILED``), and reaches neither
    FastAPI's error handler nor its telemetry."""

    webhook_endpoint: WebhookEndpoint | None = None

    def build_middleware_stack(self) -> ASGIApp:
        stack = super().build_middleware_stack()
        if self.webhook_endpoint is None:
            return stack
        return WebhookGate(stack, endpoint=self.webhook_endpoint)


def _lifespan(
    settings: Settings, url: str | None
) -> Callable[[FastAPI], AbstractAsyncContextManager[None]]:
    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        target = url or database.database_url(settings)
        pool = database.open_pool(target, settings)
        # The shop API has connections and threads of its own: a busy storefront never
        # makes a gateway's delivery wait for either (nor the other way round).
        api_pool = database.open_pool(  # a shop's caller waits longer than a gateway would
            target, settings, deadline=False, checked=True, wait_s=API_POOL_WAIT_S, keep=1
        )
        async_pool = database.open_async_pool(target, settings)
        # The console's own few: an operator's page, or a stranger's login, never waits for
        # (nor holds) a connection the shop API or a gateway needs. None is opened before an
        # operator's first page; the webhook pools keep two each, the shop API's one.
        app.state.console_pool = database.open_pool(
            target, settings, max_size=console.CONNECTIONS, deadline=False, checked=True, keep=0,
            wait_s=console.WAIT_S,  # an operator waits as on a merchant's console
        )  # fmt: skip
        with database.pooled():
            await async_pool.open(wait=False)
        app.state.pool, app.state.api_pool, app.state.async_pool = pool, api_pool, async_pool
        app.state.webhook_threads = anyio.CapacityLimiter(2 * settings.pool_size)
        # A delivery's work on its connection, the commit's wait for a standby included, is
        # cancelled from the client past the transaction's bound (database.bounded): 503.
        app.state.delivery_deadline_s = settings.transaction_timeout_ms / 1000
        app.state.probes = Probes(target, settings)
        witness: Witness = app.state.witness
        witness.log = deliveries.DeliveryLog(
            target,
            settings,
            on_drop=witness.metrics.log_dropped,
            on_unwritable=witness.metrics.log_unwritable,
        )
        witness.log.start()
        try:
            yield
        finally:
            witness.log.close()
            app.state.probes.close()
            api_pool.close()
            app.state.console_pool.close()
            await async_pool.close()
            pool.close()

    return lifespan


def _install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(PayhooksError)
    async def payhooks_error(request: Request, exc: PayhooksError) -> JSONResponse:
        return error_response(exc)

    @app.exception_handler(RequestValidationError)
    async def invalid_request(request: Request, exc: RequestValidationError) -> JSONResponse:
        """A request the API cannot read: its code, as every error's (docs/api.md), and
        FastAPI's list of what is wrong with each field."""
        errors = jsonable_encoder(exc.errors())
        said = {"error": "invalid_request", "detail": [_echoable(e) for e in errors]}
        return JSONResponse(said, status_code=422)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        """FastAPI's and Starlette's own refusals (a body no parser reads: not UTF-8, nested
        past the parser's depth; a path or method the service lacks) with their code too."""
        said = {"error": HTTP_ERROR_CODES.get(exc.status_code, "http_error"),
                "detail": clipped(str(exc.detail))}  # fmt: skip
        return JSONResponse(said, status_code=exc.status_code, headers=exc.headers)


HTTP_ERROR_CODES = {400: "invalid_request", 404: "not_found", 405: "method_not_allowed"}
"""The code of each refusal the web framework makes itself, before payhooks' code runs."""


def _echoable(error: dict[str, Any]) -> dict[str, Any]:
    """FastAPI's 422 error, without the input it echoes when that is not text (JSON can spell
    a lone surrogate, ``"\\ud800"``, which no answer can be encoded with)."""
    if _encodable(error):
        return error
    shown = {name: value for name, value in error.items() if name != "input"}
    return shown if _encodable(shown) else {"type": error.get("type"), "msg": error.get("msg")}


def _encodable(value: object) -> bool:
    """Whether ``value`` is JSON an answer can carry: no lone surrogate, no ``NaN`` or
    ``Infinity`` (Python's JSON reads them; an answer may not hold them)."""
    try:
        json.dumps(value, ensure_ascii=False, allow_nan=False).encode("utf-8")
    except (UnicodeError, TypeError, ValueError):
        return False
    return True


def error_response(exc: PayhooksError) -> JSONResponse:
    given = error_answer(exc)
    # A body refused unread would otherwise still be received, to find the next request.
    headers = {"connection": "close"} if isinstance(exc, PayloadTooLarge) else None
    return JSONResponse(given.body, status_code=given.status, headers=headers)


def reply_response(reply: Reply) -> JSONResponse:
    headers = {"connection": "close"} if reply.close else None
    return JSONResponse(reply.body, status_code=reply.status, headers=headers)


class Witness:
    """Every answer to a gateway, counted (metrics) and written down (the core's delivery log,
    which the console reads); the log line is the shared step's. The log is attached when the
    app starts; until then only counted."""

    def __init__(self, metrics: Metrics) -> None:
        self.metrics = metrics
        self.log: deliveries.DeliveryLog | None = None

    def saw(self, arrival: Arrival, reply: Reply) -> None:
        seconds = time.perf_counter() - arrival.started
        if reply.received is None:
            self.metrics.answered(arrival.gateway, reply.outcome, seconds)
        else:
            provider = reply.received.event.provider.value
            self.metrics.answered(provider, reply.outcome, seconds)
            if reply.mismatch:
                self.metrics.mismatch(provider)
            if reply.retries:
                self.metrics.retried(provider, reply.retries)
        if self.log is not None:
            self.log.note(arrival, reply)


WebhookEndpoint = Callable[[str, Request], Awaitable[Response]]
WEBHOOKS = "/webhooks/"
ON_LOOP_BYTES = 64 * 1024
"""Bodies up to this size are verified and parsed on the event loop (tens of microseconds for
a gateway's few hundred bytes); larger ones, which only a sender probing the bounds sends,
in a worker thread, so they never hold the loop."""


def _add_webhook_route(
    app: FastAPI, adapters: Mapping[Provider, Adapter], witness: Witness, retries: Retries
) -> WebhookEndpoint:
    """The route FastAPI declares (for the schema) and ``WebhookGate`` serve the same
    endpoint; the gate answers before routing, so a delivery skips FastAPI's request
    handling."""
    served = {provider.value: adapter for provider, adapter in adapters.items()}
    endpoint = _webhook_endpoint(Endpoint(served, log, retries=retries), witness)

    @app.post("/webhooks/{provider}")
    async def webhook(provider: str, request: Request) -> Response:
        return await endpoint(provider, request)

    return endpoint


class WebhookGate:
    """``POST /webhooks/{provider}`` answered in front of routing and FastAPI: the path every
    gateway's delivery takes, with nothing of the framework it does not use."""

    def __init__(self, app: ASGIApp, *, endpoint: WebhookEndpoint) -> None:
        self.app = app
        self.endpoint = endpoint

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        provider = _webhook_provider(scope)
        if provider is None:
            await self.app(scope, receive, send)
            return
        response = await self.endpoint(provider, Request(scope, receive))
        await response(scope, receive, send)


def _webhook_provider(scope: Scope) -> str | None:
    """The ``{provider}`` of a ``POST /webhooks/{provider}``, matched as the router would."""
    if scope["type"] != "http" or scope["method"] != "POST":
        return None
    path: str = scope["path"]
    provider = path[len(WEBHOOKS) :] if path.startswith(WEBHOOKS) else ""
    return provider if provider and "/" not in provider else None


FAILED = {
    "error": "internal_error",
    "detail": "the delivery failed; logged as webhook_failed, with its traceback",
}
"""The answer to a delivery whose reading, claim or handler raised what payhooks does not know
(the step logged, noted and counted it): JSON, as every error of the HTTP interface
(docs/api.md), the connection closed; nothing of the error in it. What the claim wrote was
rolled back, and the gateway sends the delivery again."""


def _webhook_endpoint(step: Endpoint, witness: Witness) -> WebhookEndpoint:
    """The service's door on the shared step: the body read here, bounded; verified on the
    loop when small; applied by the service's own claim (``_claimed``)."""

    async def webhook(gateway: str, request: Request) -> Response:
        started, received_at = time.perf_counter(), _now()
        try:
            body = await read_bounded(request, step.bound(gateway), gateway)
        except PayhooksError as exc:
            reply = step.refused(gateway, exc)
            witness.saw(Arrival(gateway=gateway, started=started, received_at=received_at), reply)
            return reply_response(reply)
        except ClientDisconnect:
            return Response(status_code=400)  # no one to answer, nothing worth a traceback
        arrival = Arrival(gateway=gateway, started=started, received_at=received_at, body=body)
        state = request.app.state
        try:
            reply = await step.deliver_async(
                gateway,
                body,
                tuple(request.headers.items()),
                _claimed(state),
                offload=None if len(body) <= ON_LOOP_BYTES else _offload(state.webhook_threads),
                seen=partial(witness.saw, arrival),
                pause=anyio.sleep,
            )
        except Exception:  # logged by the step (webhook_failed, its traceback), noted, counted
            return JSONResponse(FAILED, status_code=500, headers={"connection": "close"})
        return reply_response(reply)

    return webhook


def _now() -> datetime:
    return datetime.now(UTC)


def _offload(limiter: anyio.CapacityLimiter) -> Offload:
    async def offload(verify: Callable[[], Received]) -> Received:
        return await anyio.to_thread.run_sync(verify, limiter=limiter)

    return offload


def _claimed(state: State) -> AsyncClaim:
    """A first capture is answered on the event loop by one statement (``captures``); any
    other delivery takes the general path in one thread hop, on the sync pool."""

    async def claim(received: Received) -> Receipt:
        deadline_s = state.delivery_deadline_s
        receipt = await _first_capture(state.async_pool, received, deadline_s)
        if receipt is not None:
            return receipt
        deliver = application.deliver_pooled
        return await anyio.to_thread.run_sync(
            partial(deliver, state.pool, received, pipeline=True, deadline_s=deadline_s),
            limiter=state.webhook_threads,
        )

    return claim


async def _first_capture(
    pool: AsyncPool, received: Received, deadline_s: float | None
) -> Receipt | None:
    if not captures.eligible(received.event):
        return None
    key = received.event.event_id
    async with database.async_connection(pool, key, deadline_s=deadline_s) as conn:
        return await captures.first_capture_async(conn, received)


_bearer = HTTPBearer(auto_error=False)


async def authorised(
    request: Request,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
) -> None:
    """Also checked by ``ApiGate`` before the body is read; kept here for the schema."""
    given = credentials.credentials.encode() if credentials else b""
    if not hmac.compare_digest(given, request.app.state.api_token.encode()):
        raise Unauthorised()


def unauthorised_response() -> JSONResponse:
    return JSONResponse(
        {"error": "unauthorised", "detail": "bearer token missing or wrong"},
        status_code=401,
        headers={"WWW-Authenticate": "Bearer"},
    )


class ApiGate:
    """/api/* is authenticated, and its body bounded, before FastAPI reads a byte of it.

    FastAPI reads and parses a route's JSON body before it runs the route's dependencies,
    so an unauthenticated client could otherwise make it parse a body of any size.
    """

    def __init__(self, app: ASGIApp, *, token: str, max_body_bytes: int) -> None:
        self.app = app
        self.token = token
        self.max_body_bytes = max_body_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope.get("path", "")
        if scope["type"] != "http" or not (path == "/api" or path.startswith("/api/")):
            await self.app(scope, receive, send)
            return
        request = Request(scope, receive)
        if not bearer_matches(request.headers.get("authorization"), self.token):
            await unauthorised_response()(scope, receive, send)
            return
        try:
            body = await read_bounded(request, self.max_body_bytes, "api")
        except PayloadTooLarge as exc:
            await error_response(exc)(scope, receive, send)
            return
        except ClientDisconnect:
            return
        await self.app(scope, replaying(body, receive), send)


def _connection(request: Request) -> Iterator[db.Connection]:
    with database.connection(request.app.state.api_pool) as conn:
        yield conn


Conn = Annotated[db.Connection, Depends(_connection)]


api = APIRouter(prefix="/api", dependencies=[Depends(authorised)])


@api.post("/products", status_code=201)
def create_product(body: ProductIn, conn: Conn) -> dict[str, Any]:
    return _fields(catalog.create_product(conn, catalog.Product(**body.model_dump())))


@api.get("/products/{sku:path}")
def get_product(sku: PathId, conn: Conn) -> dict[str, Any]:
    return _fields(catalog.get_product(conn, sku))


@api.post("/carts", status_code=201)
def create_cart(body: CartIn, conn: Conn) -> dict[str, Any]:
    items = [carts.LineItem(sku=i.sku, quantity=i.quantity) for i in body.items]
    return _cart(carts.create_cart(conn, body.customer_email, items))


@api.get("/carts/{cart_id}")
def get_cart(cart_id: PathId, conn: Conn) -> dict[str, Any]:
    return _cart(carts.get_cart(conn, cart_id))


@api.post("/carts/{cart_id}/checkout", status_code=201)
def checkout(cart_id: PathId, body: CheckoutIn, conn: Conn) -> dict[str, Any]:
    return _fields(carts.checkout(conn, cart_id, body.provider, body.gateway_order_id))


@api.get("/orders/{order_id}")
def get_order(order_id: PathId, conn: Conn) -> dict[str, Any]:
    return _fields(orders.get_order(conn, order_id))


@api.get("/orders")
def list_orders(cart_id: QueryId, conn: Conn) -> dict[str, Any]:
    return {"orders": [_fields(o) for o in orders.orders_of_cart(conn, cart_id)]}


@api.post("/orders/{order_id}/refunds", status_code=201)
def refund_order(order_id: PathId, body: RefundIn, conn: Conn) -> dict[str, Any]:
    """A refund of the payment that paid the order, sent to its gateway once (the worker):
    201 with the refund; the same ``idempotency_key`` again answers the same refund."""
    made = orders.refund(conn, order_id, body.amount_paise, key=body.idempotency_key,
                         reason=body.reason)  # fmt: skip
    return _refund(made)


@api.post("/orders/{order_id}/refunds/{key}/cancel")
def cancel_order_refund(
    order_id: PathId, key: PathId, body: RefundCancelIn, conn: Conn
) -> dict[str, Any]:
    """Cancel a refund stuck ``requested``: 200 with it, never sent afterwards and its amount
    refundable again; 409 while the worker is calling the gateway with it or once the gateway
    has it; 404 for no such refund of the order."""
    done = orders.cancel_refund(conn, order_id, key, reason=body.reason,
                                cancelled_by=body.cancelled_by,
                                not_at_gateway=body.not_at_gateway)  # fmt: skip
    return _refund(done)


@api.get("/orders/{order_id}/refunds")
def list_order_refunds(order_id: PathId, conn: Conn) -> dict[str, Any]:
    return {"refunds": [_refund(r) for r in orders.refunds_of(conn, order_id)]}


def _refund(refund: Refund) -> dict[str, Any]:
    found = _fields(refund)
    return {**found, "provider": refund.provider.value, "state": refund.state.value}


@api.get("/payments/{provider}/{payment_id:path}")
def get_payment(provider: Provider, payment_id: PathId, conn: Conn) -> dict[str, Any]:
    found = _fields(payments.get_payment(conn, provider.value, payment_id))
    return {**found, "flags": list(found["flags"])}


@api.get("/disputes/{provider}/{dispute_id:path}")
def get_dispute(provider: Provider, dispute_id: PathId, conn: Conn) -> dict[str, Any]:
    """A dispute as the core holds it (``payhooks.intake.disputes``); 404 for none."""
    found = disputes.find(conn, dispute_id, [provider.value])
    if not found:
        raise NotFound("dispute", f"{provider.value}/{dispute_id}")
    return {**_fields(found[0]), "open": found[0].open}


def _add_api_routes(app: FastAPI, api_token: str) -> None:
    app.state.api_token = api_token
    app.include_router(api)
    app.add_middleware(ApiGate, token=api_token, max_body_bytes=MAX_API_BODY_BYTES)

    @app.exception_handler(Unauthorised)
    async def unauthorised(request: Request, exc: Unauthorised) -> JSONResponse:
        return unauthorised_response()


def _fields(value: Any) -> dict[str, Any]:
    return {name: getattr(value, name) for name in value.__dataclass_fields__}


def _cart(cart: carts.Cart) -> dict[str, Any]:
    fields = _fields(cart)
    fields["items"] = [_fields(item) for item in cart.items]
    return fields


def _add_probe_routes(
    app: FastAPI, metrics: Metrics, metrics_token: str | None, settings: Settings
) -> None:
    """Unauthenticated by default, so none takes a webhook connection or a pool thread:
    the database is read through the probes' side connection, once per period."""

    @app.get("/healthz")
    async def healthz() -> dict[str, str]:
        return {"status": "ok"}

    @app.get("/readyz")
    async def readyz(request: Request) -> JSONResponse:
        off = [p.value for p in settings.reconciliation_off()]
        try:
            refused = await _probes(request).ready.get()
        except DatabaseUnavailable as exc:
            body = {"status": "unavailable", "detail": str(exc), "reconciliation_off": off}
            return JSONResponse(body, status_code=503)
        ready: dict[str, object] = {"status": "ready", "reconciliation_off": off}
        if refused:  # the API credentials a gateway refuses: an operator must fix them
            ready["reconciliation_refused"] = refused
        return JSONResponse(ready)

    @app.get("/metrics")
    async def metrics_text(request: Request) -> Response:
        given = request.headers.get("authorization")
        if metrics_token is not None and not bearer_matches(given, metrics_token):
            return unauthorised_response()
        metrics.database.latest = await _probes(request).current_gauges()
        return Response(generate_latest(metrics.registry), media_type=CONTENT_TYPE_LATEST)


def _probes(request: Request) -> Probes:
    probes: Probes = request.app.state.probes
    return probes
