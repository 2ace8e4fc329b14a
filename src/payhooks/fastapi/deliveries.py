"""One delivery on the merchant's pool: verified off the event loop, then claimed and applied
with the handlers in the claim's transaction.

A sync pool makes one thread hop for all of it (verify, parse, claim, handlers, commit); an
async pool makes one hop to verify and parse, then awaits the claim on the loop.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator

import anyio
import anyio.to_thread
import psycopg_pool

from payhooks.db import Connection, translated
from payhooks.events import Received
from payhooks.fastapi import claims
from payhooks.fastapi.hooks import AsyncConnection, AsyncHandler
from payhooks.fastapi.hooks import guarded as guarded_async
from payhooks.hooks import guarded
from payhooks.ingest import Handler, Receipt, header_map, ingest_received, receive
from payhooks.providers import Adapter

SyncPool = psycopg_pool.ConnectionPool[Connection]
AsyncPool = psycopg_pool.AsyncConnectionPool[AsyncConnection]
HeaderPairs = tuple[tuple[str, str], ...]
Deliver = Callable[[Adapter, bytes, HeaderPairs], Awaitable[Receipt]]


def received(adapter: Adapter, body: bytes, pairs: HeaderPairs) -> Received:
    """Verified, then parsed; a signature header repeated with two values is refused."""
    return receive(adapter, body, header_map(pairs, adapter))


def threaded(pool: SyncPool, handler: Handler, limiter: anyio.CapacityLimiter) -> Deliver:
    handler = guarded(handler)

    async def deliver(adapter: Adapter, body: bytes, pairs: HeaderPairs) -> Receipt:
        return await anyio.to_thread.run_sync(
            _deliver, pool, handler, adapter, body, pairs, limiter=limiter
        )

    return deliver


def _deliver(
    pool: SyncPool, handler: Handler, adapter: Adapter, body: bytes, pairs: HeaderPairs
) -> Receipt:
    verified = received(adapter, body, pairs)
    with translated(verified.event.event_id), autocommitted(pool) as conn:
        return ingest_received(conn, verified, handler)


def awaited(pool: AsyncPool, handler: AsyncHandler, limiter: anyio.CapacityLimiter) -> Deliver:
    handler = guarded_async(handler)

    async def deliver(adapter: Adapter, body: bytes, pairs: HeaderPairs) -> Receipt:
        verified = await anyio.to_thread.run_sync(received, adapter, body, pairs, limiter=limiter)
        with translated(verified.event.event_id):
            async with autocommitted_async(pool) as conn:
                return await claims.ingest_received(conn, verified, handler)

    return deliver


@contextlib.contextmanager
def autocommitted(pool: SyncPool) -> Iterator[Connection]:
    """A connection of the pool in autocommit for one delivery (the claim opens and commits
    a transaction of its own), given back as it was lent: the pool may be the app's own."""
    with pool.connection() as conn:
        lent = conn.autocommit
        conn.autocommit = True
        try:
            yield conn
        finally:
            if not conn.closed and conn.autocommit != lent:
                conn.autocommit = lent


@contextlib.asynccontextmanager
async def autocommitted_async(pool: AsyncPool) -> AsyncIterator[AsyncConnection]:
    async with pool.connection() as conn:
        lent = conn.autocommit
        await conn.set_autocommit(True)
        try:
            yield conn
        finally:
            if not conn.closed and conn.autocommit != lent:
                await conn.set_autocommit(lent)
