"""The console in a merchant's FastAPI app replays through the app's own handler as its webhook
route does: async hooks on the app's event loop (so what the app made on its loop, a client, a
lock, serves them), and a handler that raises or commits is said on the page and recorded,
never a bare 500. A console on a database payhooks has not migrated says so; its addresses
never name another host, whatever root path the server was given; a closed console stays
closed. Served by real uvicorn, driven over HTTP."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import psycopg
import pytest
from fastapi import FastAPI
from psycopg_pool import AsyncConnectionPool

import payhooks
from payhooks import EventKind
from payhooks.console import close, console
from payhooks.console.pages import OwnPool, local, prefix_of
from payhooks.fastapi import AsyncHooks, router
from payhooks.operations.operators import add_operator
from payhooks.plumbing.errors import DatabaseUnavailable
from tests import loopback
from tests.console.conftest import csrf_of
from tests.factories import ADAPTERS
from tests.fastapi import dict_hooks as written_for_dicts
from tests.fastapi.conftest import Served, served
from tests.fastapi.merchant import capture

CONSOLE = "/ops"
OPERATOR, PASSWORD = "lena", "twelve chars at least"


class Loop:
    """What the app made on its own loop at startup, as a real app's clients are."""

    ready: asyncio.Event | None = None
    behaviour = "park"


def app_with(url: str, hooks: AsyncHooks, lend_pool: bool) -> FastAPI:
    """The app's pool as most apps make theirs: not in autocommit. The console borrows it for
    replays (``lend_pool``) or makes short connections of its own."""
    own: AsyncConnectionPool[Any] = AsyncConnectionPool(url, open=False)
    operators = console(
        url, adapters=ADAPTERS.values(), hooks=hooks, pool=own if lend_pool else None
    )

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        Loop.ready = asyncio.Event()  # bound to the server's loop
        Loop.ready.set()
        await own.open()
        yield
        await own.close()
        await asyncio.to_thread(close, operators)

    app = FastAPI(lifespan=lifespan)
    app.include_router(router(adapters=ADAPTERS.values(), hooks=hooks, pool=own))
    app.mount(CONSOLE, operators)
    return app


def loop_bound_hooks() -> AsyncHooks:
    hooks = AsyncHooks()

    @hooks.on(EventKind.PAYMENT_CAPTURED)
    async def paid(conn, event):
        assert Loop.ready is not None
        await asyncio.wait_for(Loop.ready.wait(), 1)  # fails on any other loop
        if Loop.behaviour == "park":
            return payhooks.Applied(outcome=payhooks.Outcome.PARKED)
        if Loop.behaviour == "raise":
            raise RuntimeError("the app's own bug")
        if Loop.behaviour == "commit":
            await conn.commit()
        await conn.execute("CREATE TABLE IF NOT EXISTS paid (ref text PRIMARY KEY)")
        await conn.execute("INSERT INTO paid VALUES (%s)", (event.merchant_ref,))
        return None

    return hooks


@pytest.fixture(params=[True, False], ids=["the app's pool", "a connection of its own"])
def app(merchant_url: str, request) -> Iterator[tuple[Served, psycopg.Connection[Any]]]:
    with psycopg.connect(merchant_url, autocommit=True) as conn:
        payhooks.migrate(conn)
        add_operator(conn, OPERATOR, PASSWORD)
        Loop.behaviour = "park"
        with served(app_with(merchant_url, loop_bound_hooks(), request.param)) as running:
            yield running, conn


@contextlib.contextmanager
def operator(base_url: str) -> Iterator[httpx.Client]:
    with loopback.Client(base_url=base_url, timeout=30, follow_redirects=False) as client:
        answer = client.post(f"{CONSOLE}/login", data={"name": OPERATOR, "password": PASSWORD})
        assert answer.status_code == 303, answer.text
        yield client


def replay(client: httpx.Client, event_id: str) -> str:
    form = {"csrf": csrf_of(client.get(f"{CONSOLE}/parked").text), "provider": "razorpay",
            "event_id": event_id, "back": f"{CONSOLE}/parked"}  # fmt: skip
    answer = client.post(f"{CONSOLE}/parked/replay", data=form)
    assert answer.status_code == 303, answer.text
    return client.get(answer.headers["location"]).text


def parked_key(conn: psycopg.Connection[Any]) -> str:
    [(key,)] = conn.execute("SELECT event_id FROM processed_webhooks WHERE outcome = 'parked'")
    return str(key)


