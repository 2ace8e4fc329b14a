"""The ASGI app: thin handlers; every outcome and error maps to HTTP in one table."""

from __future__ import annotations

import hmac
import logging
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from typing import Annotated, Any

import psycopg_pool
from fastapi import APIRouter, Depends, FastAPI, Query, Request
from fastapi import Path as PathParam
from fastapi.responses import JSONResponse, Response
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from pydantic import BaseModel, Field
from starlette.concurrency import run_in_threadpool

from payhooks import db
from payhooks.config import Settings
from payhooks.errors import (
    Conflict,
    DatabaseUnavailable,
    InvalidRequest,
    MalformedPayload,
    NotFound,
    PayhooksError,
    PayloadTooLarge,
    ProviderNotConfigured,
    SignatureMismatch,
)
from payhooks.events import Event, Provider
from payhooks.ingest import (
    MAX_BODY_BYTES,
    Outcome,
    Receipt,
    ingest_event,
    signed_headers,
    verified_event,
)
from payhooks.metrics import Metrics
from payhooks.providers import Adapter
from payhooks.shop import carts, catalog, orders, payments

log = logging.getLogger("payhooks")

# DESIGN.md section 3: permanent conditions answer 200 so the gateway stops retrying.
STATUS_OF_OUTCOME = {outcome: 200 for outcome in Outcome}
STATUS_OF_ERROR: list[tuple[type[PayhooksError], int, str]] = [
    (PayloadTooLarge, 413, "payload_too_large"),
    (SignatureMismatch, 401, "signature_mismatch"),
    (MalformedPayload, 400, "malformed_payload"),
    (ProviderNotConfigured, 404, "provider_not_configured"),
    (DatabaseUnavailable, 503, "database_unavailable"),
    (NotFound, 404, "not_found"),
    (Conflict, 409, "conflict"),
    (InvalidRequest, 422, "invalid_request"),
]


def error_status(exc: PayhooksError) -> tuple[int, str]:
    for kind, status, code in STATUS_OF_ERROR:
        if isinstance(exc, kind):
            return status, code
    return 500, "internal_error"


# Identifiers: printable, no control characters (PostgreSQL text cannot hold NUL).
ID_PATTERN = r"^[^\x00-\x1f\x7f]+$"
Id = Annotated[str, Field(min_length=1, max_length=64, pattern=ID_PATTERN)]
PathId = Annotated[str, PathParam(min_length=1, max_length=64, pattern=ID_PATTERN)]
QueryId = Annotated[str, Query(min_length=1, max_length=64, pattern=ID_PATTERN)]


class ProductIn(BaseModel):
    sku: Id
    name: str = Field(min_length=1, max_length=200, pattern=ID_PATTERN)
    price_paise: int = Field(ge=0, le=10**10)  # times 100 lines of 100,000 stays in bigint
    stock: int = Field(ge=0, le=2**31 - 1)


class ItemIn(BaseModel):
    sku: Id
    quantity: int = Field(gt=0, le=100_000)


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


def create_app(settings: Settings, *, api_token: str, url: str | None = None) -> FastAPI:
    """The service. The pool is opened at startup against ``url`` (or the settings' database)."""
    if not api_token:
        raise ValueError("the API token must not be empty")
    adapters = settings.adapters()
    metrics = Metrics()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        pool = db.open_pool(url or db.database_url(settings), settings)
        app.state.pool = pool
        metrics.watch(pool)
        try:
            yield
        finally:
            pool.close()

    app = FastAPI(title="payhooks", version="0.1.0", lifespan=lifespan)
    app.state.metrics = metrics
    _install_error_handlers(app)
    _add_webhook_route(app, adapters, metrics)
    _add_api_routes(app, api_token)
    _add_probe_routes(app, metrics)
    return app


def _install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(PayhooksError)
    async def payhooks_error(request: Request, exc: PayhooksError) -> JSONResponse:
        status, code = error_status(exc)
        detail = getattr(exc, "reason", None) or str(exc)
        return JSONResponse({"error": code, "detail": detail}, status_code=status)


def _pool(request: Request) -> psycopg_pool.ConnectionPool:
    pool: psycopg_pool.ConnectionPool = request.app.state.pool
    return pool


