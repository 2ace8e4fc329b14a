"""A merchant's pool whose connections give rows as dicts (``row_factory=dict_row``, common in
FastAPI apps): payhooks' own statements read their rows by position whatever the merchant's
factory, and the merchant's hooks still get the rows they asked for."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import psycopg
import pytest
from fastapi import FastAPI
from psycopg.rows import dict_row
from psycopg_pool import AsyncConnectionPool, ConnectionPool

import payhooks
from payhooks import (
    Applied,
    EventKind,
    Hooks,
    Outcome,
    Provider,
    expect,
    ingest,
    ingest_in_transaction,
)
from payhooks.fastapi import AsyncHooks, router
from payhooks.intake import idempotency, payments
from payhooks.refunding import refunds
from payhooks.starlette import health_route, timeline_route
from tests.factories import ADAPTERS, GATEWAY
from tests.fastapi.conftest import served
from tests.fastapi.merchant import KINDS, PAID, capture, prepare

REFS = ["order_dict0001", "order_dict0002"]
FOUND = "SELECT ref FROM merchant_checkouts WHERE ref = %s"


def dict_hooks(kind: str) -> Hooks | AsyncHooks:
    """Hooks that read their own rows by column name: they need the merchant's factory."""
    if kind == "sync":
        hooks = Hooks()

        @hooks.on(EventKind.PAYMENT_CAPTURED)
        def mark_paid(conn, event):
            row = conn.execute(FOUND, (event.merchant_ref,)).fetchone()
            if row is None:
                return Applied(outcome=Outcome.PARKED)
            conn.execute(PAID, (row["ref"], event.payment_id))
            return Applied(outcome=Outcome.PROCESSED, order_id=row["ref"])

        return hooks
    async_hooks = AsyncHooks()

    @async_hooks.on(EventKind.PAYMENT_CAPTURED)
    async def mark_paid_async(conn, event):
        row = await (await conn.execute(FOUND, (event.merchant_ref,))).fetchone()
        if row is None:
            return Applied(outcome=Outcome.PARKED)
        await conn.execute(PAID, (row["ref"], event.payment_id))
        return Applied(outcome=Outcome.PROCESSED, order_id=row["ref"])

    return async_hooks


def allowed(request: Any) -> bool:
    return True


def app_for(database_url: str, kind: str) -> FastAPI:
    options: dict[str, Any] = {"min_size": 1, "max_size": 2, "open": False,
                               "kwargs": {"row_factory": dict_row}}  # fmt: skip
    pool: Any = (ConnectionPool if kind == "sync" else AsyncConnectionPool)(database_url, **options)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        opened = pool.open(wait=True)
        if kind == "async":
            await opened
        yield
        closed = pool.close()
        if kind == "async":
            await closed

    app = FastAPI(lifespan=lifespan)
    app.include_router(router(adapters=list(ADAPTERS.values()), hooks=dict_hooks(kind), pool=pool))
    app.router.routes.append(health_route(pool=pool, allow=allowed))
    app.router.routes.append(timeline_route(pool=pool, allow=allowed))
    return app


@pytest.mark.parametrize("kind", KINDS)
def test_a_pool_of_dict_rows_takes_payments_in_and_answers_its_operators(conn, database_url, kind):
    prepare(conn, REFS[0])
    first = capture(REFS[0], payment_id="pay_dict000001")
    edited = GATEWAY.razorpay(
        "payment.captured", payment_id="pay_dict000001", order_id=REFS[0], amount_paise=200,
        event_id=first.headers["x-razorpay-event-id"],
    )  # fmt: skip
    unknown = capture(REFS[1], payment_id="pay_dict000002")
    with served(app_for(database_url, kind)) as app, app.client() as client:

        def post(delivery: Any) -> tuple[int, Any]:
            response = client.post(delivery.path, content=delivery.body, headers=delivery.headers)
            return response.status_code, response.json().get("status")

        answers = [post(first), post(first), post(edited), post(unknown), post(unknown)]
        health = client.get("/payhooks/health")
        story = client.get("/payhooks/timeline", params={"q": REFS[0]})
    assert answers == [
        (200, "processed"), (200, "duplicate"), (200, "duplicate"), (200, "parked"),
        (200, "parked"),
    ], answers  # fmt: skip
    assert health.status_code == 200, health.text
    assert story.status_code == 200, story.text
    assert conn.execute("SELECT ref, paid_count FROM merchant_orders").fetchall() == [(REFS[0], 1)]


def test_the_library_calls_on_a_connection_of_dict_rows(database_url, conn):
    prepare(conn, REFS[0])
    adapter = ADAPTERS[Provider.RAZORPAY]
    delivery = capture(REFS[0], payment_id="pay_dict000003")
    hooks = dict_hooks("sync")
    with psycopg.connect(database_url, autocommit=True, row_factory=dict_row) as mine:
        payhooks.migrate(mine)  # already migrated: it reads what was applied
        expected = expect(mine, "razorpay", REFS[0], 100)
        first = ingest(mine, adapter, delivery.body, delivery.headers, hooks)
        with mine.transaction():
            pending = ingest_in_transaction(mine, adapter, delivery.body, delivery.headers, hooks)
        again = pending.receipt()
        found = payments.find(mine, Provider.RAZORPAY, "pay_dict000003")
        with mine.transaction():
            refund = refunds.request(
                mine, "razorpay", "pay_dict000003", 50, key="ticket-1", captured_paise=100,
                reason="asked", requested_by="asha",
            )  # fmt: skip
        listed = refunds.of_payment(mine, Provider.RAZORPAY, "pay_dict000003")
        parked = idempotency.parked(mine, limit=10)
    assert expected.amount_paise == 100
    assert (first.outcome, again.outcome) == (Outcome.PROCESSED, Outcome.DUPLICATE)
    assert found is not None and found.payment_id == "pay_dict000003"
    assert [r.idempotency_key for r in listed] == [refund.idempotency_key]
    assert parked == []
