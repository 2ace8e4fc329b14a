"""Every request to the Starlette/FastAPI door is noted in the core's delivery log, a forged one
as its size, hash and 401, and shown by ``payhooks.starlette.health_route``; the answer never
waits for, nor depends on, the log's database."""

from __future__ import annotations

import hashlib
import threading
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import httpx
import psycopg
from fastapi import FastAPI
from psycopg_pool import AsyncConnectionPool
from starlette.applications import Starlette

from payhooks.events import Provider
from payhooks.fastapi import router
from payhooks.starlette import health_route, lifespan, route
from tests.factories import ADAPTERS
from tests.fastapi.conftest import served
from tests.fastapi.merchant import REF, async_hooks, capture, prepare

OPERATOR = {"x-operator-token": "t0ken"}


def operator(request) -> bool:
    """The app's operators' auth, as a merchant passes it: here a token header."""
    return request.headers.get("x-operator-token") == "t0ken"


AWAY = "postgresql://127.0.0.1:1/none"


def app_for(database_url: str, adapters=None, **options: object) -> Starlette:
    pool = AsyncConnectionPool(database_url, min_size=1, max_size=2, open=False)

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        await pool.open(wait=True)
        yield
        await pool.close()

    served = ADAPTERS.values() if adapters is None else adapters
    webhooks = route(adapters=served, hooks=async_hooks(), pool=pool, **options)  # type: ignore[call-overload]
    return Starlette(routes=[webhooks, health_route(pool=pool, allow=operator)], lifespan=lifespan)


def noted(database_url: str, count: int) -> list[tuple[object, ...]]:
    """The log is written a moment after the answer: wait (a bounded while) for the lines."""
    deadline = time.monotonic() + 10
    while True:
        with psycopg.connect(database_url) as conn:
            rows = conn.execute(
                "SELECT provider, status, outcome, verified, event_id, body_bytes, body_sha256"
                " FROM payhooks_deliveries ORDER BY id"
            ).fetchall()
        if len(rows) >= count or time.monotonic() > deadline:
            return rows
        time.sleep(0.05)


def test_a_forged_and_a_good_delivery_are_noted_and_the_forged_one_shown(conn, database_url):
    prepare(conn, REF)
    delivery = capture()
    forged = {**delivery.headers, "x-razorpay-signature": "0" * 64}
    with served(app_for(database_url)) as running, running.client() as client:
        good = client.post(delivery.path, content=delivery.body, headers=delivery.headers)
        for _ in range(5):
            refused = client.post(delivery.path, content=delivery.body, headers=forged)
        rows = noted(database_url, 6)
        shown = client.get("/payhooks/health", headers=OPERATOR).json()
    assert (good.status_code, refused.status_code) == (200, 401)
    sha = hashlib.sha256(delivery.body).hexdigest()
    assert rows[0][:4] == ("razorpay", 200, "processed", True) and rows[0][4]
    assert (
        rows[1:]
        == [("razorpay", 401, "signature_mismatch", False, None, len(delivery.body), sha)] * 5
    )
    razorpay = next(g for g in shown["gateways"] if g["provider"] == "razorpay")
    assert razorpay["last_hour"] == {"200": 1, "401": 5}
    assert razorpay["last_2xx_at"] is not None
    assert shown["forged_signatures"] == ["razorpay"]


def test_the_answer_is_the_same_with_the_logs_database_away(conn, database_url):
    prepare(conn, REF)
    delivery = capture()
    with served(app_for(database_url, delivery_log=AWAY)) as running, running.client() as client:
        first = client.post(delivery.path, content=delivery.body, headers=delivery.headers)
        again = client.post(delivery.path, content=delivery.body, headers=delivery.headers)
    assert (first.status_code, first.json()["status"]) == (200, "processed")
    assert (again.status_code, again.json()["status"]) == (200, "duplicate")
    assert conn.execute("SELECT paid_count FROM merchant_orders").fetchall() == [(1,)]


def fastapi_app_for(database_url: str) -> FastAPI:
    """A merchant's FastAPI app as docs/fastapi.md builds it: its own lifespan for its pool,
    the router included, nothing else said about the log."""
    pool = AsyncConnectionPool(database_url, min_size=1, max_size=2, open=False)

    @asynccontextmanager
    async def opens_the_pool(app: FastAPI) -> AsyncIterator[None]:
        await pool.open(wait=True)
        yield
        await pool.close()

    app = FastAPI(lifespan=opens_the_pool)
    app.include_router(router(adapters=ADAPTERS.values(), hooks=async_hooks(), pool=pool))
    return app


def forged_requests(client: httpx.Client, count: int) -> None:
    delivery = capture()
    forged = {**delivery.headers, "x-razorpay-signature": "0" * 64}
    for _ in range(count):
        response = client.post(delivery.path, content=delivery.body, headers=forged)
        assert response.status_code == 401


