"""What ``router()`` and ``AsyncHooks`` refuse when the app is built, rather than on the first
delivery; and the integration's place in the layers."""

from __future__ import annotations

import asyncio
import subprocess
import sys

import pytest
from psycopg_pool import AsyncConnectionPool, ConnectionPool

from payhooks import Applied, Event, EventKind, Hooks, Outcome, Provider
from payhooks.fastapi import AsyncHooks, router
from tests.factories import ADAPTERS

URL = "postgresql://nowhere.invalid/never-opened"  # the pools below are never opened


def event(kind: EventKind = EventKind.PAYMENT_CAPTURED) -> Event:
    return Event(
        provider=Provider.RAZORPAY,
        kind=kind,
        event_type="payment.captured",
        event_id="evt_setup",
        payload_sha256="0" * 64,
    )


def test_an_async_pool_refuses_sync_hooks():
    with pytest.raises(TypeError, match="AsyncHooks"):
        router(adapters=ADAPTERS.values(), hooks=Hooks(), pool=AsyncConnectionPool(URL, open=False))


def test_a_sync_pool_refuses_async_hooks():
    with pytest.raises(TypeError, match="AsyncConnectionPool"):
        router(adapters=ADAPTERS.values(), hooks=AsyncHooks(), pool=ConnectionPool(URL, open=False))


def test_a_sync_pool_refuses_a_bare_async_handler():
    async def handler(conn, event):
        return Applied(outcome=Outcome.PROCESSED)

    with pytest.raises(TypeError, match="AsyncConnectionPool"):
        router(adapters=ADAPTERS.values(), hooks=handler, pool=ConnectionPool(URL, open=False))


def test_something_other_than_a_psycopg_pool_is_refused():
    with pytest.raises(TypeError, match="psycopg_pool"):
        router(adapters=ADAPTERS.values(), hooks=Hooks(), pool=object())  # type: ignore[call-overload]


def test_two_adapters_for_one_gateway_are_refused():
    razorpay = ADAPTERS[Provider.RAZORPAY]
    with pytest.raises(ValueError, match="two adapters for razorpay"):
        router(adapters=[razorpay, razorpay], hooks=Hooks(), pool=ConnectionPool(URL, open=False))


def test_a_router_without_adapters_is_refused():
    with pytest.raises(ValueError, match="at least one adapter"):
        router(adapters=[], hooks=Hooks(), pool=ConnectionPool(URL, open=False))


def test_async_hooks_refuse_a_plain_function():
    hooks = AsyncHooks()
    with pytest.raises(TypeError, match="not an async def"):

        @hooks.on(EventKind.PAYMENT_CAPTURED)
        def mark_paid(conn, event):
            return None


def test_async_hooks_need_a_kind():
    with pytest.raises(ValueError, match="EventKind"):
        AsyncHooks().on()


def test_async_hooks_run_in_order_and_the_last_answer_counts():
    hooks, seen = AsyncHooks(), []

    @hooks.on(EventKind.PAYMENT_CAPTURED, EventKind.PAYMENT_AUTHORIZED)
    async def first(conn, event):
        seen.append("first")

    @hooks.on(EventKind.PAYMENT_CAPTURED)
    async def second(conn, event):
        seen.append("second")
        return Applied(outcome=Outcome.PROCESSED, order_id="merchant-order-7")

    applied = asyncio.run(hooks(None, event()))  # these hooks never touch the connection
    assert seen == ["first", "second"] and applied.order_id == "merchant-order-7"


def test_an_async_hook_that_parks_ends_the_chain():
    """As ``Hooks``: a later handler neither runs after a park nor replaces it."""
    hooks, seen = AsyncHooks(), []

    @hooks.on(EventKind.PAYMENT_CAPTURED)
    async def parks(conn, event):
        seen.append("parks")
        return Applied(outcome=Outcome.PARKED)

    @hooks.on(EventKind.PAYMENT_CAPTURED)
    async def later(conn, event):
        seen.append("later")
        return Applied(outcome=Outcome.IGNORED)

    applied = asyncio.run(hooks(None, event()))  # these hooks never touch the connection
    assert seen == ["parks"] and applied.outcome is Outcome.PARKED


def test_an_event_no_async_hook_is_registered_for_is_ignored():
    applied = asyncio.run(AsyncHooks()(None, event(EventKind.REFUND_PROCESSED)))
    assert applied.outcome is Outcome.IGNORED


def test_the_integration_imports_neither_the_service_nor_the_simulators():
    probe = (
        "import sys, payhooks.fastapi; "
        "print(sorted(m for m in sys.modules if m.startswith(('payhooks.service', 'payhooks.sim',"
        " 'payhooks.cli'))))"
    )
    found = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True
    ).stdout
    assert found.strip() == "[]"