def deliver(served_app: Served) -> None:
    delivery = capture()
    with served_app.client() as client:
        answer = client.post(delivery.path, content=delivery.body, headers=delivery.headers)
    assert answer.json()["status"] == "parked"


def test_async_hooks_replay_on_the_apps_own_loop(app):
    running, conn = app
    deliver(running)
    Loop.behaviour = "apply"
    with operator(running.base_url) as client:
        assert "Replayed: the delivery was applied." in replay(client, parked_key(conn))
    assert conn.execute("SELECT ref FROM paid").fetchall() == [("order_fa000001",)]


@pytest.mark.parametrize(
    ("behaviour", "said", "recorded"),
    [
        ("raise", "Replay failed with an error", "handler_failed"),
        ("commit", "committed or rolled back the transaction itself", "handler_committed"),
    ],
)
def test_a_handler_that_fails_a_replay_is_said_and_recorded(app, behaviour, said, recorded):
    running, conn = app
    deliver(running)
    key = parked_key(conn)
    Loop.behaviour = behaviour
    with operator(running.base_url) as client:
        assert said in replay(client, key)
        assert client.get(f"{CONSOLE}/parked").status_code == 200  # the console carries on
    assert parked_key(conn) == key  # still parked: nothing the handler did was kept
    done = conn.execute("SELECT action, result FROM payhooks_console_actions").fetchall()
    assert done == [("replay", recorded)]


@pytest.mark.parametrize(
    "lend_pool", [True, False], ids=["the app's pool", "a connection of its own"]
)
def test_hooks_written_for_dicts_replay_on_dict_rows(merchant_url, lend_pool):
    """``AsyncHooks(row_factory=dict_row)``: the console's own connection makes tuples, and
    the hooks' ``row["amount_paise"]`` must read there too."""
    with psycopg.connect(merchant_url, autocommit=True) as conn:
        payhooks.migrate(conn)
        add_operator(conn, OPERATOR, PASSWORD)
        conn.execute(written_for_dicts.ORDERS)
        with served(app_with(merchant_url, written_for_dicts.async_hooks, lend_pool)) as running:
            deliver(running)  # parked: no checkout yet
            conn.execute("INSERT INTO dict_orders VALUES ('order_fa000001', 100, 'INR', NULL)")
            with operator(running.base_url) as client:
                assert "Replayed: the delivery was applied." in replay(client, parked_key(conn))
        paid = conn.execute("SELECT paid_by FROM dict_orders").fetchall()
    assert paid == [("pay_fa00000001",)]


def test_a_replay_or_settlement_for_no_gateway_is_not_recorded(app):
    running, conn = app
    with operator(running.base_url) as client:
        csrf = csrf_of(client.get(f"{CONSOLE}/parked").text)
        for action, extra in (("replay", {}), ("settle", {"note": "refunded"})):
            form = {"csrf": csrf, "provider": "x" * 1000, "event_id": "evt", **extra}
            assert client.post(f"{CONSOLE}/parked/{action}", data=form).status_code == 303
    assert conn.execute("SELECT count(*) FROM payhooks_console_actions").fetchone() == (0,)


def test_a_console_on_a_database_payhooks_has_not_migrated_says_so(merchant_url):
    with psycopg.connect(merchant_url, autocommit=True) as conn:
        payhooks.migrate(conn)
        conn.execute("DROP TABLE payhooks_console_login_failures, payhooks_console_sessions")
    app = app_with(merchant_url, loop_bound_hooks(), lend_pool=False)
    with served(app) as running, loopback.Client(base_url=running.base_url, timeout=30) as client:
        answer = client.post(f"{CONSOLE}/login", data={"name": "a", "password": "b"})
    assert answer.status_code == 503
    assert "payhooks.migrate(conn)" in answer.text


@pytest.mark.parametrize(
    ("root_path", "prefix"),
    [
        ("/ops", "/ops"),
        ("//ops", "/ops"),  # a server's root_path "/" joined to a mount
        ("/pay hooks/", "/pay%20hooks"),
        ("", ""),
    ],
)
def test_the_prefix_is_one_local_encoded_path(root_path, prefix):
    assert prefix_of({"root_path": root_path}) == prefix
    assert local(None, prefix) == prefix + "/"
    assert local(prefix, prefix) == prefix + "/"
    assert local("//evil.example/x", prefix) == prefix + "/"


def test_a_closed_console_stays_closed(merchant_url):
    own = OwnPool(merchant_url)
    own().close()  # opened, then its pool closed by hand
    own.close()
    with pytest.raises(DatabaseUnavailable):
        own()