def lines_now(database_url: str) -> int:
    """What the log holds at this moment: no waiting for a writer still at work."""
    with psycopg.connect(database_url) as conn:
        found = conn.execute("SELECT count(*) FROM payhooks_deliveries").fetchone()
    return int(found[0]) if found else 0


def writers() -> set[threading.Thread]:
    return {t for t in threading.enumerate() if t.name == "payhooks-delivery-log" and t.is_alive()}


def test_a_fastapi_apps_shutdown_writes_every_line_and_ends_the_logs_writer(database_url):
    before = writers()
    with served(fastapi_app_for(database_url)) as running, running.client() as client:
        forged_requests(client, 5)
    assert lines_now(database_url) == 5
    assert writers() <= before


def test_a_request_for_an_unknown_gateway_is_noted_without_the_name_it_came_under(database_url):
    with served(app_for(database_url)) as running, running.client() as client:
        answered = client.post("/webhooks/forged-name-x1", content=b"{}")
        noted(database_url, 1)
    assert answered.status_code == 404 and "forged-name-x1" in answered.json()["detail"]
    with psycopg.connect(database_url) as conn:
        [(provider, outcome, detail)] = conn.execute(
            "SELECT provider, outcome, detail FROM payhooks_deliveries"
        ).fetchall()
    assert (provider, outcome) == ("unknown", "provider_not_configured")
    assert detail and "forged-name-x1" not in detail


def starlette_app_for(database_url: str) -> Starlette:
    """A plain Starlette app with the webhook and the health route, its lifespan payhooks'
    around its own."""
    pool = AsyncConnectionPool(database_url, min_size=1, max_size=2, open=False)

    @asynccontextmanager
    async def opens_the_pool(app: Starlette) -> AsyncIterator[None]:
        await pool.open(wait=True)
        yield
        await pool.close()

    routes = [
        route(adapters=ADAPTERS.values(), hooks=async_hooks(), pool=pool),
        health_route(pool=pool, allow=operator),
    ]
    return Starlette(routes=routes, lifespan=lifespan(routes, around=opens_the_pool))


def others_connected(database_url: str) -> int:
    """The sessions on the test's database besides this one, once every one the app closed
    has ended (a bounded while: a server ends a session a moment after its client goes)."""
    deadline = time.monotonic() + 10
    with psycopg.connect(database_url, autocommit=True) as conn:
        while True:
            found = conn.execute(
                "SELECT count(*) FROM pg_stat_activity"
                " WHERE datname = current_database() AND pid <> pg_backend_pid()"
            ).fetchone()
            count = int(found[0]) if found else 0
            if count == 0 or time.monotonic() > deadline:
                return count
            time.sleep(0.05)


def test_a_starlette_apps_shutdown_writes_every_line_and_lets_go_of_what_the_routes_hold(
    database_url,
):
    before = writers()
    with served(starlette_app_for(database_url)) as running, running.client() as client:
        forged_requests(client, 5)
        assert client.get("/payhooks/health", headers=OPERATOR).status_code == 200
    assert lines_now(database_url) == 5
    assert writers() <= before
    assert others_connected(database_url) == 0


def test_an_app_started_again_notes_the_requests_of_its_second_life(database_url):
    """Forged requests never take a pool connection: this app's pool is never opened."""
    pool = AsyncConnectionPool(database_url, open=False)
    app = FastAPI()
    app.include_router(router(adapters=ADAPTERS.values(), hooks=async_hooks(), pool=pool))
    for _ in range(2):
        with served(app) as running, running.client() as client:
            forged_requests(client, 3)
    assert lines_now(database_url) == 6


def test_a_request_for_a_known_gateway_the_app_does_not_serve_is_noted_under_its_name(database_url):
    """docs/fastapi.md, "Every request, and a health view": a gateway sending to an app that
    does not serve it is seen under its own name (a name payhooks knows keeps no stranger's
    words), as refused."""
    cashfree_only = [ADAPTERS[Provider.CASHFREE]]
    with served(app_for(database_url, cashfree_only)) as running, running.client() as client:
        answered = client.post("/webhooks/razorpay", content=b"{}")
        noted(database_url, 1)
    assert answered.status_code == 404
    assert answered.json()["error"] == "provider_not_configured"
    with psycopg.connect(database_url) as conn:
        [(provider, outcome, detail)] = conn.execute(
            "SELECT provider, outcome, detail FROM payhooks_deliveries"
        ).fetchall()
    assert (provider, outcome, detail) == (
        "razorpay",
        "provider_not_configured",
        "provider 'razorpay' is not configured",
    )
