"""One delivery on the merchant's pool, through the shared ``payhooks.intake.endpoint`` step:
verified off the event loop, then claimed and applied with the handlers in the claim's
transaction.

A sync pool makes one thread hop for all of it (verify, parse, claim, handlers, commit); an
async pool makes one hop to verify and parse, then awaits the claim on the loop.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator

import anyio
import anyio.to_thread
import psycopg_pool

from payhooks.aio import claims
from payhooks.aio.hooks import AsyncConnection, AsyncHandler
from payhooks.aio.hooks import guarded as guarded_async
from payhooks.events import Received
from payhooks.intake.endpoint import Claim, Endpoint, HeaderPairs, Reply
from payhooks.intake.hooks import guarded
from payhooks.intake.ingest import Handler, Receipt, ingest_received
from payhooks.plumbing.db import Connection, translated
from payhooks.plumbing.pools import watched, watched_async

SyncPool = psycopg_pool.ConnectionPool[Connection]
AsyncPool = psycopg_pool.AsyncConnectionPool[AsyncConnection]
Deliver = Callable[[Endpoint, str, bytes, HeaderPairs], Awaitable[Reply]]


def threaded(pool: SyncPool, handler: Handler, limiter: anyio.CapacityLimiter) -> Deliver:
    """A door's delivery over a sync pool: the whole claim runs on a worker thread."""
    claim = claimed(pool, guarded(handler))

    async def deliver(endpoint: Endpoint, gateway: str, body: bytes, pairs: HeaderPairs) -> Reply:
        return await anyio.to_thread.run_sync(
            endpoint.deliver, gateway, body, pairs, claim, limiter=limiter
        )

    return deliver


def claimed(pool: SyncPool, handler: Handler) -> Claim:
    """The claim on a connection of a sync pool, autocommit, driver errors translated."""

    def claim(received: Received) -> Receipt:
        with translated(received.event.event_id), autocommitted(pool) as conn:
            return ingest_received(conn, received, handler)

    return claim


def awaited(pool: AsyncPool, handler: AsyncHandler, limiter: anyio.CapacityLimiter) -> Deliver:
    """A door's delivery over an async pool: verified on a worker thread, claimed on
    the event loop."""
    handler = guarded_async(handler)

    async def claim(received: Received) -> Receipt:
        with translated(received.event.event_id):
            async with autocommitted_async(pool) as conn:
                return await claims.ingest_received(conn, received, handler)

    async def offload(verify: Callable[[], Received]) -> Received:
        return await anyio.to_thread.run_sync(verify, limiter=limiter)

    async def deliver(endpoint: Endpoint, gateway: str, body: bytes, pairs: HeaderPairs) -> Reply:
        return await endpoint.deliver_async(
            gateway, body, pairs, claim, offload=offload, pause=anyio.sleep
        )

    return deliver


@contextlib.contextmanager
def autocommitted(pool: SyncPool) -> Iterator[Connection]:
    """A connection of the pool in autocommit for one delivery (the claim opens and commits
    a transaction of its own), given back as it was lent: the pool may be the app's own.
    One found lost (the database restarted or failed over while it sat idle) makes the pool
    try its other idle ones at once (``payhooks.plumbing.pools.watched``): that delivery is answered
    503 and retried, and the next ones are not handed the other dead connections."""
    with watched(pool) as conn:
        lent = conn.autocommit
        conn.autocommit = True
        try:
            yield conn
        finally:
            if not conn.closed and conn.autocommit != lent:
                conn.autocommit = lent


@contextlib.asynccontextmanager
async def autocommitted_async(pool: AsyncPool) -> AsyncIterator[AsyncConnection]:
    """``autocommitted`` on an async pool."""
    async with watched_async(pool) as conn, claims.autocommitted(conn):
        yield conn
