"""``payhooks.starlette.timeline_route`` in a merchant's FastAPI app, served by uvicorn and
asked over HTTP: what an operator types answers each gateway order it names with its story,
the expectation and what each delivery did, from the core's tables."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest
from fastapi import FastAPI
from psycopg_pool import AsyncConnectionPool, ConnectionPool

import payhooks
from payhooks.fastapi import router
from payhooks.starlette import timeline_route
from tests.factories import ADAPTERS
from tests.fastapi.conftest import served
from tests.fastapi.merchant import REF, async_hooks, capture, prepare, sync_hooks

OPERATOR = {"x-operator-token": "t0ken"}


def operator(request) -> bool:
    """The app's operators' auth, as a merchant passes it: here a token header."""
    return request.headers.get("x-operator-token") == "t0ken"


def app_for(database_url: str, kind: str) -> FastAPI:
    pools = {"sync": ConnectionPool, "async": AsyncConnectionPool}
    pool = pools[kind](database_url, min_size=1, max_size=2, open=False)
    hooks = sync_hooks() if kind == "sync" else async_hooks()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        if kind == "sync":
            pool.open(wait=True)
        else:
            await pool.open(wait=True)
        yield
        if kind == "sync":
            pool.close()
        else:
            await pool.close()

    app = FastAPI(lifespan=lifespan)
    app.include_router(router(adapters=ADAPTERS.values(), hooks=hooks, pool=pool))
    app.router.routes.append(timeline_route(pool=pool, allow=operator))
    return app


@pytest.mark.parametrize("kind", ["sync", "async"])
def test_an_underpaid_capture_is_told_with_both_amounts(conn, database_url, kind):
    prepare(conn, REF)
    payhooks.expect(conn, "razorpay", REF, 49_900, "INR", "A-7")
    delivery = capture()  # 100 paise
    with served(app_for(database_url, kind)) as running, running.client() as client:
        answered = client.post(delivery.path, content=delivery.body, headers=delivery.headers)
        found = client.get("/payhooks/timeline", headers=OPERATOR, params={"q": "A-7"})
    assert answered.json()["status"] == "parked"
    assert found.status_code == 200
    [order] = found.json()["orders"]
    assert (order["matched"], order["provider"], order["gateway_order_id"]) == (
        "merchant reference",
        "razorpay",
        REF,
    )
    assert order["expected"]["amount_paise"] == 49_900
    [record] = order["records"]
    assert record["outcome"] == "parked"
    mismatch = record["amount_mismatch"]
    assert (mismatch["expected_paise"], mismatch["paid_paise"], mismatch["resolved"]) == (
        49_900,
        100,
        False,
    )
    assert order["payments"] == []


def test_text_that_names_nothing_answers_no_orders(database_url):
    with served(app_for(database_url, "async")) as running, running.client() as client:
        found = client.get("/payhooks/timeline", headers=OPERATOR, params={"q": "<script>"})
        empty = client.get("/payhooks/timeline", headers=OPERATOR)
    assert found.json() == {"query": "<script>", "orders": []}
    assert empty.json() == {"query": "", "orders": []}


@pytest.mark.parametrize("kind", ["sync", "async"])
def test_a_caller_the_apps_auth_does_not_allow_is_refused_403_and_reads_nothing(
    conn, database_url, kind
):
    prepare(conn, REF)
    payhooks.expect(conn, "razorpay", REF, 49_900, "INR", "A-7")
    with served(app_for(database_url, kind)) as running, running.client() as client:
        stranger = client.get("/payhooks/timeline", params={"q": "A-7"})
        wrong = client.get(
            "/payhooks/timeline", params={"q": "A-7"}, headers={"x-operator-token": "guess"}
        )
    assert (stranger.status_code, wrong.status_code) == (403, 403)
    assert stranger.json() == {"error": "forbidden"} and "A-7" not in stranger.text


HOSTILE_QUERIES = ["\x00", "pay_\x00x", "\x01", "\x1b[31m", "\x7f", "\x85"]


@pytest.mark.parametrize("q", HOSTILE_QUERIES)
def test_a_query_holding_a_control_character_is_refused_400(database_url, q):
    """No identifier holds one (and the database refuses NUL): refused, never a 500."""
    with served(app_for(database_url, "sync")) as running, running.client() as client:
        found = client.get("/payhooks/timeline", headers=OPERATOR, params={"q": q})
    assert found.status_code == 400
    assert found.json() == {"error": "the query holds a control character"}
