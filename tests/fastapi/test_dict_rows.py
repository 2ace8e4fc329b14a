"""A merchant's pool whose connections give rows as dicts (``row_factory=dict_row``, common in
FastAPI apps): payhooks' own statements read their rows by position whatever the merchant's
factory, and the merchant's hooks get the rows they are written for on every door that runs
them: the route on the pool, and the commands on connections payhooks opens itself."""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import psycopg
import pytest
from fastapi import FastAPI
from psycopg.rows import dict_row, tuple_row
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
from payhooks.sim.gateway import Purchase
from payhooks.starlette import health_route, timeline_route
from tests.acceptance.conftest import invoke
from tests.factories import ADAPTERS, GATEWAY, KEYS
from tests.fastapi import dict_hooks as written_for_dicts
from tests.fastapi.conftest import served
from tests.fastapi.merchant import KINDS, PAID, Merchant, capture, prepare
from tests.reconcile import conftest as reconciling
from tests.reconcile.conftest import API_KEYS

REFS = ["order_dict0001", "order_dict0002"]
FOUND = "SELECT ref FROM merchant_checkouts WHERE ref = %s"


def dict_hooks(kind: str) -> Hooks | AsyncHooks:
    """Hooks that read their own rows by column name, and say so."""
    if kind == "sync":
        hooks = Hooks(row_factory=dict_row)

        @hooks.on(EventKind.PAYMENT_CAPTURED)
        def mark_paid(conn, event):
            row = conn.execute(FOUND, (event.merchant_ref,)).fetchone()
            if row is None:
                return Applied(outcome=Outcome.PARKED)
            conn.execute(PAID, (row["ref"], event.payment_id))
            return Applied(outcome=Outcome.PROCESSED, order_id=row["ref"])

        return hooks
    async_hooks = AsyncHooks(row_factory=dict_row)

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


@pytest.mark.parametrize("kind", KINDS)
def test_hooks_written_for_dicts_get_dicts_on_a_pool_of_tuples_which_keeps_its_own(
    conn, database_url, kind
):
    prepare(conn, REFS[0])
    delivery = capture(REFS[0], payment_id="pay_dict000004")
    merchant = Merchant(database_url, kind, hooks=dict_hooks(kind), min_size=1, max_size=1)
    with served(merchant.app) as app, app.client() as client:
        answer = client.post(delivery.path, content=delivery.body, headers=delivery.headers)
        with merchant.every_connection_taken() as [lent]:
            made = lent.row_factory
    assert answer.json()["status"] == "processed", answer.text
    assert made is tuple_row  # the pool's connection given back as it was lent
    assert conn.execute("SELECT ref, paid_count FROM merchant_orders").fetchall() == [(REFS[0], 1)]


@pytest.mark.parametrize("kind", KINDS)
def test_hooks_that_leave_their_rows_to_a_pool_of_dict_rows_are_refused_when_the_app_is_built(
    database_url, kind
):
    """The commands would hand them tuples where the route hands them dicts: said at startup,
    not by a PhonePe payment that never applies."""
    pool: Any = (ConnectionPool if kind == "sync" else AsyncConnectionPool)(
        database_url, open=False, kwargs={"row_factory": dict_row}
    )
    undeclared = Hooks() if kind == "sync" else AsyncHooks()
    with pytest.raises(TypeError, match=r"AsyncHooks\(row_factory=dict_row\)"):
        router(adapters=list(ADAPTERS.values()), hooks=undeclared, pool=pool)


@pytest.mark.parametrize("kind", ["sync", "async"])
def test_a_plain_handler_on_a_pool_of_dict_rows_is_served_as_before(database_url, kind):
    """A handler function of the merchant's own (no registry: it cannot say its rows, and the
    commands' --hooks take a registry) worked on a dict_row pool, and the router refused to be
    built with it: only a registry that leaves its rows unsaid is refused."""

    def handle(conn: Any, event: Any) -> None:
        return None

    async def handle_async(conn: Any, event: Any) -> None:
        return None

    pool: Any = (ConnectionPool if kind == "sync" else AsyncConnectionPool)(
        database_url, open=False, kwargs={"row_factory": dict_row}
    )
    router(adapters=list(ADAPTERS.values()), hooks=handle if kind == "sync" else handle_async,
           pool=pool)  # fmt: skip


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