async def read_body(request: Request) -> bytes:
    """The exact bytes, refused past 1 MiB without reading further."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > MAX_BODY_BYTES:
        raise PayloadTooLarge("webhook", f"body of {declared} bytes exceeds {MAX_BODY_BYTES}")
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > MAX_BODY_BYTES:
            raise PayloadTooLarge("webhook", f"body exceeds {MAX_BODY_BYTES} bytes")
        chunks.append(chunk)
    return b"".join(chunks)


def _add_webhook_route(app: FastAPI, adapters: dict[Provider, Adapter], metrics: Metrics) -> None:
    served = {provider.value: adapter for provider, adapter in adapters.items()}

    @app.post("/webhooks/{provider}")
    async def webhook(provider: str, request: Request) -> JSONResponse:
        started = time.perf_counter()
        try:
            adapter = served.get(provider)
            if adapter is None:
                raise ProviderNotConfigured(provider)
            body = await read_body(request)
            headers = {name.lower(): value for name, value in request.headers.items()}
            event = verified_event(adapter, body, headers)
        except PayhooksError as exc:
            _rejected(metrics, provider, exc, started)
            raise
        receipt = await run_in_threadpool(
            _deliver,
            _pool(request),
            event,
            body,
            signed_headers(adapter, headers),
            metrics,
            started,
        )
        return JSONResponse(
            {
                "status": receipt.outcome.value,
                "event_id": event.event_id,
                "order_id": receipt.order_id,
            },
            status_code=STATUS_OF_OUTCOME[receipt.outcome],
        )


def _deliver(
    pool: psycopg_pool.ConnectionPool,
    event: Event,
    body: bytes,
    signed: dict[str, str],
    metrics: Metrics,
    started: float,
) -> Receipt:
    fields = {
        "provider": event.provider.value,
        "event_id": event.event_id,
        "event_type": event.event_type,
    }
    try:
        with db.connection(pool, event.event_id) as conn:
            receipt = ingest_event(conn, event, body, signed, payments.apply_event, pipeline=True)
    except PayhooksError as exc:
        status, code = error_status(exc)
        metrics.answered(event.provider.value, code, time.perf_counter() - started)
        log.warning("webhook_unavailable", extra={**fields, "status": status, "reason": code})
        raise
    except Exception:
        metrics.answered(event.provider.value, "internal_error", time.perf_counter() - started)
        log.exception("webhook_failed", extra=fields)
        raise
    metrics.answered(event.provider.value, receipt.outcome.value, time.perf_counter() - started)
    if receipt.mismatch:
        metrics.mismatches.labels(event.provider.value).inc()
        log.warning("webhook_payload_mismatch", extra=fields)
    log.info(f"webhook_{receipt.outcome.value}", extra={**fields, "order_id": receipt.order_id})
    return receipt


def _rejected(metrics: Metrics, provider: str, exc: PayhooksError, started: float) -> None:
    status, code = error_status(exc)
    metrics.answered(provider, code, time.perf_counter() - started)
    log.warning(
        "webhook_rejected",
        extra={"provider": provider, "status": status, "reason": code, "detail": str(exc)},
    )


_bearer = HTTPBearer(auto_error=False)


class Unauthorised(Exception):
    """No or wrong bearer token on /api/*."""


def authorised(
    request: Request,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
) -> None:
    given = credentials.credentials.encode() if credentials else b""
    if not hmac.compare_digest(given, request.app.state.api_token.encode()):
        raise Unauthorised()


def _connection(request: Request) -> Iterator[db.Connection]:
    with db.connection(_pool(request)) as conn:
        yield conn


Conn = Annotated[db.Connection, Depends(_connection)]


api = APIRouter(prefix="/api", dependencies=[Depends(authorised)])


@api.post("/products", status_code=201)
def create_product(body: ProductIn, conn: Conn) -> dict[str, Any]:
    return _fields(catalog.create_product(conn, catalog.Product(**body.model_dump())))


@api.get("/products/{sku}")
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


@api.get("/payments/{provider}/{payment_id}")
def get_payment(provider: Provider, payment_id: PathId, conn: Conn) -> dict[str, Any]:
    found = _fields(payments.get_payment(conn, provider.value, payment_id))
    return {**found, "flags": list(found["flags"])}


def _add_api_routes(app: FastAPI, api_token: str) -> None:
    app.state.api_token = api_token
    app.include_router(api)

    @app.exception_handler(Unauthorised)
    async def unauthorised(request: Request, exc: Unauthorised) -> JSONResponse:
        return JSONResponse(
            {"error": "unauthorised", "detail": "bearer token missing or wrong"},
            status_code=401,
            headers={"WWW-Authenticate": "Bearer"},
        )


def _fields(value: Any) -> dict[str, Any]:
    return {name: getattr(value, name) for name in value.__dataclass_fields__}


def _cart(cart: carts.Cart) -> dict[str, Any]:
    fields = _fields(cart)
    fields["items"] = [_fields(item) for item in cart.items]
    return fields


def _add_probe_routes(app: FastAPI, metrics: Metrics) -> None:
    @app.get("/healthz")
    def healthz() -> dict[str, str]:
        return {"status": "ok"}

    @app.get("/readyz")
    def readyz(request: Request) -> JSONResponse:
        try:
            with db.connection(_pool(request)) as conn:
                conn.execute("SELECT 1")
        except DatabaseUnavailable as exc:
            return JSONResponse({"status": "unavailable", "detail": str(exc)}, status_code=503)
        return JSONResponse({"status": "ready"})

    @app.get("/metrics")
    def metrics_text() -> Response:
        return Response(generate_latest(metrics.registry), media_type=CONTENT_TYPE_LATEST)
