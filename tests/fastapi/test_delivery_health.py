"""Every request to the Starlette/FastAPI door is noted in the core's delivery log, a forged one
as its size, hash and 401, and shown by ``payhooks.starlette.health_route``; the answer never
waits for, nor depends on, the log's database."""

from __future__ import annotations

import hashlib
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import psycopg
from psycopg_pool import AsyncConnectionPool
from starlette.applications import Starlette

from payhooks.starlette import health_route, route
from tests.factories import ADAPTERS
from tests.fastapi.conftest import served
from tests.fastapi.merchant import REF, async_hooks, capture, prepare

OPERATOR = {"x-operator-token": "t0ken"}


def operator(request) -> bool:
    """The app's operators' auth, as a merchant passes it: here a token header."""
    return request.headers.get("x-operator-token") == "t0ken"


AWAY = "postgresql://127.0.0.1:1/none"


def app_for(database_url: str, **options: object) -> Starlette:
    pool = AsyncConnectionPool(database_url, min_size=1, max_size=2, open=False)

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        await pool.open(wait=True)
        yield
        await pool.close()

    webhooks = route(adapters=ADAPTERS.values(), hooks=async_hooks(), pool=pool, **options)  # type: ignore[call-overload]
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
