"""A merchant's app around ``payhooks.fastapi.router``: its own tables and hooks, on a sync or
an async pool (the same SQL both ways, so both paths answer alike)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from contextlib import (
    AbstractContextManager,
    asynccontextmanager,
    contextmanager,
    nullcontext,
    suppress,
)
from typing import Any

import psycopg
from fastapi import FastAPI
from psycopg_pool import AsyncConnectionPool, ConnectionPool

from payhooks import Adapter, Applied, EventKind, Hooks, Outcome
from payhooks.fastapi import AsyncHooks, router
from payhooks.sim.gateway import Delivery
from tests.factories import ADAPTERS, GATEWAY

KINDS = ["sync", "async"]
SCHEMA = (
    "CREATE TABLE merchant_checkouts (ref text PRIMARY KEY)",
    "CREATE TABLE merchant_orders (ref text PRIMARY KEY, paid_by text NOT NULL,"
    " paid_count int NOT NULL)",
)
CHECKED_OUT = "SELECT 1 FROM merchant_checkouts WHERE ref = %s"
PAID = (
    "INSERT INTO merchant_orders VALUES (%s, %s, 1) ON CONFLICT (ref) DO UPDATE"
    " SET paid_count = merchant_orders.paid_count + 1"
)
REF = "order_fa000001"


def prepare(conn: psycopg.Connection[Any], *checked_out: str) -> None:
    for statement in SCHEMA:
        conn.execute(statement)
    for ref in checked_out:
        conn.execute("INSERT INTO merchant_checkouts VALUES (%s)", (ref,))


def capture(ref: str = REF, payment_id: str = "pay_fa00000001", **kwargs: Any) -> Delivery:
    return GATEWAY.razorpay(
        "payment.captured", payment_id=payment_id, order_id=ref, amount_paise=100, **kwargs
    )


def failed(ref: str = REF) -> Delivery:
    return GATEWAY.razorpay(
        "payment.failed", payment_id="pay_fa00000003", order_id=ref, amount_paise=100
    )


def sync_hooks() -> Hooks:
    hooks = Hooks()

    @hooks.on(EventKind.PAYMENT_CAPTURED)
    def mark_paid(conn, event):
        if conn.execute(CHECKED_OUT, (event.merchant_ref,)).fetchone() is None:
            return Applied(outcome=Outcome.PARKED)
        conn.execute(PAID, (event.merchant_ref, event.payment_id))
        return Applied(outcome=Outcome.PROCESSED, order_id=event.merchant_ref)

    return hooks


def async_hooks() -> AsyncHooks:
    hooks = AsyncHooks()

    @hooks.on(EventKind.PAYMENT_CAPTURED)
    async def mark_paid(conn, event):
        found = await (await conn.execute(CHECKED_OUT, (event.merchant_ref,))).fetchone()
        if found is None:
            return Applied(outcome=Outcome.PARKED)
        await conn.execute(PAID, (event.merchant_ref, event.payment_id))
        return Applied(outcome=Outcome.PROCESSED, order_id=event.merchant_ref)

    return hooks


def ending_hooks(kind: str, call: str) -> Hooks | AsyncHooks:
    """Hooks that write, then end the claim's transaction themselves (``commit``,
    ``rollback``, or a ``COMMIT`` sent as SQL: ``sql_commit`` after the write,
    ``sql_commit_then_write`` before it), as a merchant used to owning it might; ``commit
    caught`` and ``rollback caught`` catch psycopg's refusal and carry on."""
    if kind == "sync":
        hooks = Hooks()

        @hooks.on(EventKind.PAYMENT_CAPTURED)
        def mark_paid(conn, event):
            for statement in _ending(call):
                if statement is None:
                    conn.execute(PAID, (event.merchant_ref, event.payment_id))
                elif statement == "COMMIT":
                    conn.execute(statement)
                else:
                    with _caught(statement):
                        getattr(conn, statement.removesuffix(" caught"))()

        return hooks
    async_hooks = AsyncHooks()

    @async_hooks.on(EventKind.PAYMENT_CAPTURED)
    async def mark_paid_async(conn, event):
        for statement in _ending(call):
            if statement is None:
                await conn.execute(PAID, (event.merchant_ref, event.payment_id))
            elif statement == "COMMIT":
                await conn.execute(statement)
            else:
                with _caught(statement):
                    await getattr(conn, statement.removesuffix(" caught"))()

    return async_hooks


def _caught(statement: str) -> AbstractContextManager[object]:
    """psycopg's refusal of the call, caught when ``statement`` says so."""
    return suppress(psycopg.ProgrammingError) if statement.endswith(" caught") else nullcontext()


def _ending(call: str) -> list[str | None]:
    """The steps of an ending hook: ``None`` is its write."""
    if call == "sql_commit":
        return [None, "COMMIT"]
    if call == "sql_commit_then_write":
        return ["COMMIT", None]
    return [None, call]


class Merchant:
    """The app, and a way to reach its pool from the test's thread while it is served."""

    def __init__(
        self,
        database_url: str,
        kind: str,
        *,
        adapters: list[Adapter] | None = None,
        hooks: Any = None,
        **pool_args: Any,
    ) -> None:
        pool_args = {"min_size": 1, "max_size": 4, **pool_args}
        self.pool: ConnectionPool[Any] | AsyncConnectionPool[Any]
        if kind == "sync":
            self.pool = ConnectionPool(database_url, open=False, **pool_args)
            hooks = hooks or sync_hooks()
        else:
            self.pool = AsyncConnectionPool(database_url, open=False, **pool_args)
            hooks = hooks or async_hooks()
        self.loop: asyncio.AbstractEventLoop | None = None
        self.app = FastAPI(lifespan=self._lifespan)
        served = list(ADAPTERS.values()) if adapters is None else adapters
        self.app.include_router(router(adapters=served, hooks=hooks, pool=self.pool))

    @asynccontextmanager
    async def _lifespan(self, app: FastAPI) -> AsyncIterator[None]:
        self.loop = asyncio.get_running_loop()
        await self._call("open", wait=True)
        try:
            yield
        finally:
            await self._call("close")

    async def _call(self, name: str, **kwargs: Any) -> Any:
        result = getattr(self.pool, name)(**kwargs)
        return await result if isinstance(self.pool, AsyncConnectionPool) else result

    def run(self, name: str, *args: Any) -> Any:
        """A pool method, called from the test's thread (on the server's loop if async)."""
        if isinstance(self.pool, ConnectionPool):
            return getattr(self.pool, name)(*args)
        assert self.loop is not None, "the app is not served"
        return asyncio.run_coroutine_threadsafe(getattr(self.pool, name)(*args), self.loop).result()

    @contextmanager
    def every_connection_taken(self) -> Iterator[list[Any]]:
        taken = [self.run("getconn") for _ in range(self.pool.max_size)]
        try:
            yield taken
        finally:
            for conn in taken:
                self.run("putconn", conn)