gateway_api = reconciling.gateway_api  # its fixture
DOOR_REF = "order_dictdoor01"
HOOKS = {"sync": "tests.fastapi.dict_hooks:hooks", "async": "tests.fastapi.dict_hooks:async_hooks"}


def checked_out(conn, gateway: str = "razorpay") -> None:
    """The merchant's checkout: its order row, and the amount payhooks is told to expect."""
    conn.execute(written_for_dicts.ORDERS)
    with conn.transaction():
        conn.execute("INSERT INTO dict_orders VALUES (%s, 49900, 'INR', NULL)", (DOOR_REF,))
        expect(conn, gateway, DOOR_REF, 49_900)


def paid_by(conn) -> str | None:
    return conn.execute("SELECT paid_by FROM dict_orders WHERE ref = %s", (DOOR_REF,)).fetchone()[0]


def payhooks_command(api_url: str, *args: str) -> Any:
    """``payhooks *args``, as the installed script runs it, with the gateways' API keys."""
    done = invoke({**os.environ, **KEYS.env(), **API_KEYS.env(api_url)}, *args, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    return done


def paid_at_gateway(api: Any, provider: Provider, payment_id: str) -> None:
    order = Purchase(provider=provider, cart_id=DOOR_REF, reference=DOOR_REF, amount_paise=49_900,
                     items={"TEA": 1})  # fmt: skip
    api.pay(order, payment_id)


@pytest.mark.parametrize("kind", KINDS)
def test_payhooks_confirm_hands_hooks_written_for_dicts_dict_rows(
    conn, database_url, gateway_api, kind
):
    """A PhonePe payment reaches the hooks only through the confirmation pass: on a connection
    of the command's own, their ``row["amount_paise"]`` must read."""
    api, api_url = gateway_api
    checked_out(conn, "phonepe")
    paid_at_gateway(api, Provider.PHONEPE, "OM2601010000077")
    sent = GATEWAY.phonepe("checkout.order.completed", merchant_order_id=DOOR_REF,
                           amount_paise=49_900, transaction_id="OM2601010000077")  # fmt: skip
    claimed = ingest(
        conn, ADAPTERS[Provider.PHONEPE], sent.body, sent.headers, written_for_dicts.hooks
    )
    assert claimed.outcome is Outcome.CONFIRMING
    done = payhooks_command(
        api_url, "confirm", "--once", "--hooks", HOOKS[kind], "--database-url", database_url
    )
    assert "1 payment event(s) applied" in done.stdout, done.stdout + done.stderr
    assert paid_by(conn) == "OM2601010000077"


@pytest.mark.parametrize("kind", KINDS)
def test_payhooks_replay_hands_hooks_written_for_dicts_dict_rows(
    conn, database_url, gateway_api, kind
):
    _, api_url = gateway_api
    conn.execute(written_for_dicts.ORDERS)
    early = GATEWAY.razorpay("payment.captured", payment_id="pay_dictdoor0001", order_id=DOOR_REF,
                             amount_paise=49_900)  # fmt: skip
    parked = ingest(
        conn, ADAPTERS[Provider.RAZORPAY], early.body, early.headers, written_for_dicts.hooks
    )
    assert parked.outcome is Outcome.PARKED  # before its checkout
    checked_out(conn)
    done = payhooks_command(
        api_url, "replay", parked.event.event_id, "--hooks", HOOKS[kind],
        "--database-url", database_url,
    )  # fmt: skip
    assert json.loads(done.stdout)["status"] == "processed"
    assert paid_by(conn) == "pay_dictdoor0001"


@pytest.mark.parametrize("kind", KINDS)
def test_payhooks_reconcile_hands_hooks_written_for_dicts_dict_rows(
    conn, database_url, gateway_api, kind
):
    api, api_url = gateway_api
    checked_out(conn)
    paid_at_gateway(api, Provider.RAZORPAY, "pay_dictdoor0002")
    done = payhooks_command(
        api_url, "reconcile", "--older-than-s", "0", "--hooks", HOOKS[kind],
        "--database-url", database_url,
    )  # fmt: skip
    assert "recovered 1 payment(s) no webhook brought" in done.stdout, done.stdout + done.stderr
    assert paid_by(conn) == "pay_dictdoor0002"
