"""Connection pools that get over a database gone and back (a restart, a failover) by
themselves: one dead connection found is taken as news that the idle others went with it.
Used by the service's pools, the console's own (``payhooks.console``) and the webhook route on a
merchant's pool (``payhooks.fastapi``); needs psycopg_pool."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator, Iterator
from typing import Any

import psycopg_pool

log = logging.getLogger("payhooks")


class CheckedPool(psycopg_pool.ConnectionPool):
    """A pool that tries each connection before handing it out. One found dead (the database
    went away, or failed over, while it sat idle) makes the pool try every other idle one at
    once (``weeded``), and the caller is handed a live one or a new one on the same request.
    psycopg_pool's own ``check`` instead pauses 1 s, 2 s, 4 s, ... between the dead ones, so
    after a failover a pool holding a few idle connections would keep its caller past its
    wait and fail with the database already back."""

    def getconn(self, timeout: float | None = None) -> Any:
        """A connection checked alive; after a dead one every idle one is tried at
        once, so a failover costs one check, not one per connection."""
        conn = super().getconn(timeout)
        try:
            self.check_connection(conn)
        except Exception:
            self.putconn(conn)  # broken: dropped, and a replacement started
            weeded(self)
            conn = super().getconn(timeout)  # every idle one was just tried
        return conn


def weeded(pool: psycopg_pool.ConnectionPool) -> None:
    """Every idle connection of ``pool`` tried once, the dead ones dropped and replaced in the
    background. The webhook pools check no connection they hand out (a round trip on every
    delivery), so without this each connection the server reset while idle would be handed
    out once after the database came back, and answered 503: one loss found is taken as
    news that the others went with it."""
    with contextlib.suppress(Exception):  # a pool closing meanwhile: nothing to weed
        pool.check()
    log.warning("database_connection_lost", extra={"pool": pool.name})


async def weeded_async(pool: psycopg_pool.AsyncConnectionPool[Any]) -> None:
    """``weeded`` for an async pool."""
    with contextlib.suppress(Exception):
        await pool.check()
    log.warning("database_connection_lost", extra={"pool": pool.name})


@contextlib.contextmanager
def watched(pool: psycopg_pool.ConnectionPool[Any]) -> Iterator[Any]:
    """``pool.connection()``; one found lost when given back (the database restarted or failed
    over while it sat idle) makes the pool try its other idle ones at once (``weeded``), so the
    next callers are not handed the other dead ones, one failure each."""
    given = _Given()
    try:
        with pool.connection() as conn, given.back(conn):
            yield conn
    finally:
        if given.lost:
            weeded(pool)


@contextlib.asynccontextmanager
async def watched_async(pool: psycopg_pool.AsyncConnectionPool[Any]) -> AsyncIterator[Any]:
    """``watched`` for an async pool."""
    given = _Given()
    try:
        async with pool.connection() as conn:
            with given.back(conn):
                yield conn
    finally:
        if given.lost:
            await weeded_async(pool)


class _Given:
    """Whether a connection lent was lost when given back: read before the pool takes it
    back (and closes a broken one, which then no longer says so)."""

    lost = False

    @contextlib.contextmanager
    def back(self, conn: Any) -> Iterator[None]:
        try:
            yield
        finally:
            self.lost = conn.broken


__all__ = ["CheckedPool", "watched", "watched_async", "weeded", "weeded_async"]
